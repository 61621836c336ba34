/* SPDX-License-Identifier: MIT */
/* The worker configuration file (contract section 2). docs/config.md is the operator's
 * reference for every key, default and check made here; keep the two in step. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "common/size.h"
#include "parser/config.h"
#include "parser/image-ref.h"

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define TIB (UINT64_C(1) << 40)

#define STR_(x) #x
#define STR(x) STR_(x)

/* Longest key name we build ("runtime.extra_system_mounts[1023]" and the like). */
#define FIELD_MAX 64
/* Values echoed back in messages are cut to this many bytes. */
#define SHOW_MAX 80

static const char *const driver_table[_DRIVER_MAX] = {
        [DRIVER_RUNSC] = "runsc",
        [DRIVER_DOCKER] = "docker",
        [DRIVER_PODMAN] = "podman",
        [DRIVER_RUNC] = "runc",
};

static const char *const platforms[] = { "systrap", "ptrace", "kvm", NULL };

static const char *const default_system_mounts[] = {
        "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/alternatives",
        "/etc/ssl/certs",
};

/* Mount points the capsule itself owns: a system mount may not cover or replace them. */
static const char *const reserved_sandbox_paths[] = { "/proc", "/dev", "/sys", "/work", "/tmp" };

static const char *const top_keys[] = {
        "version", "name", "workspace", "state_dir", "results_dir", "container_uid",
        "container_gid", "concurrency", "retention_days", "audit_generations",
        "pending_ttl_hours", "runtime", "limits", "signing_key", "signing_identity", "cache", "notify", "network", NULL,
};
static const char *const runtime_keys[] = {
        "driver", "runsc", "runc", "platform", "rootfs", "system_mounts", "extra_system_mounts", "image",
        "warm_seconds", NULL,
};
static const char *const limits_keys[] = {
        "max_request_bytes", "max_argv", "max_argv_bytes", "default_timeout_seconds",
        "max_timeout_seconds", "max_snapshot_bytes", "max_snapshot_entries", "memory",
        "memory_swap", "cpus", "pids", "workspace_tmpfs", "tmp_tmpfs", "max_log_bytes",
        "max_artifact_bytes", "max_artifact_entries", "max_changes_bytes", "max_changes_entries", "max_store_bytes",
        "max_watches", NULL,
};

static const char *const cache_keys[] = { "paths", "max_bytes", "max_entries", NULL };
static const char *const notify_keys[] = { "command", "uid", "gid", "timeout_seconds", NULL };
static const char *const network_keys[] = { "allow", "max_upload_bytes", "max_download_bytes", NULL };

/* Names of /work that the worker gives a meaning of its own, so no cache may own them: the
 * control directory (snapshot/snapshot.h, SNAPSHOT_CONTROL_DIR: never part of a snapshot) and
 * the artifact directory (contract section 6, step 3). */
static const struct {
        const char *path, *what;
} reserved_cache_paths[] = {
        { ".tentaflake-worker", "the worker's control directory, never part of a snapshot" },
        { "artifacts", "the artifact directory: what a job leaves in /work/artifacts are its artifacts" },
};

/* Which optional keys the file spelled out, for the cross-key checks and their messages. */
typedef struct Given {
        bool state_dir, results_dir;
        bool runsc, runc, platform, system_mounts, extra_system_mounts;
        /* The first n_base_mounts of system_mounts are runtime.system_mounts' (given or the
         * default), the rest runtime.extra_system_mounts'. */
        size_t n_base_mounts;
        bool default_timeout, max_timeout;
} Given;

int config_runsc_root(const Config *c, char *buf, size_t size) {
        int n = snprintf(buf, size, CONFIG_RUNTIME_DIR_PREFIX "%s/runsc", c->name);
        return n > 0 && (size_t) n < size ? 0 : -ENAMETOOLONG;
}

const char *driver_to_string(RuntimeDriver d) {
        if ((unsigned) d >= _DRIVER_MAX)
                return NULL;
        return driver_table[d];
}

bool config_name_is_valid(const char *name) {
        size_t n;

        if (!name)
                return false;
        n = strlen(name);
        if (n == 0 || n > CONFIG_NAME_MAX)
                return false;
        if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
                      name[i] == '-'))
                        return false;
        return true;
}

/* A config value quoted in a message: cut to fit buf, anything but printable ASCII shown as
 * '?', so a hostile or mistaken value cannot break the one-line message. */
static const char *show_value(const char *s, char *buf, size_t size) {
        size_t i = 0;

        for (; s[i] && i < size - 4; i++)
                buf[i] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
        if (s[i]) {
                memcpy(buf + i, "...", 3);
                i += 3;
        }
        buf[i] = 0;
        return buf;
}
#define show(s, buf) show_value((s), (buf), sizeof(buf))

static int key_error(TfwError *e, int err, const char *code, const char *field, const char *fmt,
                     ...) _printf_(5, 6);
static int key_error(TfwError *e, int err, const char *code, const char *field, const char *fmt,
                     ...) {
        char reason[sizeof(e->message)];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(reason, sizeof(reason), fmt, ap);
        va_end(ap);
        return tfw_error(e, err, code, "key '%s': %s", field, reason);
}

static const char *field_name(char buf[static FIELD_MAX], const char *prefix, const char *key) {
        (void) snprintf(buf, FIELD_MAX, "%s%s", prefix, key);
        return buf;
}

static int get_object(json_t *obj, const char *key, json_t **ret, TfwError *e) {
        json_t *v = json_object_get(obj, key);

        if (!v) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_object(v))
                return key_error(e, EBADMSG, "bad_type", key, "must be a JSON object");
        *ret = v;
        return 0;
}

/* An integer key of obj within [min, max]; def when absent. JSON reals, strings, booleans
 * and null are bad_type (json_get_int_range). */
static int get_uint(json_t *obj, const char *prefix, const char *key, int64_t min, int64_t max,
                    uint64_t def, bool *ret_given, uint64_t *ret, TfwError *e) {
        char field[FIELD_MAX];
        int64_t v;
        int r;

        r = json_get_int_range(obj, key, field_name(field, prefix, key), false, min, max, &v, e);
        if (r == -ENOENT) {
                *ret = def;
                if (ret_given)
                        *ret_given = false;
                return 0;
        }
        if (r < 0)
                return r;
        *ret = (uint64_t) v;
        if (ret_given)
                *ret_given = true;
        return 0;
}

static int get_unsigned(json_t *obj, const char *key, int64_t min, int64_t max, unsigned def,
                        unsigned *ret, TfwError *e) {
        uint64_t v;
        int r = get_uint(obj, "", key, min, max, def, NULL, &v, e);
        if (r < 0)
                return r;
        *ret = (unsigned) v;
        return 0;
}

/* A size: a JSON non-negative integer (bytes) or a string parse_size() accepts ("64k", "2g",
 * "1000"), within [min, max]; def when absent. */
static int get_size(json_t *obj, const char *prefix, const char *key, uint64_t min, uint64_t max,
                    uint64_t def, bool *ret_given, uint64_t *ret, TfwError *e) {
        char field[FIELD_MAX], shown[SHOW_MAX], a[24], b[24], c[24];
        json_t *v = json_object_get(obj, key);
        uint64_t x;

        field_name(field, prefix, key);
        if (!v) {
                *ret = def;
                if (ret_given)
                        *ret_given = false;
                return 0;
        }
        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);
                if (i < 0)
                        return key_error(e, ERANGE, "out_of_range", field,
                                         "%" PRId64 " is negative, allowed %s..%s", (int64_t) i,
                                         format_size(min, a, sizeof(a)),
                                         format_size(max, b, sizeof(b)));
                x = (uint64_t) i;
        } else if (json_is_string(v)) {
                const char *s = json_string_value(v);
                int r = parse_size(s, &x);
                if (r == -ERANGE)
                        return key_error(e, ERANGE, "out_of_range", field,
                                         "size '%s' is too large, allowed %s..%s",
                                         show(s, shown), format_size(min, a, sizeof(a)),
                                         format_size(max, b, sizeof(b)));
                if (r < 0)
                        return key_error(e, EBADMSG, "bad_value", field,
                                         "invalid size '%s' (an integer, or digits with k, m or g)",
                                         show(s, shown));
        } else
                return key_error(e, EBADMSG, "bad_type", field,
                                 "must be a size: a string such as \"2g\" or a non-negative "
                                 "integer of bytes");

        if (x < min || x > max)
                return key_error(e, ERANGE, "out_of_range", field, "%s is out of range, allowed %s..%s",
                                 format_size(x, c, sizeof(c)), format_size(min, a, sizeof(a)),
                                 format_size(max, b, sizeof(b)));
        *ret = x;
        if (ret_given)
                *ret_given = true;
        return 0;
}

