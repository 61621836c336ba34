/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/time-util.h"
#include "controller/request.h"

void controller_request_done(ControllerRequest *r) {
        free(r->bytes);
        r->bytes = NULL;
        r->len = 0;
}

int controller_id_generate(const char *prefix, char ret[static REQUEST_ID_MAX + 1]) {
        char stamp[RFC3339_MAX];
        uint32_t rnd;

        if (strlen(prefix) > 16 || !request_id_is_valid(prefix))
                return -EINVAL;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -EIO;
        format_utc_stamp(now_realtime(), stamp);
        for (char *p = stamp; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                        *p = (char) (*p - 'A' + 'a');
        snprintf(ret, REQUEST_ID_MAX + 1, "%s-%s-%08" PRIx32, prefix, stamp, rnd);
        return 0;
}

static const char *const field_names[] = {"argv", "action_class", "timeout_seconds", "reason", "cwd", "id", NULL};

int controller_request_build(const json_t *fields, const RequestPolicy *limits, const char *id_prefix,
                             ControllerRequest *ret, TfwError *e) {
        _cleanup_(json_decrefp) json_t *req = NULL;
        _cleanup_request_ Request *parsed = NULL;
        ControllerRequest out = {};
        char gen[REQUEST_ID_MAX + 1];
        int r;

        if (!limits)
                limits = &request_policy_default;
        if (!json_is_object(fields))
                return tfw_error(e, EBADMSG, "bad_type", "the request's fields must be a JSON object");
        r = json_check_keys((json_t *) fields, field_names, NULL, e);
        if (r < 0)
                return r;

        /* The request in the order of contract section 4; values are the caller's, unchecked
         * here: the worker's parser below judges them. */
        req = json_object();
        if (!req || json_object_set_new(req, "version", json_integer(1)) < 0)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        json_t *id = json_object_get(fields, "id");
        if (!id || json_is_null(id)) {
                r = controller_id_generate(id_prefix ? id_prefix : "sub", gen);
                if (r < 0)
                        return tfw_error(e, r, "internal", "cannot make a request id: %s", strerror(-r));
                id = json_string(gen);
                out.id_generated = true;
        } else
                json_incref(id);
        if (json_object_set_new(req, "id", id) < 0)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        json_t *cls = json_object_get(fields, "action_class");
        if (json_object_set_new(req, "action_class",
                                cls && !json_is_null(cls) ? json_incref(cls) : json_string(CONTROLLER_DEFAULT_CLASS)) < 0)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        for (const char *const *k = (const char *const[]){"argv", "timeout_seconds", "reason", "cwd", NULL}; *k; k++) {
                json_t *v = json_object_get(fields, *k);
                /* null means "not given" for the optional ones; argv null is the parser's bad_type. */
                if (v && (!json_is_null(v) || streq(*k, "argv")) && json_object_set(req, *k, v) < 0)
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
        }

        out.bytes = json_dumps(req, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!out.bytes)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        out.len = strlen(out.bytes);

        const char *idv = json_string_value(json_object_get(req, "id"));
        r = request_parse_buffer(out.bytes, out.len, idv && request_id_is_valid(idv) ? idv : NULL, limits, &parsed, e);
        if (r < 0) {
                controller_request_done(&out);
                return r;
        }
        out.policy = action_class_policy(parsed->action_class);
        if (out.policy == ACTION_POLICY_REJECT) {
                controller_request_done(&out);
                return tfw_error(e, EPERM, "forbidden", "action class 'forbidden' is always rejected");
        }
        snprintf(out.id, sizeof(out.id), "%s", parsed->id);
        out.timeout_seconds = parsed->timeout_seconds;
        memcpy(out.sha256, parsed->sha256, sizeof(out.sha256));
        *ret = out;
        return 0;
}

/* A plain decimal integer, no sign, no spaces, at most 18 digits (anything longer is beyond
 * every limit anyway and would not fit jansson's integer). */
static int parse_seconds(const char *s, json_int_t *ret) {
        size_t n = strlen(s);
        if (n == 0 || n > 18 || strspn(s, "0123456789") != n)
                return -EINVAL;
        *ret = (json_int_t) strtoll(s, NULL, 10);
        return 0;
}

int controller_fields_from_strings(char *const *argv, size_t argc, const char *cls, const char *timeout,
                                   const char *reason, const char *id, json_t **ret, TfwError *e) {
        _cleanup_(json_decrefp) json_t *f = json_object(), *a = json_array();
        if (!f || !a)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        for (size_t i = 0; i < argc; i++) {
                /* jansson refuses to make a string of bytes that are not UTF-8. */
                json_t *s = json_string(argv[i]);
                if (!s)
                        return tfw_error(e, EBADMSG, "invalid_utf8", "argument %zu of the command is not valid UTF-8", i);
                if (json_array_append_new(a, s) < 0)
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
        }
        if (json_object_set(f, "argv", a) < 0)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        const struct {
                const char *key, *value, *option;
        } strs[] = {{"action_class", cls, "--class"}, {"reason", reason, "--reason"}, {"id", id, "--id"}};
        for (size_t i = 0; i < ELEMENTSOF(strs); i++) {
                if (!strs[i].value)
                        continue;
                json_t *s = json_string(strs[i].value);
                if (!s)
                        return tfw_error(e, EBADMSG, "invalid_utf8", "%s is not valid UTF-8", strs[i].option);
                if (json_object_set_new(f, strs[i].key, s) < 0)
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
        }
        if (timeout) {
                json_int_t t;
                if (parse_seconds(timeout, &t) < 0)
                        return tfw_error(e, EBADMSG, "bad_type", "--timeout '%.40s' is not a whole number of seconds",
                                         timeout);
                if (json_object_set_new(f, "timeout_seconds", json_integer(t)) < 0)
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
        }
        *ret = TAKE_PTR(f);
        return 0;
}

int controller_request_write(int inbox_fd, const ControllerRequest *r, TfwError *e) {
        char tmp[REQUEST_ID_MAX + 32], name[REQUEST_ID_MAX + 8];
        uint64_t rnd;
        int k;

        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return tfw_error(e, EIO, "internal", "getrandom failed");
        snprintf(tmp, sizeof(tmp), ".%s.json.%016" PRIx64, r->id, rnd);
        snprintf(name, sizeof(name), "%s.json", r->id);
        _cleanup_close_ int fd = openat(inbox_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return tfw_error(e, errno, "write_failed", "cannot create '.../inbox/%s': %m", tmp);
        k = write_all(fd, r->bytes, r->len);
        if (k >= 0)
                k = fsync_fd(fd);
        if (k >= 0 && renameat2(inbox_fd, tmp, inbox_fd, name, RENAME_NOREPLACE) < 0) {
                k = -errno;
                /* A file system without RENAME_NOREPLACE: look, then rename. Only the controller
                 * can race this (the inbox is its own), and never a hard link, which the worker
                 * would reject. */
                if (k == -EINVAL) {
                        if (faccessat(inbox_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) >= 0)
                                k = -EEXIST;
                        else if (renameat(inbox_fd, tmp, inbox_fd, name) >= 0)
                                k = 0;
                        else
                                k = -errno;
                }
        }
        if (k < 0) {
                (void) unlinkat(inbox_fd, tmp, 0);
                if (k == -EEXIST)
                        return tfw_error(e, EEXIST, "duplicate_id", "the inbox already holds '%s'", name);
                return tfw_error(e, k, "write_failed", "cannot write the request '%s' into the inbox: %s", name,
                                 strerror(-k));
        }
        (void) fsync_fd(inbox_fd);
        return 0;
}
