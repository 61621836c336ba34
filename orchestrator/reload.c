/* SPDX-License-Identifier: MIT */
/* The configuration read again on SIGHUP. See reload.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "orchestrator/reload.h"

#define CONFIG_FILE_MAX (1u << 20)
#define KEY_MAX 256

/* Read for each job, each request or each timer: "x." is every key below x. */
static const char *const live[] = {
        "retention_days", "pending_ttl_hours", "runtime.warm_seconds", "limits.", "network.", "notify.", NULL,
};
/* Fixed at start although below a live prefix: the store's and the watch's sizes. */
static const char *const fixed[] = {
        "limits.max_snapshot_bytes", "limits.max_snapshot_entries", "limits.max_store_bytes", "limits.max_watches", NULL,
};

static bool matches(const char *const *list, const char *key) {
        for (const char *const *p = list; *p; p++) {
                size_t n = strlen(*p);
                if ((*p)[n - 1] == '.' ? strncmp(key, *p, n) == 0 : streq(key, *p))
                        return true;
        }
        return false;
}

bool config_reload_live(const char *key) {
        return matches(live, key) && !matches(fixed, key);
}

/* The file's bytes and their JSON, read once. */
static int read_config(const char *path, char **ret_buf, size_t *ret_len, json_t **ret, TfwError *e) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        int r = fd < 0 ? -errno : read_full_fd_bounded(fd, CONFIG_FILE_MAX, ret_buf, ret_len);
        if (r < 0)
                return tfw_error(e, -r, "config_reload", "cannot read the configuration '%s': %s", path, strerror(-r));
        *ret = json_loadb(*ret_buf, *ret_len, JSON_REJECT_DUPLICATES, NULL);
        if (!*ret || !json_is_object(*ret)) {
                json_decref(*ret);
                *ret = NULL;
                return tfw_error(e, EINVAL, "config_reload", "the configuration '%s' is not a JSON object", path);
        }
        return 0;
}

int config_reload_raw(const char *path, json_t **ret, TfwError *e) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        return read_config(path, &buf, &len, ret, e);
}

static void add_key(char *list, const char *key) {
        size_t n = strlen(list);
        if (n + strlen(key) + 3 >= CONFIG_RELOAD_KEYS_MAX)
                return;
        snprintf(list + n, CONFIG_RELOAD_KEYS_MAX - n, "%s%s", n ? ", " : "", key);
}

/* Set (or remove, value NULL) the dotted key in the object o, making the objects on its way. */
static int set_key(json_t *o, const char *key, json_t *value) {
        char head[KEY_MAX];
        const char *dot = strchr(key, '.');
        if (!dot)
                return value ? json_object_set(o, key, value) : (json_object_del(o, key), 0);
        if ((size_t) (dot - key) >= sizeof(head))
                return -1;
        memcpy(head, key, (size_t) (dot - key));
        head[dot - key] = 0;
        json_t *sub = json_object_get(o, head);
        if (!json_is_object(sub)) {
                sub = json_object();
                if (!sub || json_object_set_new(o, head, sub) < 0)
                        return -1;
        }
        return set_key(sub, dot + 1, value);
}

/* Every leaf key that differs between a and b (an object missing on one side is an empty
 * one); live ones copied into merged. */
static int diff(const json_t *a, const json_t *b, const char *prefix, json_t *merged, ConfigReload *ret) {
        const char *k;
        json_t *v;
        json_t *empty = json_object();
        if (!empty)
                return -ENOMEM;
        const json_t *sides[2] = { a ? a : empty, b ? b : empty };
        int r = 0;
        for (int s = 0; r >= 0 && s < 2; s++)
                json_object_foreach((json_t *) sides[s], k, v) {
                        char key[KEY_MAX];
                        json_t *x = json_object_get(sides[0], k), *y = json_object_get(sides[1], k);
                        if (s == 1 && x)
                                continue; /* seen from a */
                        snprintf(key, sizeof(key), "%s%s", prefix, k);
                        bool xo = json_is_object(x), yo = json_is_object(y);
                        if ((xo || !x) && (yo || !y) && (xo || yo)) {
                                char sub[KEY_MAX + 2];
                                snprintf(sub, sizeof(sub), "%s.", key);
                                r = diff(x, y, sub, merged, ret);
                        } else if (!json_equal(x, y)) {
                                bool ok = config_reload_live(key);
                                add_key(ok ? ret->applied : ret->restart, key);
                                if (ok && set_key(merged, key, y) < 0)
                                        r = -ENOMEM;
                        }
                        if (r < 0)
                                break;
                }
        json_decref(empty);
        return r;
}

int config_reload(const char *path, const json_t *cur_raw, ConfigReload *ret, TfwError *e) {
        _cleanup_(json_decrefp) json_t *raw = NULL, *merged = NULL;
        _cleanup_config_ Config *check = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        *ret = (ConfigReload) {};
        int r = read_config(path, &buf, &len, &raw, e);
        if (r < 0)
                return r;
        /* The new file as a whole first: a file that fails changes nothing. */
        r = config_parse_buffer(buf, len, &check, e);
        if (r < 0) {
                tfw_error_prefix(e, "config '%s': ", path);
                return r;
        }
        merged = json_deep_copy(cur_raw);
        if (!merged)
                return tfw_error(e, ENOMEM, "config_reload", "out of memory");
        r = diff(cur_raw, raw, "", merged, ret);
        if (r < 0)
                return tfw_error(e, -r, "config_reload", "out of memory");
        if (!ret->applied[0])
                return 0;
        _cleanup_free_ char *text = json_dumps(merged, JSON_COMPACT);
        if (!text)
                return tfw_error(e, ENOMEM, "config_reload", "out of memory");
        r = config_parse_buffer(text, strlen(text), &ret->next, e);
        if (r < 0) {
                tfw_error_prefix(e, "the keys that can change now do not fit the values kept until a restart: ");
                return r;
        }
        ret->next_raw = TAKE_PTR(merged);
        return 0;
}