/* Absolute, normalised, at most CONFIG_PATH_MAX bytes, and not "/" (no key of this file may
 * sensibly name the whole host). */
static int check_path(const char *p, const char *field, TfwError *e) {
        char shown[SHOW_MAX];

        if (strlen(p) > CONFIG_PATH_MAX)
                return key_error(e, EBADMSG, "bad_value", field,
                                 "path '%s' is longer than %d bytes", show(p, shown),
                                 CONFIG_PATH_MAX);
        if (!path_is_absolute_normalized(p))
                return key_error(e, EBADMSG, "bad_value", field,
                                 "path '%s' must be absolute and normalised (no '.', '..', "
                                 "'//', trailing '/' or control characters)",
                                 show(p, shown));
        if (streq(p, "/"))
                return key_error(e, EBADMSG, "bad_value", field, "must not be '/'");
        return 0;
}

/* A path key: -ENOENT when absent (or null with allow_null); the string stays owned by obj. */
static int get_path(json_t *obj, const char *prefix, const char *key, bool required,
                    bool allow_null, const char **ret, TfwError *e) {
        char field[FIELD_MAX];
        const char *s;
        int r;

        field_name(field, prefix, key);
        r = json_get_string(obj, key, field, required, allow_null, &s, e);
        if (r < 0)
                return r;
        r = check_path(s, field, e);
        if (r < 0)
                return r;
        *ret = s;
        return 0;
}

static int strdup_to(char **dst, const char *s) {
        char *t = strdup(s);
        if (!t)
                return -ENOMEM;
        free(*dst);
        *dst = t;
        return 0;
}

static int oom(TfwError *e) {
        return tfw_error(e, ENOMEM, "io_error", "out of memory");
}

/* IDENTITY of a system mount, and signing_identity share one alphabet: printable ASCII
 * without spaces, 1..CONFIG_IDENTITY_MAX bytes. */
static bool identity_is_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > CONFIG_IDENTITY_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] <= 0x20 || s[i] >= 0x7f)
                        return false;
        return true;
}

static bool sandbox_path_is_reserved(const char *p) {
        for (size_t i = 0; i < ELEMENTSOF(reserved_sandbox_paths); i++)
                if (path_is_below_or_equal(p, reserved_sandbox_paths[i]))
                        return true;
        return false;
}

static void system_mount_done(SystemMount *m) {
        free(m->host);
        free(m->sandbox);
        free(m->identity);
        *m = (SystemMount) {};
}

/* One "HOST[:SANDBOX][=IDENTITY]". The first '=' starts IDENTITY (which may itself contain
 * ':' or '=', as in "sha256:…"); before it, the first ':' ends HOST. Neither path can
 * therefore contain ':' or '='. */
static int parse_system_mount(const char *s, const char *field, SystemMount *ret, TfwError *e) {
        _cleanup_free_ char *left = NULL;
        const char *eq = strchr(s, '='), *host, *sandbox;
        char shown[SHOW_MAX];
        SystemMount m = {};
        int r;

        if (eq && !identity_is_valid(eq + 1))
                return key_error(e, EBADMSG, "bad_value", field,
                                 "'%s': IDENTITY must be 1..%d printable ASCII characters "
                                 "without spaces",
                                 show(s, shown), CONFIG_IDENTITY_MAX);
        left = strndup(s, eq ? (size_t) (eq - s) : strlen(s));
        if (!left)
                return oom(e);
        char *colon = strchr(left, ':');
        host = left;
        sandbox = left;
        if (colon) {
                *colon = 0;
                sandbox = colon + 1;
        }
        r = check_path(host, field, e);
        if (r < 0)
                return r;
        if (colon) {
                if (strchr(sandbox, ':'))
                        return key_error(e, EBADMSG, "bad_value", field,
                                         "'%s': a second ':' (HOST and SANDBOX cannot contain "
                                         "':' or '=')",
                                         show(s, shown));
                r = check_path(sandbox, field, e);
                if (r < 0)
                        return r;
        }
        if (sandbox_path_is_reserved(sandbox))
                return key_error(e, EBADMSG, "bad_value", field,
                                 "sandbox path '%s' is one the capsule mounts itself (/proc, "
                                 "/dev, /sys, /work, /tmp or below)",
                                 show(sandbox, shown));

        m.host = strdup(host);
        m.sandbox = strdup(sandbox);
        m.identity = eq ? strdup(eq + 1) : NULL;
        if (!m.host || !m.sandbox || (eq && !m.identity)) {
                system_mount_done(&m);
                return oom(e);
        }
        *ret = m;
        return 0;
}

static int set_default_system_mounts(Config *c, TfwError *e) {
        size_t n = ELEMENTSOF(default_system_mounts);

        c->system_mounts = calloc(n, sizeof(SystemMount));
        if (!c->system_mounts)
                return oom(e);
        for (size_t i = 0; i < n; i++) {
                SystemMount *m = &c->system_mounts[c->n_system_mounts];
                m->host = strdup(default_system_mounts[i]);
                m->sandbox = strdup(default_system_mounts[i]);
                c->n_system_mounts++;
                if (!m->host || !m->sandbox)
                        return oom(e);
        }
        return 0;
}

/* The key that put system_mounts[i] there, quoted, for a message: 'runtime.system_mounts[2]',
 * 'runtime.extra_system_mounts[0]', or the default list. */
static const char *mount_origin(const Given *g, size_t i, char *buf, size_t size) {
        if (i >= g->n_base_mounts)
                (void) snprintf(buf, size, "'runtime.extra_system_mounts[%zu]'",
                                i - g->n_base_mounts);
        else if (g->system_mounts)
                (void) snprintf(buf, size, "'runtime.system_mounts[%zu]'", i);
        else
                (void) snprintf(buf, size, "the default 'runtime.system_mounts'");
        return buf;
}

/* Append the entries of v, the list of key ("runtime.system_mounts" or
 * "runtime.extra_system_mounts"), to c->system_mounts, each by parse_system_mount(). At most
 * CONFIG_MAX_SYSTEM_MOUNTS in all; no SANDBOX twice, across both lists and the default. */
static int parse_system_mounts(Config *c, json_t *v, const char *key, const Given *g, TfwError *e) {
        char field[FIELD_MAX], other[FIELD_MAX], shown[SHOW_MAX];
        size_t n, first = c->n_system_mounts;

        if (!json_is_array(v))
                return key_error(e, EBADMSG, "bad_type", key,
                                 "must be a list of strings \"HOST[:SANDBOX][=IDENTITY]\"");
        n = json_array_size(v);
        if (n > CONFIG_MAX_SYSTEM_MOUNTS - first)
                return key_error(e, E2BIG, "out_of_range", key,
                                 "%zu entries%s, at most %d system mounts allowed", n,
                                 first ? " after the others" : "", CONFIG_MAX_SYSTEM_MOUNTS);
        if (n == 0)
                return 0;
        SystemMount *grown = reallocarray(c->system_mounts, first + n, sizeof(SystemMount));
        if (!grown)
                return oom(e);
        c->system_mounts = grown;
        for (size_t i = 0; i < n; i++) {
                json_t *item = json_array_get(v, i);
                SystemMount *m = &c->system_mounts[first + i];
                int r;

                (void) snprintf(field, sizeof(field), "%s[%zu]", key, i);
                if (!json_is_string(item))
                        return key_error(e, EBADMSG, "bad_type", field, "must be a string");
                r = parse_system_mount(json_string_value(item), field, m, e);
                if (r < 0)
                        return r;
                c->n_system_mounts++;
                for (size_t j = 0; j < first + i; j++)
                        if (streq(c->system_mounts[j].sandbox, m->sandbox))
                                return key_error(e, EBADMSG, "bad_value", field,
                                                 "sandbox path '%s' is already mounted by %s",
                                                 show(m->sandbox, shown),
                                                 mount_origin(g, j, other, sizeof(other)));
        }
        return 0;
}

/* With docker or podman the image is the root: every runsc-only key given is refused. */
static int check_engine_runtime(const Config *c, const Given *given, TfwError *e) {
        const char *d = driver_to_string(c->driver);
        if (c->rootfs)
                return key_error(e, EINVAL, "inconsistent", "runtime.rootfs",
                                 "only the runsc driver uses a rootfs; with driver '%s' "
                                 "runtime.image is the root",
                                 d);
        if (given->system_mounts)
                return key_error(e, EINVAL, "inconsistent", "runtime.system_mounts",
                                 "only the runsc driver uses system mounts; with driver "
                                 "'%s' runtime.image is the root",
                                 d);
        if (given->extra_system_mounts)
                return key_error(e, EINVAL, "inconsistent", "runtime.extra_system_mounts",
                                 "only the runsc driver uses system mounts; with driver "
                                 "'%s' runtime.image is the root",
                                 d);
        if (given->runsc)
                return key_error(e, EINVAL, "inconsistent", "runtime.runsc",
                                 "not used with driver '%s' (the engine runs its own "
                                 "registered runsc)",
                                 d);
        if (given->runc)
                return key_error(e, EINVAL, "inconsistent", "runtime.runc", "only used with driver 'runc'");
        if (given->platform)
                return key_error(e, EINVAL, "inconsistent", "runtime.platform",
                                 "not used with driver '%s' (the platform is set where "
                                 "the engine registers runsc)",
                                 d);
        if (!c->image)
                return key_error(e, EINVAL, "missing_field", "runtime.image",
                                 "required with driver '%s'", d);
        return 0;
}

/* runsc and runc run the bundle themselves: each refuses the other's keys and an image. */
static int check_bundle_runtime(const Config *c, const Given *given, TfwError *e) {
        const char *d = driver_to_string(c->driver);
        if (c->image)
                return key_error(e, EINVAL, "inconsistent", "runtime.image",
                                 "not used with driver '%s' (use runtime.rootfs or runtime.system_mounts)", d);
        if (c->driver == DRIVER_RUNC && given->runsc)
                return key_error(e, EINVAL, "inconsistent", "runtime.runsc", "not used with driver 'runc'");
        if (c->driver == DRIVER_RUNC && given->platform)
                return key_error(e, EINVAL, "inconsistent", "runtime.platform",
                                 "gVisor's platform; driver 'runc' runs the job on the host's kernel");
        if (c->driver == DRIVER_RUNC && c->rootfs)
                return key_error(e, EINVAL, "inconsistent", "runtime.rootfs",
                                 "not used with driver 'runc': its capsules' root is an empty directory the worker "
                                 "gives the user namespace's root (use runtime.system_mounts)");
        if (c->driver != DRIVER_RUNC && given->runc)
                return key_error(e, EINVAL, "inconsistent", "runtime.runc", "only used with driver 'runc'");
        return 0;
}

static int parse_runtime(Config *c, json_t *rt, Given *given, TfwError *e) {
        char shown[SHOW_MAX];
        const char *s;
        json_t *mounts = NULL, *extra = NULL;
        int r;

        c->driver = DRIVER_RUNSC;
        c->warm_seconds = CONFIG_DEFAULT_WARM_SECONDS;
        if (strdup_to(&c->platform, CONFIG_DEFAULT_PLATFORM) < 0)
                return oom(e);

        if (rt) {
                r = json_check_keys(rt, runtime_keys, "runtime.", e);
                if (r < 0)
                        return r;

                uint64_t warm;
                r = get_uint(rt, "runtime.", "warm_seconds", 0, CONFIG_WARM_SECONDS_MAX, CONFIG_DEFAULT_WARM_SECONDS,
                             NULL, &warm, e);
                if (r < 0)
                        return r;
                c->warm_seconds = (unsigned) warm;

                r = json_get_string(rt, "driver", "runtime.driver", false, false, &s, e);
                if (r >= 0) {
                        int d = -1;
                        for (int i = 0; i < _DRIVER_MAX; i++)
                                if (streq(s, driver_table[i]))
                                        d = i;
                        if (d < 0)
                                return key_error(e, EBADMSG, "bad_value", "runtime.driver",
                                                 "'%s' is not one of runsc, runc, docker, podman",
                                                 show(s, shown));
                        c->driver = (RuntimeDriver) d;
                } else if (r != -ENOENT)
                        return r;

                r = get_path(rt, "runtime.", "runsc", false, true, &s, e);
                if (r >= 0) {
                        if (strdup_to(&c->runsc, s) < 0)
                                return oom(e);
                        given->runsc = true;
                } else if (r != -ENOENT)
                        return r;

                /* runc's binary, or crun's: the same command line and the same spec. */
                r = get_path(rt, "runtime.", "runc", false, true, &s, e);
                if (r >= 0) {
                        if (strdup_to(&c->runc, s) < 0)
                                return oom(e);
                        given->runc = true;
                } else if (r != -ENOENT)
                        return r;

                r = json_get_string(rt, "platform", "runtime.platform", false, false, &s, e);
                if (r >= 0) {
                        bool ok = false;
                        for (const char *const *p = platforms; *p; p++)
                                ok = ok || streq(*p, s);
                        if (!ok)
                                return key_error(e, EBADMSG, "bad_value", "runtime.platform",
                                                 "'%s' is not one of systrap, ptrace, kvm",
                                                 show(s, shown));
                        if (strdup_to(&c->platform, s) < 0)
                                return oom(e);
                        given->platform = true;
                } else if (r != -ENOENT)
                        return r;

                r = get_path(rt, "runtime.", "rootfs", false, true, &s, e);
                if (r >= 0) {
                        if (strdup_to(&c->rootfs, s) < 0)
                                return oom(e);
                } else if (r != -ENOENT)
                        return r;

                r = json_get_string(rt, "image", "runtime.image", false, true, &s, e);
                if (r >= 0) {
                        if (!image_ref_is_pinned(s))
                                return key_error(e, EBADMSG, "bad_value", "runtime.image",
                                                 "'%s' is neither 'sha256:<64 lowercase hex>' "
                                                 "nor 'NAME@sha256:<64 lowercase hex>'",
                                                 show(s, shown));
                        if (strdup_to(&c->image, s) < 0)
                                return oom(e);
                } else if (r != -ENOENT)
                        return r;

                mounts = json_object_get(rt, "system_mounts");
                given->system_mounts = !!mounts;
                extra = json_object_get(rt, "extra_system_mounts");
                given->extra_system_mounts = !!extra;
        }

        if (!config_driver_runs_bundle(c->driver))
                return check_engine_runtime(c, given, e);
        r = check_bundle_runtime(c, given, e);
        if (r < 0)
                return r;
        /* No gVisor platform under runc: what results and the digest name instead. */
        if (c->driver == DRIVER_RUNC && strdup_to(&c->platform, "host") < 0)
                return oom(e);
        if (c->rootfs) {
                if (given->system_mounts)
                        return key_error(e, EINVAL, "inconsistent", "runtime.system_mounts",
                                         "not used when runtime.rootfs is set");
                if (given->extra_system_mounts)
                        return key_error(e, EINVAL, "inconsistent", "runtime.extra_system_mounts",
                                         "not used when runtime.rootfs is set");
                return 0;
        }
        r = mounts ? parse_system_mounts(c, mounts, "runtime.system_mounts", given, e)
                   : set_default_system_mounts(c, e);
        if (r < 0)
                return r;
        given->n_base_mounts = c->n_system_mounts;
        return extra ? parse_system_mounts(c, extra, "runtime.extra_system_mounts", given, e) : 0;
}

static int parse_limits(Config *c, json_t *lim, Given *given, TfwError *e) {
        ConfigLimits *l = &c->limits;
        json_t *empty = NULL;
        int r;

        if (lim) {
                r = json_check_keys(lim, limits_keys, "limits.", e);
                if (r < 0)
                        return r;
        } else {
                /* Every default then comes from the same code path as an explicit value. */
                empty = json_object();
                if (!empty)
                        return oom(e);
                lim = empty;
        }

#define SIZE(key, min, max, def, g)                                                              \
        do {                                                                                     \
                r = get_size(lim, "limits.", #key, (min), (max), (def), (g), &l->key, e);        \
                if (r < 0)                                                                       \
                        goto out;                                                                \
        } while (0)
#define UINT(key, min, max, def, g)                                                              \
        do {                                                                                     \
                r = get_uint(lim, "limits.", #key, (min), (max), (def), (g), &l->key, e);        \
                if (r < 0)                                                                       \
                        goto out;                                                                \
        } while (0)

        SIZE(max_request_bytes, 1 * KIB, 1 * MIB, 64 * KIB, NULL);
        UINT(max_argv, 1, 4096, 256, NULL);
        SIZE(max_argv_bytes, 1, 1 * MIB, 64 * KIB, NULL);
        UINT(default_timeout_seconds, 1, 604800, 300, &given->default_timeout);
        UINT(max_timeout_seconds, 1, 604800, 900, &given->max_timeout);
        SIZE(max_snapshot_bytes, 1, 1 * TIB, 1 * GIB, NULL);
        UINT(max_snapshot_entries, 1, 10000000, 200000, NULL);
        SIZE(memory, 16 * MIB, 1 * TIB, 2 * GIB, NULL);
        /* Absent, memory_swap follows memory (no swap), which is the contract's 2g/2g when
         * memory is not given either. */
        SIZE(memory_swap, 16 * MIB, 1 * TIB, l->memory, NULL);
        UINT(pids, 8, 4194304, 512, NULL);
        SIZE(workspace_tmpfs, 1 * MIB, 1 * TIB, 2 * GIB, NULL);
        SIZE(tmp_tmpfs, 1 * MIB, 1 * TIB, 256 * MIB, NULL);
        SIZE(max_log_bytes, 4 * KIB, 1 * GIB, 8 * MIB, NULL);
        SIZE(max_artifact_bytes, 1, 1 * TIB, 1 * GIB, NULL);
        UINT(max_artifact_entries, 1, 10000000, 200000, NULL);
        /* A job's changeset (docs/controller.md, "Changes"). */
        SIZE(max_changes_bytes, 1, 1 * TIB, 1 * GIB, NULL);
        UINT(max_changes_entries, 1, 10000000, 200000, NULL);
        /* The generation store (docs/snapshot.md, "Generations"): at least one snapshot. */
        SIZE(max_store_bytes, 1, 2 * TIB, MIN(2 * l->max_snapshot_bytes, 2 * TIB), NULL);
        /* The workspace's watch (docs/snapshot.md, "The watch's budget"): inotify watches are
         * root's to share; the daemon clamps this to a quarter of what the host has. */
        UINT(max_watches, 0, CONFIG_MAX_WATCHES_MAX, CONFIG_DEFAULT_MAX_WATCHES, NULL);
        l->open_files = CONFIG_DEFAULT_OPEN_FILES;
        l->file_size = 0;
#undef SIZE
#undef UINT

        {
                json_t *v = json_object_get(lim, "cpus");
                const char *s = "2.0";
                char shown[SHOW_MAX];

                if (v) {
                        if (!json_is_string(v)) {
                                r = key_error(e, EBADMSG, "bad_type", "limits.cpus",
                                              "must be a decimal string such as \"2.0\"");
                                goto out;
                        }
                        s = json_string_value(v);
                }
                if (strlen(s) >= sizeof(l->cpus)) {
                        r = key_error(e, EBADMSG, "bad_value", "limits.cpus",
                                      "'%s' is longer than %zu characters", show(s, shown),
                                      sizeof(l->cpus) - 1);
                        goto out;
                }
                r = parse_cpus(s, &l->cpus_milli);
                if (r == -EINVAL) {
                        r = key_error(e, EBADMSG, "bad_value", "limits.cpus",
                                      "invalid CPU count '%s' (digits, optionally a '.' and at "
                                      "most three decimals)",
                                      show(s, shown));
                        goto out;
                }
                if (r < 0 || l->cpus_milli < 10 || l->cpus_milli > 1024000) {
                        r = key_error(e, ERANGE, "out_of_range", "limits.cpus",
                                      "'%s' is out of range, allowed 0.01..1024", show(s, shown));
                        goto out;
                }
                memcpy(l->cpus, s, strlen(s) + 1);
        }
        r = 0;
out:
        json_decref(empty);
        return r;
}

static int parse_signing(Config *c, json_t *root, TfwError *e) {
        const char *s;
        int r;

        r = get_path(root, "", "signing_key", false, true, &s, e);
        if (r >= 0) {
                if (strdup_to(&c->signing_key, s) < 0)
                        return oom(e);
        } else if (r != -ENOENT)
                return r;

        r = json_get_string(root, "signing_identity", "signing_identity", false, true, &s, e);
        if (r >= 0) {
                if (!identity_is_valid(s))
                        return key_error(e, EBADMSG, "bad_value", "signing_identity",
                                         "must be 1..%d printable ASCII characters without "
                                         "spaces",
                                         CONFIG_IDENTITY_MAX);
                if (strdup_to(&c->signing_identity, s) < 0)
                        return oom(e);
        } else if (r != -ENOENT)
                return r;

        if (!!c->signing_key != !!c->signing_identity)
                return key_error(e, EINVAL, "inconsistent",
                                 c->signing_key ? "signing_identity" : "signing_key",
                                 "signing_key and signing_identity are set together or not at "
                                 "all");
        return 0;
}

const char *config_cache_path_problem(const char *p, size_t len) {
        if (len == 0)
                return "must not be empty";
        if (strlen(p) != len)
                return "must not contain a NUL byte";
        if (len > CONFIG_CACHE_PATH_MAX)
                return "is longer than " STR(CONFIG_CACHE_PATH_MAX) " bytes";
        if (p[0] == '/')
                return "must be relative to the workspace (no leading '/')";
        if (p[len - 1] == '/')
                return "must be normalised (no trailing '/')";
        for (const char *c = p; *c; c++)
                if ((unsigned char) *c < 0x20 || *c == 0x7f)
                        return "must not contain control characters";
        for (const char *s = p;;) {
                const char *slash = strchr(s, '/');
                size_t n = slash ? (size_t) (slash - s) : strlen(s);
                if (n == 0)
                        return "must be normalised (no '//')";
                if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
                        return "must be normalised (no '.' or '..' component)";
                if (n > NAME_MAX)
                        return "has a component longer than " STR(NAME_MAX) " bytes";
                if (!slash)
                        return NULL;
                s = slash + 1;
        }
}

/* cache.paths[i]: a valid path, not a reserved one nor inside one, and neither equal to,
 * inside nor around any of earlier[0..i-1]: the cache owns each path whole, so two of them
 * may not share entries. */
static int check_cache_path(char *const *earlier, json_t *item, size_t i, TfwError *e) {
        char field[FIELD_MAX], a[SHOW_MAX], b[SHOW_MAX];
        const char *p, *problem;

        (void) snprintf(field, sizeof(field), "cache.paths[%zu]", i);
        if (!json_is_string(item))
                return key_error(e, EBADMSG, "bad_type", field, "must be a string");
        p = json_string_value(item);
        problem = config_cache_path_problem(p, json_string_length(item));
        if (problem)
                return key_error(e, EBADMSG, "bad_value", field, "'%s' %s", show(p, a), problem);
        for (size_t k = 0; k < ELEMENTSOF(reserved_cache_paths); k++) {
                const char *name = reserved_cache_paths[k].path, *what = reserved_cache_paths[k].what;
                if (streq(p, name))
                        return key_error(e, EBADMSG, "bad_value", field, "'%s' is %s", name, what);
                if (path_is_below_or_equal(p, name))
                        return key_error(e, EBADMSG, "bad_value", field, "'%s' is inside '%s', %s",
                                         show(p, a), name, what);
        }
        for (size_t j = 0; j < i; j++) {
                const char *q = earlier[j];
                if (streq(p, q))
                        return key_error(e, EBADMSG, "bad_value", field, "'%s' is already cache.paths[%zu]",
                                         show(p, a), j);
                if (path_is_below_or_equal(p, q) || path_is_below_or_equal(q, p))
                        return key_error(e, EBADMSG, "bad_value", field,
                                         "'%s' and cache.paths[%zu] '%s' overlap: the cache owns each path "
                                         "whole, so no path may be inside another",
                                         show(p, a), j, show(q, b));
        }
        return 0;
}

static int parse_cache_paths(ConfigCache *cc, json_t *v, TfwError *e) {
        _cleanup_strv_free_ char **paths = NULL;
        size_t n;
        int r;

        if (!v)
                return key_error(e, EINVAL, "missing_field", "cache.paths",
                                 "required with cache: the workspace-relative paths the cache keeps");
        if (!json_is_array(v))
                return key_error(e, EBADMSG, "bad_type", "cache.paths",
                                 "must be a list of workspace-relative paths");
        n = json_array_size(v);
        if (n == 0)
                return key_error(e, EBADMSG, "bad_value", "cache.paths",
                                 "must name at least one path (leave cache out for no cache)");
        if (n > CONFIG_CACHE_PATHS_MAX)
                return key_error(e, E2BIG, "out_of_range", "cache.paths",
                                 "%zu entries, at most %d allowed", n, CONFIG_CACHE_PATHS_MAX);
        paths = calloc(n + 1, sizeof(char *));
        if (!paths)
                return oom(e);
        for (size_t i = 0; i < n; i++) {
                json_t *item = json_array_get(v, i);
                r = check_cache_path(paths, item, i, e);
                if (r < 0)
                        return r;
                paths[i] = strdup(json_string_value(item));
                if (!paths[i])
                        return oom(e);
        }
        cc->paths = TAKE_PTR(paths);
        cc->n_paths = n;
        return 0;
}

/* A section only the runsc driver can have (cache, network): *ret the object with only keys of
 * its own, NULL when absent; with another driver the key is refused first, whatever it holds,
 * and why says what the engines lack. */
static int get_runsc_section(const Config *c, json_t *root, const char *key, const char *const *keys, const char *why,
                             json_t **ret, TfwError *e) {
        char prefix[FIELD_MAX];
        json_t *v = NULL;
        int r = get_object(root, key, &v, e);
        if (r < 0 || !v) {
                *ret = NULL;
                return r;
        }
        if (!config_driver_runs_bundle(c->driver))
                return key_error(e, EINVAL, "inconsistent", key, "needs runtime.driver \"runsc\" or \"runc\": %s (driver '%s')", why,
                                 driver_to_string(c->driver));
        (void) snprintf(prefix, sizeof(prefix), "%s.", key);
        r = json_check_keys(v, keys, prefix, e);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

/* "cache": {"paths": [...], "max_bytes": "2g", "max_entries": 200000}. Absent: no cache. The
 * cache lives on the worker's side (the generation store), which only the runsc driver's
 * capsules see. */
static int parse_cache(Config *c, json_t *root, TfwError *e) {
        ConfigCache *cc = &c->cache;
        json_t *v = NULL;
        int r;

        r = get_runsc_section(c, root, "cache", cache_keys, "the engines' daemons cannot see the worker's cache", &v, e);
        if (r < 0 || !v)
                return r;
        r = get_size(v, "cache.", "max_bytes", 1, 2 * TIB, CONFIG_DEFAULT_CACHE_MAX_BYTES, NULL,
                     &cc->max_bytes, e);
        if (r < 0)
                return r;
        r = get_uint(v, "cache.", "max_entries", 1, 10000000, CONFIG_DEFAULT_CACHE_MAX_ENTRIES, NULL,
                     &cc->max_entries, e);
        if (r < 0)
                return r;
        return parse_cache_paths(cc, json_object_get(v, "paths"), e);
}

static int parse_notify_command(ConfigNotify *n, json_t *v, TfwError *e) {
        _cleanup_strv_free_ char **argv = NULL;
        size_t k;

        if (!v)
                return key_error(e, EINVAL, "missing_field", "notify.command",
                                 "required with notify: the hook's argv, an absolute path first");
        if (!json_is_array(v) || (k = json_array_size(v)) == 0)
                return key_error(e, EBADMSG, "bad_type", "notify.command",
                                 "must be a non-empty list of strings (the hook's argv, run without a shell)");
        if (k > CONFIG_NOTIFY_ARGV_MAX)
                return key_error(e, E2BIG, "out_of_range", "notify.command", "%zu entries, at most %d allowed", k,
                                 CONFIG_NOTIFY_ARGV_MAX);
        argv = calloc(k + 1, sizeof(char *));
        if (!argv)
                return oom(e);
        for (size_t i = 0; i < k; i++) {
                json_t *item = json_array_get(v, i);
                char field[FIELD_MAX];
                snprintf(field, sizeof(field), "notify.command[%zu]", i);
                if (!json_is_string(item) || json_string_length(item) == 0 || json_string_length(item) > 4096 ||
                    strlen(json_string_value(item)) != json_string_length(item))
                        return key_error(e, EBADMSG, "bad_type", field, "must be a string of 1 to 4096 bytes, no NUL");
                if (i == 0 && json_string_value(item)[0] != '/')
                        return key_error(e, EBADMSG, "bad_value", field,
                                         "must be an absolute path: the hook runs without a shell or PATH");
                argv[i] = strdup(json_string_value(item));
                if (!argv[i])
                        return oom(e);
        }
        n->command = TAKE_PTR(argv);
        return 0;
}

/* An id in the egress proxies' range (config.h): a proxy taken over through its parser would
 * share it with whoever the configuration gives it to, and with a uid could read that process's
 * /proc/PID/environ (a webhook's token). who says with whom and what it could reach. */
_Static_assert(CONFIG_NOTIFY_DEFAULT_ID < CONFIG_EGRESS_ID_FIRST || CONFIG_NOTIFY_DEFAULT_ID > CONFIG_EGRESS_ID_LAST,
               "the hook's default identity must never be an egress proxy's");
static int refuse_egress_id(uint64_t id, const char *field, const char *who, TfwError *e) {
        if (id == CONFIG_CAPSULE_ROOT_ID)
                return key_error(e, ERANGE, "out_of_range", field,
                                 "%" PRIu64 " is the id a runc capsule's root maps to on the host: it must own nothing "
                                 "but the capsules' empty roots", id);
        if (!config_id_is_egress(id))
                return 0;
        return key_error(e, ERANGE, "out_of_range", field,
                         "%" PRIu64 " is in %" PRIu32 "..%" PRIu32 ", the egress proxies' own ids: a proxy taken "
                         "over would share it with %s", id, CONFIG_EGRESS_ID_FIRST, CONFIG_EGRESS_ID_LAST, who);
}

/* "notify": {"command": [...], "uid": 65534, "gid": 65534, "timeout_seconds": 10}. Absent: no
 * hook. Never root, never the controller's uid: the agent could then signal or trace the hook
 * and whatever the operator gave it (a webhook's token); never an egress proxy's id either. */
static int parse_notify(Config *c, json_t *root, TfwError *e) {
        ConfigNotify *n = &c->notify;
        json_t *v = NULL;
        uint64_t x;
        int r;

        n->uid = n->gid = CONFIG_NOTIFY_DEFAULT_ID;
        n->timeout_seconds = CONFIG_NOTIFY_DEFAULT_TIMEOUT;
        r = get_object(root, "notify", &v, e);
        if (r < 0 || !v)
                return r;
        r = json_check_keys(v, notify_keys, "notify.", e);
        if (r < 0)
                return r;
        r = get_uint(v, "notify.", "uid", 1, 4294967294, CONFIG_NOTIFY_DEFAULT_ID, NULL, &x, e);
        if (r < 0)
                return r;
        n->uid = (uid_t) x;
        r = refuse_egress_id(x, "notify.uid", "the hook and could read its environment (a webhook's token)",
                             e);
        if (r < 0)
                return r;
        if (n->uid == c->container_uid)
                return key_error(e, EINVAL, "inconsistent", "notify.uid",
                                 "must not be container_uid (%u): the agent could signal or trace the hook",
                                 (unsigned) n->uid);
        r = get_uint(v, "notify.", "gid", 1, 4294967294, CONFIG_NOTIFY_DEFAULT_ID, NULL, &x, e);
        if (r < 0)
                return r;
        n->gid = (gid_t) x;
        r = refuse_egress_id(x, "notify.gid", "the hook and the files of its group", e);
        if (r < 0)
                return r;
        if (n->gid == c->container_gid)
                return key_error(e, EINVAL, "inconsistent", "notify.gid",
                                 "must not be container_gid (%u): the hook would reach the agent's group's files "
                                 "and give what it makes to the agent's group",
                                 (unsigned) n->gid);
        r = get_uint(v, "notify.", "timeout_seconds", 1, CONFIG_NOTIFY_TIMEOUT_MAX, CONFIG_NOTIFY_DEFAULT_TIMEOUT,
                     NULL, &x, e);
        if (r < 0)
                return r;
        n->timeout_seconds = (unsigned) x;
        return parse_notify_command(n, json_object_get(v, "command"), e);
}

static int parse_network_allow(ConfigNetwork *nw, json_t *v, TfwError *e) {
        _cleanup_strv_free_ char **allow = NULL;
        _cleanup_free_ EgressAllow *rules = NULL;
        char field[FIELD_MAX], shown[SHOW_MAX];
        size_t n;

        if (!v)
                return key_error(e, EINVAL, "missing_field", "network.allow",
                                 "required with network: the host:port entries jobs may reach (leave network out "
                                 "for none)");
        if (!json_is_array(v))
                return key_error(e, EBADMSG, "bad_type", "network.allow",
                                 "must be a list of \"host:port\", \"*.suffix:port\" or \"ip:port\" strings");
        n = json_array_size(v);
        if (n == 0)
                return key_error(e, EBADMSG, "bad_value", "network.allow",
                                 "must name at least one host:port (leave network out for none)");
        if (n > CONFIG_NETWORK_ALLOW_MAX)
                return key_error(e, E2BIG, "out_of_range", "network.allow", "%zu entries, at most %d allowed", n,
                                 CONFIG_NETWORK_ALLOW_MAX);
        allow = calloc(n + 1, sizeof(char *));
        rules = calloc(n, sizeof(EgressAllow));
        if (!allow || !rules)
                return oom(e);
        for (size_t i = 0; i < n; i++) {
                json_t *item = json_array_get(v, i);
                const char *reason = NULL;
                (void) snprintf(field, sizeof(field), "network.allow[%zu]", i);
                if (!json_is_string(item) || json_string_length(item) > CONFIG_NETWORK_ENTRY_MAX ||
                    strlen(json_string_value(item)) != json_string_length(item))
                        return key_error(e, EBADMSG, "bad_type", field, "must be a string of at most %d bytes, no NUL",
                                         CONFIG_NETWORK_ENTRY_MAX);
                const char *s = json_string_value(item);
                if (egress_allow_parse(s, &rules[i], &reason) < 0)
                        return key_error(e, EBADMSG, "bad_value", field, "'%s': %s", show(s, shown), reason);
                for (size_t j = 0; j < i; j++)
                        if (strcasecmp(allow[j], s) == 0)
                                return key_error(e, EBADMSG, "bad_value", field, "'%s' is already network.allow[%zu]",
                                                 show(s, shown), j);
                allow[i] = strdup(s);
                if (!allow[i])
                        return oom(e);
        }
        nw->allow = TAKE_PTR(allow);
        nw->rules = TAKE_PTR(rules);
        nw->n_allow = n;
        return 0;
}

/* "network": {"allow": [...], "max_upload_bytes": "1m", "max_download_bytes": "2g"}. Absent: no
 * network at all (no proxy, no variable, no stream). The proxy's streams are passed to runsc
 * itself, which only the runsc driver does. */
static int parse_network(Config *c, json_t *root, TfwError *e) {
        ConfigNetwork *nw = &c->network;
        json_t *v = NULL;
        int r;

        nw->max_upload_bytes = CONFIG_DEFAULT_MAX_UPLOAD_BYTES;
        nw->max_download_bytes = CONFIG_DEFAULT_MAX_DOWNLOAD_BYTES;
        r = get_runsc_section(c, root, "network", network_keys,
                              "the worker passes the proxy's streams to runsc itself, which an engine cannot", &v, e);
        if (r < 0 || !v)
                return r;
        r = get_size(v, "network.", "max_upload_bytes", 1, 1 * TIB, CONFIG_DEFAULT_MAX_UPLOAD_BYTES, NULL,
                     &nw->max_upload_bytes, e);
        if (r < 0)
                return r;
        r = get_size(v, "network.", "max_download_bytes", 1, 1 * TIB, CONFIG_DEFAULT_MAX_DOWNLOAD_BYTES, NULL,
                     &nw->max_download_bytes, e);
        if (r < 0)
                return r;
        return parse_network_allow(nw, json_object_get(v, "allow"), e);
}

/* The nesting rules between the directories and files the config names. Who may reach what:
 *   the agent writes the workspace and reads results_dir;
 *   the job reads every system mount's HOST and the rootfs;
 *   root alone may read state_dir and signing_key, and alone may write runsc.
 * So no key may put one of these where the wrong party reaches it. */
static int check_nesting(const Config *c, const Given *g, TfwError *e) {
        char a[SHOW_MAX], b[SHOW_MAX];
        const char *ws = c->workspace;
        const struct {
                const char *key, *path;
                bool defaulted;
        } dirs[] = {
                { "state_dir", c->state_dir, !g->state_dir },
                { "results_dir", c->results_dir, !g->results_dir },
        };

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                const char *d = dirs[i].path, *dflt = dirs[i].defaulted ? " (the default)" : "";
                if (path_is_below_or_equal(d, ws))
                        return key_error(e, EINVAL, "inconsistent", dirs[i].key,
                                         "'%s'%s is inside the workspace '%s', which the agent "
                                         "controls",
                                         show(d, a), dflt, show(ws, b));
                if (path_is_below_or_equal(ws, d))
                        return key_error(e, EINVAL, "inconsistent", dirs[i].key,
                                         "'%s'%s contains the workspace '%s'", show(d, a), dflt,
                                         show(ws, b));
        }
        /* runsc's root is root's alone and its own: no configured directory in it or around it. */
        char root[PATH_MAX];
        if (config_runsc_root(c, root, sizeof(root)) < 0)
                return key_error(e, ENAMETOOLONG, "bad_value", "name", "the runsc root it names is too long");
        const struct {
                const char *key, *path;
        } around[] = { { "workspace", ws }, { "state_dir", c->state_dir }, { "results_dir", c->results_dir } };
        for (size_t i = 0; i < ELEMENTSOF(around); i++)
                if (path_is_below_or_equal(around[i].path, root) || path_is_below_or_equal(root, around[i].path))
                        return key_error(e, EINVAL, "inconsistent", around[i].key,
                                         "'%s' overlaps the worker's runsc root '%s'", show(around[i].path, a),
                                         show(root, b));
        if (path_is_below_or_equal(c->results_dir, c->state_dir) ||
            path_is_below_or_equal(c->state_dir, c->results_dir))
                return key_error(e, EINVAL, "inconsistent", "results_dir",
                                 "'%s' and state_dir '%s' must be separate directories, neither "
                                 "inside the other",
                                 show(c->results_dir, a), show(c->state_dir, b));

        if (c->signing_key) {
                if (path_is_below_or_equal(c->signing_key, ws))
                        return key_error(e, EINVAL, "inconsistent", "signing_key",
                                         "'%s' is inside the workspace, which the agent reads",
                                         show(c->signing_key, a));
                if (path_is_below_or_equal(c->signing_key, c->results_dir))
                        return key_error(e, EINVAL, "inconsistent", "signing_key",
                                         "'%s' is inside results_dir, which the agent reads",
                                         show(c->signing_key, a));
        }
        if (c->runsc) {
                if (path_is_below_or_equal(c->runsc, ws))
                        return key_error(e, EINVAL, "inconsistent", "runtime.runsc",
                                         "'%s' is inside the workspace, which the agent writes",
                                         show(c->runsc, a));
                if (path_is_below_or_equal(c->runsc, c->results_dir))
                        return key_error(e, EINVAL, "inconsistent", "runtime.runsc",
                                         "'%s' is inside results_dir, where job output lands",
                                         show(c->runsc, a));
        }

        /* runc's binary (or crun's) runs as root, as runsc's does. */
        if (c->runc) {
                if (path_is_below_or_equal(c->runc, ws))
                        return key_error(e, EINVAL, "inconsistent", "runtime.runc",
                                         "'%s' is inside the workspace, which the agent writes", show(c->runc, a));
                if (path_is_below_or_equal(c->runc, c->results_dir))
                        return key_error(e, EINVAL, "inconsistent", "runtime.runc",
                                         "'%s' is inside results_dir, where job output lands", show(c->runc, a));
        }

        /* What the job sees must not overlap what the agent writes or root keeps. */
        for (size_t i = 0; i <= c->n_system_mounts; i++) {
                char field[FIELD_MAX];
                const char *exposed;

                const char *what = "";
                if (i < c->n_system_mounts) {
                        exposed = c->system_mounts[i].host;
                        if (i >= g->n_base_mounts)
                                (void) snprintf(field, sizeof(field),
                                                "runtime.extra_system_mounts[%zu]",
                                                i - g->n_base_mounts);
                        else if (g->system_mounts)
                                (void) snprintf(field, sizeof(field), "runtime.system_mounts[%zu]",
                                                i);
                        else {
                                (void) snprintf(field, sizeof(field), "runtime.system_mounts");
                                what = "default ";
                        }
                } else if (c->rootfs) {
                        exposed = c->rootfs;
                        (void) snprintf(field, sizeof(field), "runtime.rootfs");
                } else
                        break;

                const struct {
                        const char *key, *path;
                } hidden[] = {
                        { "workspace", ws },
                        { "state_dir", c->state_dir },
                        { "results_dir", c->results_dir },
                };
                for (size_t j = 0; j < ELEMENTSOF(hidden); j++)
                        if (path_is_below_or_equal(hidden[j].path, exposed) ||
                            path_is_below_or_equal(exposed, hidden[j].path))
                                return key_error(e, EINVAL, "inconsistent", field,
                                                 "%shost path '%s' overlaps %s '%s'; the job "
                                                 "would see it",
                                                 what, show(exposed, a), hidden[j].key,
                                                 show(hidden[j].path, b));
                if (c->signing_key && path_is_below_or_equal(c->signing_key, exposed))
                        return key_error(e, EINVAL, "inconsistent", field,
                                         "%shost path '%s' contains signing_key '%s'; the job "
                                         "would see it",
                                         what, show(exposed, a), show(c->signing_key, b));
        }
        return 0;
}

static int check_limits(const Config *c, const Given *g, TfwError *e) {
        const ConfigLimits *l = &c->limits;
        char a[24], b[24];

        if (l->default_timeout_seconds > l->max_timeout_seconds)
                return key_error(e, EINVAL, "inconsistent", "limits.default_timeout_seconds",
                                 "%" PRIu64 "%s is above limits.max_timeout_seconds %" PRIu64
                                 "%s",
                                 l->default_timeout_seconds,
                                 g->default_timeout ? "" : " (the default)",
                                 l->max_timeout_seconds, g->max_timeout ? "" : " (the default)");
        if (l->memory_swap < l->memory)
                return key_error(e, EINVAL, "inconsistent", "limits.memory_swap",
                                 "%s is below limits.memory %s (memory_swap counts memory plus "
                                 "swap)",
                                 format_size(l->memory_swap, a, sizeof(a)),
                                 format_size(l->memory, b, sizeof(b)));
        if (l->max_store_bytes < l->max_snapshot_bytes)
                return key_error(e, EINVAL, "inconsistent", "limits.max_store_bytes",
                                 "%s is below limits.max_snapshot_bytes %s: the store could not "
                                 "hold one snapshot",
                                 format_size(l->max_store_bytes, a, sizeof(a)),
                                 format_size(l->max_snapshot_bytes, b, sizeof(b)));
        if (l->max_snapshot_bytes > l->workspace_tmpfs)
                return key_error(e, EINVAL, "inconsistent", "limits.max_snapshot_bytes",
                                 "%s is above limits.workspace_tmpfs %s: a snapshot that large "
                                 "could not be copied into /work",
                                 format_size(l->max_snapshot_bytes, a, sizeof(a)),
                                 format_size(l->workspace_tmpfs, b, sizeof(b)));
        return 0;
}

/* The worker's name, its workspace, and its state and results directories (named after it
 * unless given). */
static int parse_name_and_dirs(Config *c, json_t *root, Given *given, TfwError *e) {
        char shown[SHOW_MAX];
        const char *s;
        int r;

        r = json_get_string(root, "name", "name", true, false, &s, e);
        if (r < 0)
                return r;
        if (!config_name_is_valid(s))
                return key_error(e, EBADMSG, "bad_value", "name",
                                 "'%s' does not match ^[a-z0-9][a-z0-9-]{0,47}$", show(s, shown));
        if (strdup_to(&c->name, s) < 0)
                return oom(e);

        r = get_path(root, "", "workspace", true, false, &s, e);
        if (r < 0)
                return r;
        if (strdup_to(&c->workspace, s) < 0)
                return oom(e);

        r = get_path(root, "", "state_dir", false, false, &s, e);
        if (r >= 0) {
                given->state_dir = true;
                if (strdup_to(&c->state_dir, s) < 0)
                        return oom(e);
        } else if (r != -ENOENT)
                return r;
        else if (asprintf(&c->state_dir, "/var/lib/tentaflake-worker-%s", c->name) < 0) {
                c->state_dir = NULL;
                return oom(e);
        }

        r = get_path(root, "", "results_dir", false, false, &s, e);
        if (r >= 0) {
                given->results_dir = true;
                if (strdup_to(&c->results_dir, s) < 0)
                        return oom(e);
        } else if (r != -ENOENT)
                return r;
        else if (asprintf(&c->results_dir, "/run/tentaflake-worker-%s/results", c->name) < 0) {
                c->results_dir = NULL;
                return oom(e);
        }
        return 0;
}

/* The controller's uid and gid, never one of the egress proxies' range. */
static int parse_container_ids(Config *c, json_t *root, TfwError *e) {
        int64_t v;
        int r;

        r = json_get_int_range(root, "container_uid", "container_uid", true, 1, 4294967294, &v,
                               e);
        if (r < 0)
                return r;
        c->container_uid = (uid_t) v;
        r = refuse_egress_id((uint64_t) v, "container_uid",
                             "the controller and could read its processes' environment", e);
        if (r < 0)
                return r;
        r = json_get_int_range(root, "container_gid", "container_gid", true, 1, 4294967294, &v,
                               e);
        if (r < 0)
                return r;
        c->container_gid = (gid_t) v;
        r = refuse_egress_id((uint64_t) v, "container_gid", "the controller's group and its files", e);
        if (r < 0)
                return r;
        return 0;
}

static int config_parse_json(json_t *root, Config *c, TfwError *e) {
        Given given = {};
        json_t *rt = NULL, *lim = NULL;
        int64_t v;
        int r;

        /* The version first: a file written for a later schema is "unsupported", not a list of
         * unknown keys. */
        r = json_get_int_range(root, "version", "version", true, INT64_MIN, INT64_MAX, &v, e);
        if (r < 0)
                return r;
        if (v != 1)
                return tfw_error(e, EINVAL, "unsupported_version",
                                 "key 'version': %" PRId64 " is not supported (only 1)", v);
        c->version = 1;

        r = json_check_keys(root, top_keys, "", e);
        if (r < 0)
                return r;

        r = parse_name_and_dirs(c, root, &given, e);
        if (r < 0)
                return r;

        r = parse_container_ids(c, root, e);
        if (r < 0)
                return r;

        r = get_unsigned(root, "concurrency", 1, CONFIG_CONCURRENCY_MAX, 1, &c->concurrency, e);
        if (r < 0)
                return r;
        r = get_unsigned(root, "retention_days", 1, 3650, 14, &c->retention_days, e);
        if (r < 0)
                return r;
        r = get_unsigned(root, "audit_generations", 1, 3650, 14, &c->audit_generations, e);
        if (r < 0)
                return r;
        c->engine_timeout_seconds = CONFIG_DEFAULT_ENGINE_TIMEOUT_SECONDS;
        r = get_unsigned(root, "pending_ttl_hours", 1, 8760, 72, &c->pending_ttl_hours, e);
        if (r < 0)
                return r;

        r = get_object(root, "runtime", &rt, e);
        if (r < 0)
                return r;
        r = parse_runtime(c, rt, &given, e);
        if (r < 0)
                return r;

        r = get_object(root, "limits", &lim, e);
        if (r < 0)
                return r;
        r = parse_limits(c, lim, &given, e);
        if (r < 0)
                return r;

        r = parse_signing(c, root, e);
        if (r < 0)
                return r;

        r = parse_cache(c, root, e);
        if (r < 0)
                return r;

        r = parse_notify(c, root, e);
        if (r < 0)
                return r;

        r = parse_network(c, root, e);
        if (r < 0)
                return r;

        r = check_limits(c, &given, e);
        if (r < 0)
                return r;
        return check_nesting(c, &given, e);
}

/* Security contract: accepts at most CONFIG_MAX_BYTES of operator-written bytes; refuses
 * anything json_load_object_strict refuses (NUL, bad UTF-8, duplicate keys, trailing data)
 * and every rule of docs/config.md; never reads past len. On success *ret is complete and
 * consistent; on failure *ret is untouched and e names the key. */
int config_parse_buffer(const char *buf, size_t len, Config **ret, TfwError *e) {
        _cleanup_json_ json_t *root = NULL;
        _cleanup_config_ Config *c = NULL;
        int r;

        if (len > CONFIG_MAX_BYTES)
                return tfw_error(e, E2BIG, "too_large", "the file is larger than %u bytes",
                                 CONFIG_MAX_BYTES);
        r = json_load_object_strict(buf, len, "the file", &root, e);
        if (r < 0)
                return r;
        c = calloc(1, sizeof(Config));
        if (!c)
                return oom(e);
        r = config_parse_json(root, c, e);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

int config_parse_fd(int fd, Config **ret, TfwError *e) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        int r;

        r = read_full_fd_bounded(fd, CONFIG_MAX_BYTES, &buf, &n);
        if (r == -E2BIG)
                return tfw_error(e, E2BIG, "too_large", "the file is larger than %u bytes",
                                 CONFIG_MAX_BYTES);
        if (r < 0)
                return tfw_error(e, -r, "io_error", "cannot read: %s", strerror(-r));
        return config_parse_buffer(buf, n, ret, e);
}

/* Security contract: opens path read-only, close-on-exec and non-blocking (a FIFO put in the
 * config's place cannot hang the root process), and refuses anything that is not a regular
 * file before reading a byte. A symlink is followed: the operator owns the path (NixOS links
 * /etc files into the store). */
int config_load(const char *path, Config **ret, TfwError *e) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                int err = errno;
                r = tfw_error(e, err, "io_error", "cannot open: %s", strerror(err));
        } else if (fstat(fd, &st) < 0) {
                int err = errno;
                r = tfw_error(e, err, "io_error", "cannot stat: %s", strerror(err));
        } else if (!S_ISREG(st.st_mode))
                r = tfw_error(e, S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "not_regular_file",
                              "not a regular file");
        else
                r = config_parse_fd(fd, ret, e);
        if (r < 0) {
                char shown[512];
                tfw_error_prefix(e, "config '%s': ", show(path, shown));
        }
        return r;
}

Config *config_free(Config *c) {
        if (!c)
                return NULL;
        free(c->name);
        free(c->workspace);
        free(c->state_dir);
        free(c->results_dir);
        free(c->runsc);
        free(c->runc);
        free(c->platform);
        free(c->rootfs);
        for (size_t i = 0; i < c->n_system_mounts; i++)
                system_mount_done(&c->system_mounts[i]);
        free(c->system_mounts);
        free(c->image);
        free(c->signing_key);
        free(c->signing_identity);
        strv_free(c->cache.paths);
        strv_free(c->notify.command);
        strv_free(c->network.allow);
        free(c->network.rules);
        free(c);
        return NULL;
}

void config_request_policy(const Config *c, RequestPolicy *ret) {
        *ret = (RequestPolicy) {
                .max_request_bytes = c->limits.max_request_bytes,
                .max_argv = c->limits.max_argv,
                .max_argv_bytes = c->limits.max_argv_bytes,
                .default_timeout_seconds = c->limits.default_timeout_seconds,
                .max_timeout_seconds = c->limits.max_timeout_seconds,
        };
}

/* How many caches the store may hold at once: the current one, a take-in per running job, and an
 * older one per running job that its lane's links still hold (the cache was replaced after it
 * was handed out). */
static uint64_t store_caches(const Config *c) {
        return 2 * (uint64_t) MAX(c->concurrency, 1u) + 1;
}

uint64_t config_store_tmpfs_bytes(const Config *c) {
        uint64_t store = c->limits.max_store_bytes, cache;

        if (!c->cache.paths)
                return store;
        if (__builtin_mul_overflow(c->cache.max_bytes, store_caches(c), &cache) ||
            __builtin_add_overflow(store, cache, &store))
                return UINT64_MAX;
        return store;
}

/* a * b + add, or UINT64_MAX when it overflows. */
static uint64_t mul_add_sat(uint64_t a, uint64_t b, uint64_t add) {
        uint64_t n;
        if (__builtin_mul_overflow(a, b, &n) || __builtin_add_overflow(n, add, &n))
                return UINT64_MAX;
        return n;
}

/* The directories a lane makes for the cache's mount points: one per component of each path
 * (snapshot/build-cache.c, mount_point()). */
static uint64_t cache_mount_point_dirs(const Config *c) {
        uint64_t n = 0;
        for (size_t i = 0; c->cache.paths && c->cache.paths[i]; i++) {
                n++;
                for (const char *p = c->cache.paths[i]; *p; p++)
                        n += *p == '/';
        }
        return n;
}

uint64_t config_store_cache_inodes(const Config *c) {
        if (!c->cache.paths)
                return 0;
        uint64_t lanes = (uint64_t) MAX(c->concurrency, 1u) + 1;
        uint64_t per_cache = mul_add_sat(1, c->cache.max_entries, c->cache.n_paths + CONFIG_STORE_CACHE_OWN_INODES);
        uint64_t caches = mul_add_sat(per_cache, store_caches(c), 64);
        return mul_add_sat(lanes, cache_mount_point_dirs(c), caches);
}

uint64_t config_store_tmpfs_inodes(const Config *c) {
        uint64_t lanes = (uint64_t) MAX(c->concurrency, 1u) + 1;
        uint64_t n = mul_add_sat(lanes, c->limits.max_snapshot_entries, 8 * lanes + 1024);
        return mul_add_sat(1, n, config_store_cache_inodes(c));
}
