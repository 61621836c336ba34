/* SPDX-License-Identifier: MIT */
/* parser/config.c: every key's default, type, range (both edges) and consistency rule, the
 * strict JSON layer, and config_load on files that are not plain config files.
 *
 * Most rules are one row of the cases[] table: the row edits the minimal config
 * (tests/data/config/minimal.json) and says either which error code the result must fail with
 * (and which key its message must name) or which value a key must then have. Each row is its
 * own cmocka test, named after the rule. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "parser/config.h"
#include "tests/unit/lib/tfw-test.h"

#define H64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define DEL "\x7f" /* a mods[] value that deletes the key */
#define MINIMAL "config/minimal.json"

typedef struct Case {
        const char *name;
        const char *code;      /* expected error code; NULL: the config must parse */
        const char *names;     /* the key the message must name (default: the first edited) */
        const char *get;       /* on success: the key to read back ... */
        const char *want;      /* ... and its expected value as text */
        const char *mods[11];  /* dotted key, JSON value (or DEL) pairs applied to MINIMAL */
} Case;

#define OK(n, get, want, ...) { n, NULL, NULL, get, want, { __VA_ARGS__ } }
#define BAD(n, code, names, ...) { n, code, names, NULL, NULL, { __VA_ARGS__ } }
#define DEFAULT(n, get, want) { n, NULL, NULL, get, want, { NULL } }

/* A string of n copies of c, for length edges (never freed: test-lifetime). */
static const char *rep(char c, size_t n, const char *prefix, const char *suffix) {
        size_t p = strlen(prefix), s = strlen(suffix);
        char *b = malloc(p + n + s + 1);
        assert_non_null(b);
        memcpy(b, prefix, p);
        memset(b + p, c, n);
        memcpy(b + p + n, suffix, s + 1);
        return b;
}

static char text[65536]; /* CONFIG_MAX_SYSTEM_MOUNTS mounts of a dozen bytes each fit */

/* The value of a dotted key in c, as text ("(null)" for NULL). */
static const char *join(char *const *l, char *buf, size_t size) {
        size_t n = 0;
        if (!l)
                return "(null)";
        buf[0] = 0;
        for (size_t i = 0; l[i]; i++)
                n += snprintf(buf + n, size - n, "%s%s", i ? "," : "", l[i]);
        return buf;
}

static const char *get_value(const Config *c, const char *key) {
        const ConfigLimits *l = &c->limits;
#define U(k, v)                                                                                  \
        if (streq(key, k)) {                                                                     \
                snprintf(text, sizeof(text), "%" PRIu64, (uint64_t) (v));                        \
                return text;                                                                     \
        }
#define S(k, v)                                                                                  \
        if (streq(key, k))                                                                       \
                return (v) ? (v) : "(null)";
        U("version", c->version);
        S("name", c->name);
        S("workspace", c->workspace);
        S("state_dir", c->state_dir);
        S("results_dir", c->results_dir);
        U("container_uid", c->container_uid);
        U("container_gid", c->container_gid);
        U("concurrency", c->concurrency);
        U("retention_days", c->retention_days);
        U("audit_generations", c->audit_generations);
        U("pending_ttl_hours", c->pending_ttl_hours);
        S("runtime.driver", driver_to_string(c->driver));
        S("runtime.runsc", c->runsc);
        S("runtime.runc", c->runc);
        S("runtime.platform", c->platform);
        U("runtime.warm_seconds", c->warm_seconds);
        S("runtime.rootfs", c->rootfs);
        S("runtime.image", c->image);
        U("limits.max_request_bytes", l->max_request_bytes);
        U("limits.max_argv", l->max_argv);
        U("limits.max_argv_bytes", l->max_argv_bytes);
        U("limits.default_timeout_seconds", l->default_timeout_seconds);
        U("limits.max_timeout_seconds", l->max_timeout_seconds);
        U("limits.max_snapshot_bytes", l->max_snapshot_bytes);
        U("limits.max_snapshot_entries", l->max_snapshot_entries);
        U("limits.max_watches", l->max_watches);
        U("limits.memory", l->memory);
        U("limits.memory_swap", l->memory_swap);
        U("limits.pids", l->pids);
        U("limits.workspace_tmpfs", l->workspace_tmpfs);
        U("limits.tmp_tmpfs", l->tmp_tmpfs);
        U("limits.max_log_bytes", l->max_log_bytes);
        U("limits.max_artifact_bytes", l->max_artifact_bytes);
        U("limits.max_artifact_entries", l->max_artifact_entries);
        U("limits.max_changes_bytes", l->max_changes_bytes);
        U("limits.max_changes_entries", l->max_changes_entries);
        S("signing_key", c->signing_key);
        S("signing_identity", c->signing_identity);
        U("cache.max_bytes", c->cache.max_bytes);
        U("cache.max_entries", c->cache.max_entries);
        U("cache.n_paths", c->cache.n_paths);
        U("notify.uid", c->notify.uid);
        U("notify.gid", c->notify.gid);
        U("notify.timeout_seconds", c->notify.timeout_seconds);
        U("network.n_allow", c->network.n_allow);
        U("network.max_upload_bytes", c->network.max_upload_bytes);
        U("network.max_download_bytes", c->network.max_download_bytes);
#undef U
#undef S
        if (streq(key, "limits.cpus")) {
                snprintf(text, sizeof(text), "%s/%" PRIu64, l->cpus, l->cpus_milli);
                return text;
        }
        /* Lists as "a,b,...", in the file's order; "(null)" when the key is absent. */
        if (streq(key, "notify.command"))
                return join(c->notify.command, text, sizeof(text));
        if (streq(key, "cache.paths"))
                return join(c->cache.paths, text, sizeof(text));
        if (streq(key, "network.allow"))
                return join(c->network.allow, text, sizeof(text));
        if (streq(key, "runtime.system_mounts")) {
                /* "host:sandbox=identity,..." with the parts that are set. */
                size_t n = 0;
                text[0] = 0;
                for (size_t i = 0; i < c->n_system_mounts; i++) {
                        const SystemMount *m = &c->system_mounts[i];
                        n += snprintf(text + n, sizeof(text) - n, "%s%s", i ? "," : "", m->host);
                        if (!streq(m->host, m->sandbox))
                                n += snprintf(text + n, sizeof(text) - n, ":%s", m->sandbox);
                        if (m->identity)
                                n += snprintf(text + n, sizeof(text) - n, "=%s", m->identity);
                }
                return text;
        }
        fail_msg("test bug: no getter for '%s'", key);
        return NULL;
}

/* MINIMAL with the edits applied, serialised. */
static char *build_config(const char *const *mods) {
        _cleanup_free_ char *base = tfw_read_fixture(MINIMAL, NULL);
        json_error_t je;
        json_t *root = json_loads(base, 0, &je);
        assert_non_null(root);

        for (size_t i = 0; mods[i]; i += 2) {
                char key[256];
                json_t *obj = root;
                char *dot;

                snprintf(key, sizeof(key), "%s", mods[i]);
                dot = strchr(key, '.');
                if (dot) {
                        *dot = 0;
                        obj = json_object_get(root, key);
                        if (!obj || !json_is_object(obj)) {
                                obj = json_object();
                                json_object_set_new(root, key, obj);
                        }
                }
                const char *leaf = dot ? dot + 1 : key;
                if (streq(mods[i + 1], DEL)) {
                        json_object_del(obj, leaf);
                        continue;
                }
                json_t *v = json_loads(mods[i + 1], JSON_DECODE_ANY, &je);
                if (!v)
                        fail_msg("test bug: bad JSON value for '%s': %s", mods[i], mods[i + 1]);
                json_object_set_new(obj, leaf, v);
        }
        char *s = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        assert_non_null(s);
        return s;
}

static void run_case(void **state) {
        const Case *t = *state;
        _cleanup_free_ char *json = build_config(t->mods);
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};
        int r;

        r = config_parse_buffer(json, strlen(json), &c, &e);
        if (!t->code) {
                if (r < 0)
                        fail_msg("%s: refused: %s (%s)", json, e.message, e.code);
                assert_non_null(c);
                if (t->get)
                        assert_string_equal(get_value(c, t->get), t->want);
                return;
        }
        if (r >= 0)
                fail_msg("%s: accepted, expected %s", json, t->code);
        assert_null(c);
        if (!e.code || !streq(e.code, t->code))
                fail_msg("%s: code %s, expected %s (%s)", json, e.code, t->code, e.message);
        char needle[256];
        snprintf(needle, sizeof(needle), "'%s", t->names ? t->names : t->mods[0]);
        if (!strstr(e.message, needle))
                fail_msg("message '%s' does not name %s", e.message, needle + 1);
        /* One line, whatever was in the file. */
        assert_null(strchr(e.message, '\n'));
}

/* clang-format off */
static const Case static_cases[] = {
        /* version */
        BAD("version_missing", "missing_field", "version", "version", DEL),
        BAD("version_2", "unsupported_version", NULL, "version", "2"),
        BAD("version_0", "unsupported_version", NULL, "version", "0"),
        BAD("version_negative", "unsupported_version", NULL, "version", "-1"),
        BAD("version_real", "bad_type", NULL, "version", "1.0"),
        BAD("version_string", "bad_type", NULL, "version", "\"1\""),
        BAD("version_null", "bad_type", NULL, "version", "null"),
        BAD("version_checked_before_unknown_keys", "unsupported_version", "version",
            "version", "2", "colour", "\"blue\""),

        /* unknown keys at every level */
        BAD("unknown_top_level", "unknown_field", "colour", "colour", "\"blue\""),
        BAD("unknown_runtime", "unknown_field", NULL, "runtime.engine", "\"runsc\""),
        BAD("unknown_limits", "unknown_field", NULL, "limits.swap", "\"1g\""),
        BAD("unknown_limits_case", "unknown_field", NULL, "limits.Memory", "\"1g\""),
        /* found by fuzz-config: a decoded "\n" in an unknown key reached the message */
        BAD("unknown_key_newline_not_echoed", "unknown_field", "limits.a?b", "limits.a\nb", "1"),
        BAD("unknown_key_escape_not_echoed", "unknown_field", "a?[2J", "a\x1b[2J", "1"),
        BAD("runtime_not_object", "bad_type", NULL, "runtime", "[]"),
        BAD("runtime_null", "bad_type", NULL, "runtime", "null"),
        BAD("limits_not_object", "bad_type", NULL, "limits", "\"2g\""),
        BAD("limits_null", "bad_type", NULL, "limits", "null"),
        OK("runtime_empty_object", "runtime.driver", "runsc", "runtime", "{}"),
        OK("limits_empty_object", "limits.memory", "2147483648", "limits", "{}"),

        /* name */
        BAD("name_missing", "missing_field", NULL, "name", DEL),
        BAD("name_number", "bad_type", NULL, "name", "7"),
        BAD("name_null", "bad_type", NULL, "name", "null"),
        BAD("name_empty", "bad_value", NULL, "name", "\"\""),
        BAD("name_leading_dash", "bad_value", NULL, "name", "\"-coder\""),
        BAD("name_uppercase", "bad_value", NULL, "name", "\"Hermes\""),
        BAD("name_underscore", "bad_value", NULL, "name", "\"hermes_coding\""),
        BAD("name_slash", "bad_value", NULL, "name", "\"../etc\""),
        BAD("name_newline_not_echoed", "bad_value", NULL, "name", "\"a\\nb\""),
        OK("name_one_char", "name", "0", "name", "\"0\""),
        OK("name_trailing_dash", "name", "a-", "name", "\"a-\""),

        /* workspace */
        BAD("workspace_missing", "missing_field", NULL, "workspace", DEL),
        BAD("workspace_number", "bad_type", NULL, "workspace", "1"),
        BAD("workspace_null", "bad_type", NULL, "workspace", "null"),
        BAD("workspace_relative", "bad_value", NULL, "workspace", "\"srv/ws\""),
        BAD("workspace_root", "bad_value", NULL, "workspace", "\"/\""),
        BAD("workspace_trailing_slash", "bad_value", NULL, "workspace", "\"/srv/ws/\""),
        BAD("workspace_dotdot", "bad_value", NULL, "workspace", "\"/srv/../ws\""),
        BAD("workspace_dot", "bad_value", NULL, "workspace", "\"/srv/./ws\""),
        BAD("workspace_double_slash", "bad_value", NULL, "workspace", "\"/srv//ws\""),
        BAD("workspace_control_char", "bad_value", NULL, "workspace", "\"/srv/w\\u0001s\""),
        BAD("workspace_empty", "bad_value", NULL, "workspace", "\"\""),

        /* state_dir, results_dir */
        DEFAULT("state_dir_default", "state_dir", "/var/lib/tentaflake-worker-hermes-coding"),
        DEFAULT("results_dir_default", "results_dir", "/run/tentaflake-worker-hermes-coding/results"),
        OK("state_dir_default_follows_name", "state_dir", "/var/lib/tentaflake-worker-x1",
           "name", "\"x1\""),
        OK("results_dir_default_follows_name", "results_dir", "/run/tentaflake-worker-x1/results",
           "name", "\"x1\""),
        OK("state_dir_set", "state_dir", "/srv/state", "state_dir", "\"/srv/state\""),
        OK("results_dir_set", "results_dir", "/srv/results", "results_dir", "\"/srv/results\""),
        BAD("state_dir_relative", "bad_value", NULL, "state_dir", "\"state\""),
        BAD("state_dir_null", "bad_type", NULL, "state_dir", "null"),
        BAD("state_dir_number", "bad_type", NULL, "state_dir", "1"),
        BAD("state_dir_root", "bad_value", NULL, "state_dir", "\"/\""),
        BAD("results_dir_relative", "bad_value", NULL, "results_dir", "\"results\""),
        BAD("results_dir_null", "bad_type", NULL, "results_dir", "null"),
        BAD("results_dir_root", "bad_value", NULL, "results_dir", "\"/\""),
        BAD("state_dir_inside_workspace", "inconsistent", "state_dir",
            "state_dir", "\"/var/lib/hermes-coding/workspace/.state\""),
        BAD("state_dir_is_workspace", "inconsistent", "state_dir",
            "state_dir", "\"/var/lib/hermes-coding/workspace\""),
        BAD("workspace_inside_state_dir", "inconsistent", "state_dir",
            "state_dir", "\"/var/lib/hermes-coding\""),
        BAD("workspace_inside_default_state_dir", "inconsistent", "state_dir",
            "workspace", "\"/var/lib/tentaflake-worker-hermes-coding/ws\""),
        BAD("results_dir_inside_workspace", "inconsistent", "results_dir",
            "results_dir", "\"/var/lib/hermes-coding/workspace/results\""),
        BAD("results_dir_is_workspace", "inconsistent", "results_dir",
            "results_dir", "\"/var/lib/hermes-coding/workspace\""),
        BAD("workspace_inside_results_dir", "inconsistent", "results_dir",
            "results_dir", "\"/var/lib/hermes-coding\""),
        BAD("state_dir_is_results_dir", "inconsistent", "results_dir",
            "state_dir", "\"/srv/tfw\"", "results_dir", "\"/srv/tfw\""),
        BAD("results_dir_inside_state_dir", "inconsistent", "results_dir",
            "state_dir", "\"/srv/tfw\"", "results_dir", "\"/srv/tfw/results\""),
        BAD("state_dir_inside_results_dir", "inconsistent", "results_dir",
            "state_dir", "\"/srv/tfw/results/state\"", "results_dir", "\"/srv/tfw/results\""),
        /* runsc's root, /run/tentaflake-worker-<name>/runsc, belongs to no configured directory. */
        BAD("results_dir_contains_runsc_root", "inconsistent", "results_dir",
            "results_dir", "\"/run/tentaflake-worker-hermes-coding\""),
        BAD("state_dir_inside_runsc_root", "inconsistent", "state_dir",
            "state_dir", "\"/run/tentaflake-worker-hermes-coding/runsc/state\""),
        BAD("workspace_is_runsc_root", "inconsistent", "workspace",
            "workspace", "\"/run/tentaflake-worker-hermes-coding/runsc\""),
        OK("results_dir_beside_runsc_root", "results_dir", "/run/tentaflake-worker-hermes-coding/out",
           "results_dir", "\"/run/tentaflake-worker-hermes-coding/out\""),
        OK("sibling_with_common_prefix_is_not_inside", "state_dir", "/srv/ws2",
           "workspace", "\"/srv/ws\"", "state_dir", "\"/srv/ws2\"", "results_dir", "\"/srv/ws-r\""),

        /* container_uid / container_gid */
        BAD("container_uid_missing", "missing_field", NULL, "container_uid", DEL),
        BAD("container_gid_missing", "missing_field", NULL, "container_gid", DEL),
        BAD("container_uid_0", "out_of_range", NULL, "container_uid", "0"),
        BAD("container_uid_negative", "out_of_range", NULL, "container_uid", "-1"),
        OK("container_uid_1", "container_uid", "1", "container_uid", "1"),
        OK("container_uid_max", "container_uid", "4294967294", "container_uid", "4294967294"),
        BAD("container_uid_4294967295", "out_of_range", NULL, "container_uid", "4294967295"),
        BAD("container_uid_real", "bad_type", NULL, "container_uid", "1000.0"),
        BAD("container_uid_string", "bad_type", NULL, "container_uid", "\"1000\""),
        BAD("container_gid_0", "out_of_range", NULL, "container_gid", "0"),
        OK("container_gid_1", "container_gid", "1", "container_gid", "1"),
        OK("container_gid_max", "container_gid", "4294967294", "container_gid", "4294967294"),
        BAD("container_gid_4294967295", "out_of_range", NULL, "container_gid", "4294967295"),
        BAD("container_gid_real", "bad_type", NULL, "container_gid", "1000.0"),
        BAD("container_gid_string", "bad_type", NULL, "container_gid", "\"1000\""),
        BAD("container_gid_bool", "bad_type", NULL, "container_gid", "true"),
        /* the egress proxies' own ids (issue 33 finding 4): refused at both ends, not beside them */
        BAD("container_uid_egress_first", "out_of_range", NULL, "container_uid", "2130706432"),
        BAD("container_uid_egress_last", "out_of_range", NULL, "container_uid", "2130771967"),
        OK("container_uid_below_egress", "container_uid", "2130706431", "container_uid", "2130706431"),
        /* the id a runc capsule's root maps to (CONFIG_CAPSULE_ROOT_ID), right after them */
        BAD("container_uid_capsule_root", "out_of_range", NULL, "container_uid", "2130771968"),
        BAD("container_gid_capsule_root", "out_of_range", NULL, "container_gid", "2130771968"),
        OK("container_uid_above_capsule_root", "container_uid", "2130771969", "container_uid", "2130771969"),
        BAD("container_gid_egress", "out_of_range", NULL, "container_gid", "2130740000"),

        /* concurrency, retention_days, audit_generations, pending_ttl_hours */
        DEFAULT("concurrency_default", "concurrency", "1"),
        BAD("concurrency_0", "out_of_range", NULL, "concurrency", "0"),
        OK("concurrency_1", "concurrency", "1", "concurrency", "1"),
        OK("concurrency_64", "concurrency", "64", "concurrency", "64"),
        BAD("concurrency_65", "out_of_range", NULL, "concurrency", "65"),
        BAD("concurrency_string", "bad_type", NULL, "concurrency", "\"2\""),
        BAD("concurrency_real", "bad_type", NULL, "concurrency", "2.0"),
        BAD("concurrency_null", "bad_type", NULL, "concurrency", "null"),
        DEFAULT("retention_days_default", "retention_days", "14"),
        BAD("retention_days_0", "out_of_range", NULL, "retention_days", "0"),
        OK("retention_days_1", "retention_days", "1", "retention_days", "1"),
        OK("retention_days_3650", "retention_days", "3650", "retention_days", "3650"),
        BAD("retention_days_3651", "out_of_range", NULL, "retention_days", "3651"),
        BAD("retention_days_string", "bad_type", NULL, "retention_days", "\"14\""),
        DEFAULT("audit_generations_default", "audit_generations", "14"),
        BAD("audit_generations_0", "out_of_range", NULL, "audit_generations", "0"),
        OK("audit_generations_1", "audit_generations", "1", "audit_generations", "1"),
        OK("audit_generations_3650", "audit_generations", "3650", "audit_generations", "3650"),
        BAD("audit_generations_3651", "out_of_range", NULL, "audit_generations", "3651"),
        BAD("audit_generations_real", "bad_type", NULL, "audit_generations", "14.0"),
        DEFAULT("pending_ttl_hours_default", "pending_ttl_hours", "72"),
        BAD("pending_ttl_hours_0", "out_of_range", NULL, "pending_ttl_hours", "0"),
        OK("pending_ttl_hours_1", "pending_ttl_hours", "1", "pending_ttl_hours", "1"),
        OK("pending_ttl_hours_8760", "pending_ttl_hours", "8760", "pending_ttl_hours", "8760"),
        BAD("pending_ttl_hours_8761", "out_of_range", NULL, "pending_ttl_hours", "8761"),
        BAD("pending_ttl_hours_string", "bad_type", NULL, "pending_ttl_hours", "\"72\""),

        /* runtime.driver */
        DEFAULT("driver_default", "runtime.driver", "runsc"),
        BAD("driver_unknown", "bad_value", NULL, "runtime.driver", "\"lxc\""),
        BAD("driver_uppercase", "bad_value", NULL, "runtime.driver", "\"RUNSC\""),
        BAD("driver_number", "bad_type", NULL, "runtime.driver", "1"),
        BAD("driver_null", "bad_type", NULL, "runtime.driver", "null"),
        OK("driver_docker", "runtime.driver", "docker",
           "runtime.driver", "\"docker\"", "runtime.image", "\"sha256:" H64 "\""),
        OK("driver_podman", "runtime.driver", "podman",
           "runtime.driver", "\"podman\"", "runtime.image", "\"sha256:" H64 "\""),
        OK("docker_has_no_system_mounts", "runtime.system_mounts", "",
           "runtime.driver", "\"docker\"", "runtime.image", "\"sha256:" H64 "\""),
        BAD("docker_without_image", "missing_field", "runtime.image", "runtime.driver", "\"docker\""),
        BAD("podman_with_null_image", "missing_field", "runtime.image",
            "runtime.driver", "\"podman\"", "runtime.image", "null"),

        /* runtime.driver runc (docs/capsule-engines.md): the bundle's keys, none of gVisor's */
        OK("driver_runc", "runtime.driver", "runc", "runtime.driver", "\"runc\""),
        OK("runc_platform_is_host", "runtime.platform", "host", "runtime.driver", "\"runc\""),
        OK("runc_set", "runtime.runc", "/usr/bin/crun", "runtime.driver", "\"runc\"", "runtime.runc",
           "\"/usr/bin/crun\""),
        OK("runc_keeps_system_mounts", "runtime.system_mounts", "/usr", "runtime.driver", "\"runc\"",
           "runtime.system_mounts", "[\"/usr\"]"),
        OK("runc_takes_a_cache", "cache.paths", "build", "runtime.driver", "\"runc\"", "cache.paths",
           "[\"build\"]"),
        BAD("runc_inside_workspace", "inconsistent", "runtime.runc", "runtime.driver", "\"runc\"", "runtime.runc",
            "\"/var/lib/hermes-coding/workspace/runc\""),
        BAD("runc_inside_results_dir", "inconsistent", "runtime.runc", "runtime.driver", "\"runc\"", "runtime.runc",
            "\"/run/tentaflake-worker-hermes-coding/results/x/runc\""),
        BAD("runc_relative", "bad_value", "runtime.runc", "runtime.driver", "\"runc\"", "runtime.runc", "\"runc\""),
        BAD("runc_with_runsc_driver", "inconsistent", "runtime.runc", "runtime.runc", "\"/usr/sbin/runc\""),
        BAD("runc_with_docker", "inconsistent", "runtime.runc", "runtime.driver", "\"docker\"",
            "runtime.image", "\"sha256:" H64 "\"", "runtime.runc", "\"/usr/sbin/runc\""),
        BAD("runc_with_platform", "inconsistent", "runtime.platform", "runtime.driver", "\"runc\"",
            "runtime.platform", "\"kvm\""),
        BAD("runc_with_runsc", "inconsistent", "runtime.runsc", "runtime.driver", "\"runc\"", "runtime.runsc",
            "\"/usr/bin/runsc\""),
        BAD("runc_with_rootfs", "inconsistent", "runtime.rootfs", "runtime.driver", "\"runc\"",
            "runtime.rootfs", "\"/srv/root\""),
        BAD("runc_with_image", "inconsistent", "runtime.image", "runtime.driver", "\"runc\"", "runtime.image",
            "\"sha256:" H64 "\""),

        /* runtime.runsc */
        DEFAULT("runsc_default_null", "runtime.runsc", "(null)"),
        OK("runsc_set", "runtime.runsc", "/usr/local/bin/runsc", "runtime.runsc", "\"/usr/local/bin/runsc\""),
        OK("runsc_null", "runtime.runsc", "(null)", "runtime.runsc", "null"),
        BAD("runsc_relative", "bad_value", NULL, "runtime.runsc", "\"runsc\""),
        BAD("runsc_number", "bad_type", NULL, "runtime.runsc", "5"),
        BAD("runsc_with_docker", "inconsistent", "runtime.runsc", "runtime.driver", "\"docker\"",
            "runtime.image", "\"sha256:" H64 "\"", "runtime.runsc", "\"/usr/bin/runsc\""),
        BAD("runsc_inside_workspace", "inconsistent", NULL,
            "runtime.runsc", "\"/var/lib/hermes-coding/workspace/runsc\""),
        BAD("runsc_inside_results_dir", "inconsistent", NULL,
            "runtime.runsc", "\"/run/tentaflake-worker-hermes-coding/results/x/runsc\""),
        OK("runsc_inside_system_mount_is_fine", "runtime.runsc", "/usr/bin/runsc",
           "runtime.runsc", "\"/usr/bin/runsc\""),

        /* runtime.warm_seconds */
        DEFAULT("warm_default", "runtime.warm_seconds", "60"),
        OK("warm_off", "runtime.warm_seconds", "0", "runtime.warm_seconds", "0"),
        OK("warm_max", "runtime.warm_seconds", "3600", "runtime.warm_seconds", "3600"),
        BAD("warm_too_long", "out_of_range", "runtime.warm_seconds", "runtime.warm_seconds", "3601"),
        BAD("warm_negative", "out_of_range", "runtime.warm_seconds", "runtime.warm_seconds", "-1"),
        BAD("warm_string", "bad_type", "runtime.warm_seconds", "runtime.warm_seconds", "\"60\""),
        BAD("warm_real", "bad_type", "runtime.warm_seconds", "runtime.warm_seconds", "1.5"),
        /* runtime.platform */
        DEFAULT("platform_default", "runtime.platform", "systrap"),
        OK("platform_systrap", "runtime.platform", "systrap", "runtime.platform", "\"systrap\""),
        OK("platform_kvm", "runtime.platform", "kvm", "runtime.platform", "\"kvm\""),
        OK("platform_ptrace", "runtime.platform", "ptrace", "runtime.platform", "\"ptrace\""),
        BAD("platform_unknown", "bad_value", NULL, "runtime.platform", "\"gvisor\""),
        BAD("platform_null", "bad_type", NULL, "runtime.platform", "null"),
        BAD("platform_with_podman", "inconsistent", "runtime.platform", "runtime.driver", "\"podman\"",
            "runtime.image", "\"sha256:" H64 "\"", "runtime.platform", "\"kvm\""),

        /* runtime.rootfs */
        DEFAULT("rootfs_default_null", "runtime.rootfs", "(null)"),
        OK("rootfs_set", "runtime.rootfs", "/srv/rootfs", "runtime.rootfs", "\"/srv/rootfs\""),
        OK("rootfs_has_no_system_mounts", "runtime.system_mounts", "",
           "runtime.rootfs", "\"/srv/rootfs\""),
        OK("rootfs_null", "runtime.system_mounts",
           "/usr,/bin,/sbin,/lib,/lib64,/etc/ld.so.cache,/etc/alternatives,/etc/ssl/certs",
           "runtime.rootfs", "null"),
        BAD("rootfs_relative", "bad_value", NULL, "runtime.rootfs", "\"rootfs\""),
        BAD("rootfs_root", "bad_value", NULL, "runtime.rootfs", "\"/\""),
        BAD("rootfs_number", "bad_type", NULL, "runtime.rootfs", "0"),
        BAD("rootfs_with_docker", "inconsistent", "runtime.rootfs", "runtime.driver", "\"docker\"",
            "runtime.image", "\"sha256:" H64 "\"", "runtime.rootfs", "\"/srv/rootfs\""),
        BAD("rootfs_with_system_mounts", "inconsistent", "runtime.system_mounts",
            "runtime.rootfs", "\"/srv/rootfs\"", "runtime.system_mounts", "[\"/usr\"]"),
        BAD("rootfs_inside_workspace", "inconsistent", "runtime.rootfs",
            "runtime.rootfs", "\"/var/lib/hermes-coding/workspace/root\""),
        BAD("rootfs_contains_workspace", "inconsistent", "runtime.rootfs",
            "runtime.rootfs", "\"/var/lib/hermes-coding\""),
        BAD("rootfs_contains_state_dir", "inconsistent", "runtime.rootfs",
            "runtime.rootfs", "\"/var/lib\"", "workspace", "\"/srv/ws\""),
        BAD("rootfs_inside_results_dir", "inconsistent", "runtime.rootfs",
            "runtime.rootfs", "\"/run/tentaflake-worker-hermes-coding/results/root\""),

        /* runtime.system_mounts */
        DEFAULT("system_mounts_default", "runtime.system_mounts",
                "/usr,/bin,/sbin,/lib,/lib64,/etc/ld.so.cache,/etc/alternatives,/etc/ssl/certs"),
        OK("system_mounts_replace_default", "runtime.system_mounts", "/nix/store",
           "runtime.system_mounts", "[\"/nix/store\"]"),
        OK("system_mounts_empty", "runtime.system_mounts", "", "runtime.system_mounts", "[]"),
        OK("system_mounts_all_forms", "runtime.system_mounts",
           "/usr,/opt/tools:/tools,/nix/store=nixpkgs-24.05,/opt/jdk:/jdk=sha256:" H64,
           "runtime.system_mounts",
           "[\"/usr\",\"/opt/tools:/tools\",\"/nix/store=nixpkgs-24.05\",\"/opt/jdk:/jdk=sha256:" H64 "\"]"),
        OK("system_mounts_identity_may_hold_equals", "runtime.system_mounts", "/usr=a=b",
           "runtime.system_mounts", "[\"/usr=a=b\"]"),
        OK("system_mounts_same_host_twice", "runtime.system_mounts", "/usr,/usr:/usr2",
           "runtime.system_mounts", "[\"/usr\",\"/usr:/usr2\"]"),
        BAD("system_mounts_null", "bad_type", NULL, "runtime.system_mounts", "null"),
        BAD("system_mounts_string", "bad_type", NULL, "runtime.system_mounts", "\"/usr\""),
        BAD("system_mounts_entry_number", "bad_type", "runtime.system_mounts[1]",
            "runtime.system_mounts", "[\"/usr\",1]"),
        BAD("system_mounts_host_relative", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"usr\"]"),
        BAD("system_mounts_host_root", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/:/host\"]"),
        BAD("system_mounts_host_trailing_slash", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/usr/\"]"),
        BAD("system_mounts_host_dotdot", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/usr/../etc\"]"),
        BAD("system_mounts_empty_entry", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"\"]"),
        BAD("system_mounts_sandbox_relative", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/opt/tools:tools\"]"),
        BAD("system_mounts_sandbox_empty", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/opt/tools:\"]"),
        BAD("system_mounts_sandbox_root", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/opt/root:/\"]"),
        BAD("system_mounts_sandbox_second_colon", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/a:/b:/c\"]"),
        BAD("system_mounts_identity_empty", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/usr=\"]"),
        BAD("system_mounts_identity_space", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/usr=debian 12\"]"),
        BAD("system_mounts_identity_control", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/usr=a\\tb\"]"),
        BAD("system_mounts_identity_non_ascii", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/usr=caf\\u00e9\"]"),
        BAD("system_mounts_duplicate_sandbox", "bad_value", "runtime.system_mounts[1]",
            "runtime.system_mounts", "[\"/usr\",\"/usr=other\"]"),
        BAD("system_mounts_duplicate_sandbox_other_host", "bad_value", "runtime.system_mounts[2]",
            "runtime.system_mounts", "[\"/a:/x\",\"/usr\",\"/b:/x\"]"),
        BAD("system_mounts_sandbox_proc", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/srv/fake:/proc\"]"),
        BAD("system_mounts_sandbox_dev_below", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/srv/shm:/dev/shm\"]"),
        BAD("system_mounts_sandbox_sys", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/srv/sys:/sys\"]"),
        BAD("system_mounts_sandbox_work", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/srv/w:/work/lib\"]"),
        BAD("system_mounts_sandbox_tmp", "bad_value", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/tmp\"]"),
        OK("system_mounts_sandbox_workdir_is_not_work", "runtime.system_mounts", "/srv/w:/workdir",
           "runtime.system_mounts", "[\"/srv/w:/workdir\"]"),
        BAD("system_mounts_with_docker", "inconsistent", "runtime.system_mounts",
            "runtime.driver", "\"docker\"", "runtime.image", "\"sha256:" H64 "\"",
            "runtime.system_mounts", "[\"/usr\"]"),
        BAD("system_mounts_empty_with_docker", "inconsistent", "runtime.system_mounts",
            "runtime.driver", "\"docker\"", "runtime.image", "\"sha256:" H64 "\"",
            "runtime.system_mounts", "[]"),
        BAD("system_mount_contains_workspace", "inconsistent", "runtime.system_mounts[1]",
            "runtime.system_mounts", "[\"/usr\",\"/var/lib\"]", "state_dir", "\"/srv/state\""),
        BAD("system_mount_inside_workspace", "inconsistent", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/var/lib/hermes-coding/workspace/bin:/bin\"]"),
        BAD("system_mount_contains_state_dir", "inconsistent", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/srv\"]", "state_dir", "\"/srv/state\""),
        BAD("system_mount_inside_state_dir", "inconsistent", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/var/lib/tentaflake-worker-hermes-coding/audit:/audit\"]"),
        BAD("system_mount_contains_results_dir", "inconsistent", "runtime.system_mounts[0]",
            "runtime.system_mounts", "[\"/run\"]"),
        BAD("default_system_mount_contains_workspace", "inconsistent", "runtime.system_mounts",
            "workspace", "\"/usr/src/agent\""),

        /* runtime.extra_system_mounts: added after runtime.system_mounts (given or default),
         * by the same rules (issue 36: adding /etc/localtime meant restating the defaults) */
        OK("extra_system_mounts_added_to_default", "runtime.system_mounts",
           "/usr,/bin,/sbin,/lib,/lib64,/etc/ld.so.cache,/etc/alternatives,/etc/ssl/certs,/opt/node:/node=node-20",
           "runtime.extra_system_mounts", "[\"/opt/node:/node=node-20\"]"),
        OK("extra_system_mounts_two", "runtime.system_mounts",
           "/usr,/bin,/sbin,/lib,/lib64,/etc/ld.so.cache,/etc/alternatives,/etc/ssl/certs,/opt/jdk:/jdk=sha256:ab,/srv/x:/usr/local/x",
           "runtime.extra_system_mounts", "[\"/opt/jdk:/jdk=sha256:ab\",\"/srv/x:/usr/local/x\"]"),
        OK("extra_system_mounts_empty", "runtime.system_mounts", "/usr,/bin,/sbin,/lib,/lib64,/etc/ld.so.cache,/etc/alternatives,/etc/ssl/certs",
           "runtime.extra_system_mounts", "[]"),
        OK("extra_system_mounts_after_given", "runtime.system_mounts", "/nix/store,/opt/x:/x",
           "runtime.system_mounts", "[\"/nix/store\"]", "runtime.extra_system_mounts", "[\"/opt/x:/x\"]"),
        OK("extra_system_mounts_after_empty_given", "runtime.system_mounts", "/usr",
           "runtime.system_mounts", "[]", "runtime.extra_system_mounts", "[\"/usr\"]"),
        OK("extra_system_mounts_same_host_as_default", "runtime.system_mounts",
           "/usr,/bin,/sbin,/lib,/lib64,/etc/ld.so.cache,/etc/alternatives,/etc/ssl/certs,/usr:/usr2", "runtime.extra_system_mounts", "[\"/usr:/usr2\"]"),
        BAD("extra_system_mounts_null", "bad_type", "runtime.extra_system_mounts",
            "runtime.extra_system_mounts", "null"),
        BAD("extra_system_mounts_string", "bad_type", "runtime.extra_system_mounts",
            "runtime.extra_system_mounts", "\"/opt/x\""),
        BAD("extra_system_mounts_object", "bad_type", "runtime.extra_system_mounts",
            "runtime.extra_system_mounts", "{\"/opt/x\": true}"),
        BAD("extra_system_mounts_entry_number", "bad_type", "runtime.extra_system_mounts[1]",
            "runtime.extra_system_mounts", "[\"/opt/x\",1]"),
        BAD("extra_system_mounts_host_relative", "bad_value", "runtime.extra_system_mounts[0]",
            "runtime.extra_system_mounts", "[\"opt/x\"]"),
        BAD("extra_system_mounts_host_dotdot", "bad_value", "runtime.extra_system_mounts[0]",
            "runtime.extra_system_mounts", "[\"/usr/../etc/shadow\"]"),
        BAD("extra_system_mounts_host_root", "bad_value", "runtime.extra_system_mounts[0]",
            "runtime.extra_system_mounts", "[\"/:/host\"]"),
        BAD("extra_system_mounts_sandbox_root", "bad_value", "runtime.extra_system_mounts[0]",
            "runtime.extra_system_mounts", "[\"/opt/root:/\"]"),
        BAD("extra_system_mounts_sandbox_second_colon", "bad_value", "runtime.extra_system_mounts[0]",
            "runtime.extra_system_mounts", "[\"/a:/b:/c\"]"),
        BAD("extra_system_mounts_identity_space", "bad_value", "runtime.extra_system_mounts[0]",
            "runtime.extra_system_mounts", "[\"/opt/x=node 20\"]"),
        BAD("extra_system_mounts_sandbox_proc", "bad_value", "runtime.extra_system_mounts[0]",
            "runtime.extra_system_mounts", "[\"/srv/fake:/proc/self\"]"),
        BAD("extra_system_mounts_sandbox_work", "bad_value", "runtime.extra_system_mounts[0]",
            "runtime.extra_system_mounts", "[\"/srv/w:/work\"]"),
        BAD("extra_system_mounts_sandbox_of_a_default", "bad_value", "runtime.extra_system_mounts[0]",
            "runtime.extra_system_mounts", "[\"/opt/usr:/usr\"]"),
        BAD("extra_system_mounts_default_named", "bad_value", "runtime.system_mounts'",
            "runtime.extra_system_mounts", "[\"/opt/x:/x\",\"/etc/ssl/certs\"]"),
        BAD("extra_system_mounts_sandbox_of_a_given", "bad_value", "runtime.system_mounts[1]'",
            "runtime.system_mounts", "[\"/usr\",\"/a:/x\"]", "runtime.extra_system_mounts", "[\"/b:/x\"]"),
        BAD("extra_system_mounts_duplicate_sandbox", "bad_value", "runtime.extra_system_mounts[1]",
            "runtime.extra_system_mounts", "[\"/a:/y\",\"/b:/y\"]"),
        BAD("extra_system_mounts_with_docker", "inconsistent", "runtime.extra_system_mounts",
            "runtime.driver", "\"docker\"", "runtime.image", "\"sha256:" H64 "\"",
            "runtime.extra_system_mounts", "[]"),
        BAD("extra_system_mounts_with_rootfs", "inconsistent", "runtime.extra_system_mounts",
            "runtime.rootfs", "\"/srv/rootfs\"", "runtime.extra_system_mounts", "[\"/opt/x\"]"),
        BAD("extra_system_mount_contains_workspace", "inconsistent", "runtime.extra_system_mounts[0]",
            "runtime.extra_system_mounts", "[\"/var/lib\"]", "state_dir", "\"/srv/state\""),
        BAD("extra_system_mount_contains_results_dir", "inconsistent", "runtime.extra_system_mounts[1]",
            "runtime.extra_system_mounts", "[\"/opt/x\",\"/run\"]"),

        /* runtime.image */
        DEFAULT("image_default_null", "runtime.image", "(null)"),
        OK("image_null_with_runsc", "runtime.image", "(null)", "runtime.image", "null"),
        OK("image_id", "runtime.image", "sha256:" H64,
           "runtime.driver", "\"docker\"", "runtime.image", "\"sha256:" H64 "\""),
        OK("image_repo_digest", "runtime.image", "worker@sha256:" H64,
           "runtime.driver", "\"docker\"", "runtime.image", "\"worker@sha256:" H64 "\""),
        OK("image_registry_port_tag", "runtime.image",
           "registry.local:5000/team/tool_x.y-z:1.2@sha256:" H64, "runtime.driver", "\"docker\"",
           "runtime.image", "\"registry.local:5000/team/tool_x.y-z:1.2@sha256:" H64 "\""),
        BAD("image_with_runsc", "inconsistent", "runtime.image", "runtime.image", "\"sha256:" H64 "\""),
        BAD("image_number", "bad_type", "runtime.image", "runtime.driver", "\"docker\"", "runtime.image", "1"),
        BAD("image_tag_only", "bad_value", "runtime.image",
            "runtime.driver", "\"docker\"", "runtime.image", "\"debian:bookworm\""),
        BAD("image_uppercase_hex", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef\""),
        BAD("image_63_hex", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"sha256:123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\""),
        BAD("image_65_hex", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"sha256:" H64 "0\""),
        BAD("image_sha512", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"sha512:" H64 "\""),
        BAD("image_name_uppercase", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"Worker@sha256:" H64 "\""),
        BAD("image_name_empty", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"@sha256:" H64 "\""),
        BAD("image_name_empty_component", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"team//tool@sha256:" H64 "\""),
        BAD("image_name_leading_slash", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"/tool@sha256:" H64 "\""),
        BAD("image_name_leading_dash", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"-tool@sha256:" H64 "\""),
        BAD("image_name_trailing_colon", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"tool:@sha256:" H64 "\""),
        BAD("image_name_space", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"my tool@sha256:" H64 "\""),
        BAD("image_two_digests", "bad_value", "runtime.image", "runtime.driver", "\"docker\"",
            "runtime.image", "\"a@sha256:" H64 "@sha256:" H64 "\""),

        /* limits: integer keys */
        DEFAULT("max_argv_default", "limits.max_argv", "256"),
        BAD("max_argv_0", "out_of_range", NULL, "limits.max_argv", "0"),
        OK("max_argv_1", "limits.max_argv", "1", "limits.max_argv", "1"),
        OK("max_argv_4096", "limits.max_argv", "4096", "limits.max_argv", "4096"),
        BAD("max_argv_4097", "out_of_range", NULL, "limits.max_argv", "4097"),
        BAD("max_argv_string", "bad_type", NULL, "limits.max_argv", "\"256\""),
        DEFAULT("default_timeout_default", "limits.default_timeout_seconds", "300"),
        BAD("default_timeout_0", "out_of_range", NULL, "limits.default_timeout_seconds", "0"),
        OK("default_timeout_1", "limits.default_timeout_seconds", "1", "limits.default_timeout_seconds", "1"),
        BAD("default_timeout_604801", "out_of_range", NULL, "limits.default_timeout_seconds", "604801"),
        BAD("default_timeout_real", "bad_type", NULL, "limits.default_timeout_seconds", "300.0"),
        BAD("default_timeout_string", "bad_type", NULL, "limits.default_timeout_seconds", "\"300\""),
        DEFAULT("max_timeout_default", "limits.max_timeout_seconds", "900"),
        BAD("max_timeout_0", "out_of_range", NULL, "limits.max_timeout_seconds", "0"),
        OK("max_timeout_604800", "limits.max_timeout_seconds", "604800", "limits.max_timeout_seconds", "604800"),
        OK("both_timeouts_604800", "limits.default_timeout_seconds", "604800",
           "limits.max_timeout_seconds", "604800", "limits.default_timeout_seconds", "604800"),
        OK("both_timeouts_1", "limits.max_timeout_seconds", "1",
           "limits.max_timeout_seconds", "1", "limits.default_timeout_seconds", "1"),
        BAD("max_timeout_604801", "out_of_range", NULL, "limits.max_timeout_seconds", "604801"),
        BAD("max_timeout_real", "bad_type", NULL, "limits.max_timeout_seconds", "900.0"),
        DEFAULT("max_snapshot_entries_default", "limits.max_snapshot_entries", "200000"),
        BAD("max_snapshot_entries_0", "out_of_range", NULL, "limits.max_snapshot_entries", "0"),
        OK("max_snapshot_entries_1", "limits.max_snapshot_entries", "1", "limits.max_snapshot_entries", "1"),
        OK("max_snapshot_entries_10000000", "limits.max_snapshot_entries", "10000000",
           "limits.max_snapshot_entries", "10000000"),
        BAD("max_snapshot_entries_10000001", "out_of_range", NULL, "limits.max_snapshot_entries", "10000001"),
        BAD("max_snapshot_entries_string", "bad_type", NULL, "limits.max_snapshot_entries", "\"1000\""),
        DEFAULT("max_watches_default", "limits.max_watches", "16384"),
        OK("max_watches_0", "limits.max_watches", "0", "limits.max_watches", "0"),
        OK("max_watches_1048576", "limits.max_watches", "1048576", "limits.max_watches", "1048576"),
        BAD("max_watches_1048577", "out_of_range", NULL, "limits.max_watches", "1048577"),
        BAD("max_watches_negative", "out_of_range", NULL, "limits.max_watches", "-1"),
        BAD("max_watches_string", "bad_type", NULL, "limits.max_watches", "\"16384\""),
        DEFAULT("pids_default", "limits.pids", "512"),
        BAD("pids_7", "out_of_range", NULL, "limits.pids", "7"),
        OK("pids_8", "limits.pids", "8", "limits.pids", "8"),
        OK("pids_4194304", "limits.pids", "4194304", "limits.pids", "4194304"),
        BAD("pids_4194305", "out_of_range", NULL, "limits.pids", "4194305"),
        BAD("pids_string", "bad_type", NULL, "limits.pids", "\"512\""),
        BAD("pids_null", "bad_type", NULL, "limits.pids", "null"),
        DEFAULT("max_artifact_entries_default", "limits.max_artifact_entries", "200000"),
        BAD("max_artifact_entries_0", "out_of_range", NULL, "limits.max_artifact_entries", "0"),
        OK("max_artifact_entries_1", "limits.max_artifact_entries", "1", "limits.max_artifact_entries", "1"),
        OK("max_artifact_entries_10000000", "limits.max_artifact_entries", "10000000",
           "limits.max_artifact_entries", "10000000"),
        BAD("max_artifact_entries_10000001", "out_of_range", NULL, "limits.max_artifact_entries", "10000001"),
        BAD("max_artifact_entries_real", "bad_type", NULL, "limits.max_artifact_entries", "1e3"),

        /* limits: sizes (min-1, min, max, max+1 for each) */
        DEFAULT("max_request_bytes_default", "limits.max_request_bytes", "65536"),
        BAD("max_request_bytes_1023", "out_of_range", NULL, "limits.max_request_bytes", "1023"),
        OK("max_request_bytes_1k", "limits.max_request_bytes", "1024", "limits.max_request_bytes", "\"1k\""),
        OK("max_request_bytes_1m", "limits.max_request_bytes", "1048576", "limits.max_request_bytes", "\"1m\""),
        BAD("max_request_bytes_1m_plus_1", "out_of_range", NULL, "limits.max_request_bytes", "1048577"),
        DEFAULT("max_argv_bytes_default", "limits.max_argv_bytes", "65536"),
        BAD("max_argv_bytes_0", "out_of_range", NULL, "limits.max_argv_bytes", "\"0\""),
        OK("max_argv_bytes_1", "limits.max_argv_bytes", "1", "limits.max_argv_bytes", "1"),
        OK("max_argv_bytes_1m", "limits.max_argv_bytes", "1048576", "limits.max_argv_bytes", "\"1024k\""),
        BAD("max_argv_bytes_1m_plus_1", "out_of_range", NULL, "limits.max_argv_bytes", "\"1048577\""),
        DEFAULT("max_snapshot_bytes_default", "limits.max_snapshot_bytes", "1073741824"),
        BAD("max_snapshot_bytes_0", "out_of_range", NULL, "limits.max_snapshot_bytes", "0"),
        OK("max_snapshot_bytes_1", "limits.max_snapshot_bytes", "1", "limits.max_snapshot_bytes", "1"),
        OK("max_snapshot_bytes_1t", "limits.max_snapshot_bytes", "1099511627776",
           "limits.max_snapshot_bytes", "\"1024g\"", "limits.workspace_tmpfs", "\"1024g\""),
        BAD("max_snapshot_bytes_1t_plus_1", "out_of_range", NULL, "limits.max_snapshot_bytes", "1099511627777"),
        DEFAULT("memory_default", "limits.memory", "2147483648"),
        BAD("memory_below_16m", "out_of_range", NULL, "limits.memory", "\"16383k\""),
        OK("memory_16m", "limits.memory", "16777216", "limits.memory", "\"16m\""),
        OK("memory_1t", "limits.memory", "1099511627776", "limits.memory", "\"1024g\""),
        BAD("memory_1t_plus_1", "out_of_range", NULL, "limits.memory", "1099511627777"),
        DEFAULT("memory_swap_default", "limits.memory_swap", "2147483648"),
        OK("memory_swap_follows_memory", "limits.memory_swap", "4294967296", "limits.memory", "\"4g\""),
        BAD("memory_swap_below_16m", "out_of_range", NULL, "limits.memory_swap", "\"15m\"",
            "limits.memory", "\"16m\""),
        OK("memory_swap_16m", "limits.memory_swap", "16777216",
           "limits.memory_swap", "\"16m\"", "limits.memory", "\"16m\""),
        OK("memory_swap_1t", "limits.memory_swap", "1099511627776", "limits.memory_swap", "\"1024g\""),
        BAD("memory_swap_1t_plus_1", "out_of_range", NULL, "limits.memory_swap", "1099511627777"),
        DEFAULT("workspace_tmpfs_default", "limits.workspace_tmpfs", "2147483648"),
        BAD("workspace_tmpfs_below_1m", "out_of_range", NULL, "limits.workspace_tmpfs", "\"1023k\"",
            "limits.max_snapshot_bytes", "1"),
        OK("workspace_tmpfs_1m", "limits.workspace_tmpfs", "1048576",
           "limits.workspace_tmpfs", "\"1m\"", "limits.max_snapshot_bytes", "\"1m\""),
        OK("workspace_tmpfs_1t", "limits.workspace_tmpfs", "1099511627776", "limits.workspace_tmpfs", "\"1024g\""),
        BAD("workspace_tmpfs_1t_plus_1", "out_of_range", NULL, "limits.workspace_tmpfs", "1099511627777"),
        DEFAULT("tmp_tmpfs_default", "limits.tmp_tmpfs", "268435456"),
        BAD("tmp_tmpfs_below_1m", "out_of_range", NULL, "limits.tmp_tmpfs", "1048575"),
        OK("tmp_tmpfs_1m", "limits.tmp_tmpfs", "1048576", "limits.tmp_tmpfs", "\"1m\""),
        OK("tmp_tmpfs_1t", "limits.tmp_tmpfs", "1099511627776", "limits.tmp_tmpfs", "\"1024g\""),
        BAD("tmp_tmpfs_1t_plus_1", "out_of_range", NULL, "limits.tmp_tmpfs", "1099511627777"),
        DEFAULT("max_log_bytes_default", "limits.max_log_bytes", "8388608"),
        BAD("max_log_bytes_below_4k", "out_of_range", NULL, "limits.max_log_bytes", "4095"),
        OK("max_log_bytes_4k", "limits.max_log_bytes", "4096", "limits.max_log_bytes", "\"4k\""),
        OK("max_log_bytes_1g", "limits.max_log_bytes", "1073741824", "limits.max_log_bytes", "\"1g\""),
        BAD("max_log_bytes_1g_plus_1", "out_of_range", NULL, "limits.max_log_bytes", "1073741825"),
        DEFAULT("max_changes_bytes_default", "limits.max_changes_bytes", "1073741824"),
        BAD("max_changes_bytes_0", "out_of_range", NULL, "limits.max_changes_bytes", "0"),
        OK("max_changes_bytes_4k", "limits.max_changes_bytes", "4096", "limits.max_changes_bytes", "\"4k\""),
        BAD("max_changes_bytes_1t_plus_1", "out_of_range", NULL, "limits.max_changes_bytes", "\"1099511627777\""),
        DEFAULT("max_changes_entries_default", "limits.max_changes_entries", "200000"),
        BAD("max_changes_entries_0", "out_of_range", NULL, "limits.max_changes_entries", "0"),
        OK("max_changes_entries_3", "limits.max_changes_entries", "3", "limits.max_changes_entries", "3"),
        BAD("max_changes_entries_10000001", "out_of_range", NULL, "limits.max_changes_entries", "10000001"),
        DEFAULT("max_artifact_bytes_default", "limits.max_artifact_bytes", "1073741824"),
        BAD("max_artifact_bytes_0", "out_of_range", NULL, "limits.max_artifact_bytes", "0"),
        OK("max_artifact_bytes_1", "limits.max_artifact_bytes", "1", "limits.max_artifact_bytes", "\"1\""),
        OK("max_artifact_bytes_1t", "limits.max_artifact_bytes", "1099511627776",
           "limits.max_artifact_bytes", "1099511627776"),
        BAD("max_artifact_bytes_1t_plus_1", "out_of_range", NULL, "limits.max_artifact_bytes", "\"1099511627777\""),

        /* size syntax, on each size key and in depth on memory */
        BAD("max_request_bytes_malformed", "bad_value", NULL, "limits.max_request_bytes", "\"64kb\""),
        BAD("max_argv_bytes_malformed", "bad_value", NULL, "limits.max_argv_bytes", "\"64 k\""),
        BAD("max_snapshot_bytes_malformed", "bad_value", NULL, "limits.max_snapshot_bytes", "\"1G\""),
        BAD("memory_swap_malformed", "bad_value", NULL, "limits.memory_swap", "\"2gb\""),
        BAD("workspace_tmpfs_malformed", "bad_value", NULL, "limits.workspace_tmpfs", "\"2t\""),
        BAD("tmp_tmpfs_malformed", "bad_value", NULL, "limits.tmp_tmpfs", "\"256M\""),
        BAD("max_log_bytes_malformed", "bad_value", NULL, "limits.max_log_bytes", "\"8m \""),
        BAD("max_artifact_bytes_malformed", "bad_value", NULL, "limits.max_artifact_bytes", "\"\""),
        BAD("size_malformed_suffix", "bad_value", NULL, "limits.memory", "\"2x\""),
        BAD("size_decimal", "bad_value", NULL, "limits.memory", "\"1.5g\""),
        BAD("size_negative_string", "bad_value", NULL, "limits.memory", "\"-2g\""),
        BAD("size_plus_sign", "bad_value", NULL, "limits.memory", "\"+2g\""),
        BAD("size_leading_space", "bad_value", NULL, "limits.memory", "\" 2g\""),
        BAD("size_hex", "bad_value", NULL, "limits.memory", "\"0x80000000\""),
        BAD("size_suffix_only", "bad_value", NULL, "limits.memory", "\"g\""),
        BAD("size_overflow_string", "out_of_range", NULL, "limits.memory", "\"99999999999999999999\""),
        BAD("size_overflow_suffix", "out_of_range", NULL, "limits.memory", "\"17179869184g\""),
        BAD("size_negative_integer", "out_of_range", NULL, "limits.memory", "-1"),
        BAD("size_zero_integer", "out_of_range", NULL, "limits.memory", "0"),
        BAD("size_real", "bad_type", NULL, "limits.memory", "2147483648.0"),
        BAD("size_bool", "bad_type", NULL, "limits.memory", "true"),
        BAD("size_null", "bad_type", NULL, "limits.memory", "null"),
        BAD("size_array", "bad_type", NULL, "limits.memory", "[\"2g\"]"),
        OK("size_integer_bytes", "limits.memory", "3221225472", "limits.memory", "3221225472",
           "limits.memory_swap", "\"3g\""),
        OK("size_digit_string", "limits.memory", "3221225472", "limits.memory", "\"3221225472\"",
           "limits.memory_swap", "\"3g\""),

        /* limits.cpus */
        DEFAULT("cpus_default", "limits.cpus", "2.0/2000"),
        OK("cpus_half", "limits.cpus", "0.5/500", "limits.cpus", "\"0.5\""),
        OK("cpus_integer_string", "limits.cpus", "3/3000", "limits.cpus", "\"3\""),
        OK("cpus_min", "limits.cpus", "0.01/10", "limits.cpus", "\"0.01\""),
        BAD("cpus_below_min", "out_of_range", NULL, "limits.cpus", "\"0.009\""),
        OK("cpus_max", "limits.cpus", "1024/1024000", "limits.cpus", "\"1024\""),
        BAD("cpus_above_max", "out_of_range", NULL, "limits.cpus", "\"1024.001\""),
        BAD("cpus_zero", "out_of_range", NULL, "limits.cpus", "\"0.0\""),
        BAD("cpus_huge", "out_of_range", NULL, "limits.cpus", "\"99999999\""),
        BAD("cpus_number", "bad_type", NULL, "limits.cpus", "2"),
        BAD("cpus_real", "bad_type", NULL, "limits.cpus", "2.0"),
        BAD("cpus_null", "bad_type", NULL, "limits.cpus", "null"),
        BAD("cpus_four_decimals", "bad_value", NULL, "limits.cpus", "\"2.0000\""),
        BAD("cpus_negative", "bad_value", NULL, "limits.cpus", "\"-1\""),
        BAD("cpus_exponent", "bad_value", NULL, "limits.cpus", "\"1e3\""),
        BAD("cpus_leading_dot", "bad_value", NULL, "limits.cpus", "\".5\""),
        BAD("cpus_trailing_dot", "bad_value", NULL, "limits.cpus", "\"2.\""),
        BAD("cpus_empty", "bad_value", NULL, "limits.cpus", "\"\""),
        BAD("cpus_too_long", "bad_value", NULL, "limits.cpus", "\"0000000000002.0\\u0030\""),
        OK("cpus_15_chars", "limits.cpus", "000000000002.00/2000", "limits.cpus", "\"000000000002.00\""),

        /* limits: consistency */
        BAD("default_timeout_above_max", "inconsistent", "limits.default_timeout_seconds",
            "limits.default_timeout_seconds", "901"),
        BAD("max_timeout_below_default", "inconsistent", "limits.default_timeout_seconds",
            "limits.max_timeout_seconds", "299"),
        OK("default_timeout_equal_max", "limits.default_timeout_seconds", "900",
           "limits.default_timeout_seconds", "900"),
        BAD("memory_swap_below_memory", "inconsistent", "limits.memory_swap",
            "limits.memory_swap", "\"1g\""),
        BAD("memory_above_default_swap_given", "inconsistent", "limits.memory_swap",
            "limits.memory", "\"3g\"", "limits.memory_swap", "\"2g\""),
        OK("memory_swap_equal_memory", "limits.memory_swap", "1073741824",
           "limits.memory", "\"1g\"", "limits.memory_swap", "\"1g\""),
        BAD("snapshot_above_workspace_tmpfs", "inconsistent", "limits.max_snapshot_bytes",
            "limits.max_snapshot_bytes", "\"3g\""),
        OK("snapshot_equal_workspace_tmpfs", "limits.max_snapshot_bytes", "2147483648",
           "limits.max_snapshot_bytes", "\"2g\""),

        /* signing_key / signing_identity */
        DEFAULT("signing_key_default_null", "signing_key", "(null)"),
        DEFAULT("signing_identity_default_null", "signing_identity", "(null)"),
        OK("signing_both", "signing_identity", "worker-1@example.org",
           "signing_key", "\"/etc/tentaflake/worker.key\"", "signing_identity", "\"worker-1@example.org\""),
        OK("signing_both_null", "signing_key", "(null)", "signing_key", "null", "signing_identity", "null"),
        OK("signing_key_in_state_dir", "signing_key", "/var/lib/tentaflake-worker-hermes-coding/key",
           "signing_key", "\"/var/lib/tentaflake-worker-hermes-coding/key\"", "signing_identity", "\"w\""),
        BAD("signing_key_without_identity", "inconsistent", "signing_identity",
            "signing_key", "\"/etc/tentaflake/worker.key\""),
        BAD("signing_key_with_null_identity", "inconsistent", "signing_identity",
            "signing_key", "\"/etc/tentaflake/worker.key\"", "signing_identity", "null"),
        BAD("signing_identity_without_key", "inconsistent", "signing_key",
            "signing_identity", "\"worker-1\""),
        BAD("signing_key_relative", "bad_value", NULL, "signing_key", "\"worker.key\"", "signing_identity", "\"w\""),
        BAD("signing_key_root", "bad_value", NULL, "signing_key", "\"/\"", "signing_identity", "\"w\""),
        BAD("signing_key_number", "bad_type", NULL, "signing_key", "1", "signing_identity", "\"w\""),
        BAD("signing_identity_empty", "bad_value", NULL, "signing_identity", "\"\"",
            "signing_key", "\"/etc/k\""),
        BAD("signing_identity_space", "bad_value", NULL, "signing_identity", "\"ci worker\"",
            "signing_key", "\"/etc/k\""),
        BAD("signing_identity_number", "bad_type", NULL, "signing_identity", "1", "signing_key", "\"/etc/k\""),
        BAD("signing_key_inside_workspace", "inconsistent", "signing_key", "signing_key",
            "\"/var/lib/hermes-coding/workspace/k\"", "signing_identity", "\"w\""),
        BAD("signing_key_inside_results_dir", "inconsistent", "signing_key", "signing_key",
            "\"/run/tentaflake-worker-hermes-coding/results/k\"", "signing_identity", "\"w\""),
        BAD("signing_key_inside_system_mount", "inconsistent", "runtime.system_mounts[1]",
            "signing_key", "\"/etc/tfw/k\"", "signing_identity", "\"w\"",
            "runtime.system_mounts", "[\"/usr\",\"/etc/tfw\"]"),
        BAD("signing_key_inside_rootfs", "inconsistent", "runtime.rootfs",
            "signing_key", "\"/srv/rootfs/etc/k\"", "signing_identity", "\"w\"",
            "runtime.rootfs", "\"/srv/rootfs\""),

        /* notify: the operator's hook (issue 23 item 3) */
        DEFAULT("notify_default_none", "notify.command", "(null)"),
        OK("notify_command", "notify.command", "/usr/local/bin/page,--to,ops",
           "notify.command", "[\"/usr/local/bin/page\",\"--to\",\"ops\"]"),
        OK("notify_uid_default_nobody", "notify.uid", "65534", "notify.command", "[\"/bin/true\"]"),
        OK("notify_gid_default_nogroup", "notify.gid", "65534", "notify.command", "[\"/bin/true\"]"),
        OK("notify_timeout_default", "notify.timeout_seconds", "10", "notify.command", "[\"/bin/true\"]"),
        OK("notify_timeout_300", "notify.timeout_seconds", "300", "notify.command", "[\"/bin/true\"]",
           "notify.timeout_seconds", "300"),
        OK("notify_uid_given", "notify.uid", "997", "notify.command", "[\"/bin/true\"]", "notify.uid", "997"),
        BAD("notify_timeout_301", "out_of_range", "notify.timeout_seconds", "notify.command", "[\"/bin/true\"]",
            "notify.timeout_seconds", "301"),
        BAD("notify_uid_root", "out_of_range", "notify.uid", "notify.command", "[\"/bin/true\"]", "notify.uid", "0"),
        BAD("notify_gid_root", "out_of_range", "notify.gid", "notify.command", "[\"/bin/true\"]", "notify.gid", "0"),
        BAD("notify_uid_is_the_controller", "inconsistent", "notify.uid", "notify.command", "[\"/bin/true\"]",
            "notify.uid", "10000"),
        BAD("notify_gid_is_the_controllers", "inconsistent", "notify.gid", "notify.command", "[\"/bin/true\"]",
            "notify.gid", "10000"),
        /* never an egress proxy's ids (issue 33 finding 4): a proxy taken over would read the hook's
         * environment, a webhook's token */
        BAD("notify_uid_egress_first", "out_of_range", "notify.uid", "notify.command", "[\"/bin/true\"]",
            "notify.uid", "2130706432"),
        BAD("notify_uid_egress_last", "out_of_range", "notify.uid", "notify.command", "[\"/bin/true\"]",
            "notify.uid", "2130771967"),
        BAD("notify_gid_egress", "out_of_range", "notify.gid", "notify.command", "[\"/bin/true\"]",
            "notify.gid", "2130740000"),
        BAD("notify_uid_capsule_root", "out_of_range", "notify.uid", "notify.command", "[\"/bin/true\"]",
            "notify.uid", "2130771968"),
        OK("notify_uid_beside_capsule_root", "notify.uid", "2130771969", "notify.command", "[\"/bin/true\"]",
           "notify.uid", "2130771969"),
        OK("notify_gid_beside_egress", "notify.gid", "2130706431", "notify.command", "[\"/bin/true\"]",
           "notify.gid", "2130706431"),
        BAD("notify_without_command", "missing_field", "notify.command", "notify", "{}"),
        BAD("notify_command_empty", "bad_type", "notify.command", "notify.command", "[]"),
        BAD("notify_command_string", "bad_type", "notify.command", "notify.command", "\"/bin/true\""),
        BAD("notify_command_relative", "bad_value", "notify.command[0]", "notify.command", "[\"page\"]"),
        BAD("notify_command_number", "bad_type", "notify.command[1]", "notify.command", "[\"/bin/true\",1]"),
        BAD("notify_command_empty_arg", "bad_type", "notify.command[1]", "notify.command", "[\"/bin/true\",\"\"]"),
        BAD("notify_unknown_key", "unknown_field", "notify.user", "notify.command", "[\"/bin/true\"]",
            "notify.user", "\"nobody\""),

        /* cache */
        DEFAULT("cache_default_none", "cache.paths", "(null)"),
        DEFAULT("cache_default_no_paths", "cache.n_paths", "0"),
        OK("cache_paths_kept_in_order", "cache.paths", "target,build/obj,node_modules,.cache/pip",
           "cache.paths", "[\"target\",\"build/obj\",\"node_modules\",\".cache/pip\"]"),
        OK("cache_n_paths", "cache.n_paths", "2", "cache.paths", "[\"target\",\"build\"]"),
        OK("cache_max_bytes_default", "cache.max_bytes", "2147483648", "cache.paths", "[\"build\"]"),
        OK("cache_max_entries_default", "cache.max_entries", "200000", "cache.paths", "[\"build\"]"),
        OK("cache_max_bytes_1", "cache.max_bytes", "1", "cache.paths", "[\"build\"]", "cache.max_bytes", "1"),
        OK("cache_max_bytes_2048g", "cache.max_bytes", "2199023255552",
           "cache.paths", "[\"build\"]", "cache.max_bytes", "\"2048g\""),
        OK("cache_max_bytes_string_digits", "cache.max_bytes", "1048576",
           "cache.paths", "[\"build\"]", "cache.max_bytes", "\"1024k\""),
        BAD("cache_max_bytes_0", "out_of_range", "cache.max_bytes",
            "cache.paths", "[\"build\"]", "cache.max_bytes", "0"),
        BAD("cache_max_bytes_2048g_plus_1", "out_of_range", "cache.max_bytes",
            "cache.paths", "[\"build\"]", "cache.max_bytes", "2199023255553"),
        BAD("cache_max_bytes_malformed", "bad_value", "cache.max_bytes",
            "cache.paths", "[\"build\"]", "cache.max_bytes", "\"2G\""),
        BAD("cache_max_bytes_null", "bad_type", "cache.max_bytes",
            "cache.paths", "[\"build\"]", "cache.max_bytes", "null"),
        OK("cache_max_entries_1", "cache.max_entries", "1", "cache.paths", "[\"build\"]", "cache.max_entries", "1"),
        OK("cache_max_entries_10000000", "cache.max_entries", "10000000",
           "cache.paths", "[\"build\"]", "cache.max_entries", "10000000"),
        BAD("cache_max_entries_0", "out_of_range", "cache.max_entries",
            "cache.paths", "[\"build\"]", "cache.max_entries", "0"),
        BAD("cache_max_entries_10000001", "out_of_range", "cache.max_entries",
            "cache.paths", "[\"build\"]", "cache.max_entries", "10000001"),
        BAD("cache_max_entries_string", "bad_type", "cache.max_entries",
            "cache.paths", "[\"build\"]", "cache.max_entries", "\"1000\""),
        BAD("cache_null", "bad_type", "cache", "cache", "null"),
        BAD("cache_not_object", "bad_type", "cache", "cache", "[\"build\"]"),
        BAD("cache_unknown_key", "unknown_field", "cache.size", "cache.paths", "[\"build\"]", "cache.size", "\"1g\""),
        BAD("cache_without_paths", "missing_field", "cache.paths", "cache", "{}"),
        BAD("cache_paths_null", "bad_type", "cache.paths", "cache.paths", "null"),
        BAD("cache_paths_string", "bad_type", "cache.paths", "cache.paths", "\"build\""),
        BAD("cache_paths_empty", "bad_value", "cache.paths", "cache.paths", "[]"),
        BAD("cache_path_number", "bad_type", "cache.paths[1]", "cache.paths", "[\"build\",7]"),
        BAD("cache_path_null", "bad_type", "cache.paths[0]", "cache.paths", "[null]"),
        BAD("cache_path_empty", "bad_value", "cache.paths[0]", "cache.paths", "[\"\"]"),
        BAD("cache_path_absolute", "bad_value", "cache.paths[0]", "cache.paths", "[\"/build\"]"),
        BAD("cache_path_root", "bad_value", "cache.paths[0]", "cache.paths", "[\"/\"]"),
        BAD("cache_path_trailing_slash", "bad_value", "cache.paths[0]", "cache.paths", "[\"build/\"]"),
        BAD("cache_path_double_slash", "bad_value", "cache.paths[0]", "cache.paths", "[\"build//obj\"]"),
        BAD("cache_path_dot", "bad_value", "cache.paths[0]", "cache.paths", "[\".\"]"),
        BAD("cache_path_leading_dot_component", "bad_value", "cache.paths[0]", "cache.paths", "[\"./build\"]"),
        BAD("cache_path_trailing_dot_component", "bad_value", "cache.paths[0]", "cache.paths", "[\"build/.\"]"),
        BAD("cache_path_dotdot", "bad_value", "cache.paths[0]", "cache.paths", "[\"..\"]"),
        BAD("cache_path_dotdot_inside", "bad_value", "cache.paths[0]", "cache.paths", "[\"build/../../etc\"]"),
        BAD("cache_path_control_char", "bad_value", "cache.paths[0]", "cache.paths", "[\"bu\\u0001ild\"]"),
        BAD("cache_path_newline", "bad_value", "cache.paths[0]", "cache.paths", "[\"build\\nx\"]"),
        BAD("cache_path_del", "bad_value", "cache.paths[0]", "cache.paths", "[\"build\\u007f\"]"),
        OK("cache_path_dot_names_are_names", "cache.paths", "...,..x,.cache,x.",
           "cache.paths", "[\"...\",\"..x\",\".cache\",\"x.\"]"),
        OK("cache_path_space_and_utf8", "cache.paths", "my build,caf\xc3\xa9",
           "cache.paths", "[\"my build\",\"caf\\u00e9\"]"),
        BAD("cache_path_control_dir", "bad_value", "cache.paths[0]", "cache.paths", "[\".tentaflake-worker\"]"),
        BAD("cache_path_inside_control_dir", "bad_value", "cache.paths[1]",
            "cache.paths", "[\"build\",\".tentaflake-worker/inbox\"]"),
        BAD("cache_path_artifacts", "bad_value", "cache.paths[0]", "cache.paths", "[\"artifacts\"]"),
        BAD("cache_path_inside_artifacts", "bad_value", "cache.paths[0]", "cache.paths", "[\"artifacts/cache\"]"),
        OK("cache_path_beside_reserved", "cache.paths", ".tentaflake-worker2,artifacts-old,src/artifacts",
           "cache.paths", "[\".tentaflake-worker2\",\"artifacts-old\",\"src/artifacts\"]"),
        BAD("cache_path_duplicate", "bad_value", "cache.paths[2]",
            "cache.paths", "[\"build\",\"target\",\"build\"]"),
        BAD("cache_path_inside_earlier", "bad_value", "cache.paths[1]",
            "cache.paths", "[\"build\",\"build/x\"]"),
        BAD("cache_path_around_earlier", "bad_value", "cache.paths[2]",
            "cache.paths", "[\"target\",\"build/x/y\",\"build\"]"),
        OK("cache_path_common_prefix_is_not_inside", "cache.paths", "build,build2,buildx/y",
           "cache.paths", "[\"build\",\"build2\",\"buildx/y\"]"),
        BAD("cache_with_docker", "inconsistent", "cache", "runtime.driver", "\"docker\"",
            "runtime.image", "\"sha256:" H64 "\"", "cache.paths", "[\"build\"]"),
        BAD("cache_with_podman", "inconsistent", "cache", "runtime.driver", "\"podman\"",
            "runtime.image", "\"sha256:" H64 "\"", "cache.paths", "[\"build\"]"),
        /* the driver is the first thing wrong with a cache for an engine, whatever it holds */
        BAD("cache_with_docker_before_its_paths", "inconsistent", "cache", "runtime.driver", "\"docker\"",
            "runtime.image", "\"sha256:" H64 "\"", "cache", "{}"),

        /* network (docs/egress.md) */
        DEFAULT("network_default_none", "network.allow", "(null)"),
        DEFAULT("network_default_upload", "network.max_upload_bytes", "1048576"),
        DEFAULT("network_default_download", "network.max_download_bytes", "2147483648"),
        OK("network_allow_kept_as_written", "network.allow",
           "registry.npmjs.org:443,*.example.net:443,192.0.2.7:8080,[2001:db8::1]:443,Example.ORG:80",
           "network.allow", "[\"registry.npmjs.org:443\",\"*.example.net:443\",\"192.0.2.7:8080\","
                            "\"[2001:db8::1]:443\",\"Example.ORG:80\"]"),
        OK("network_n_allow", "network.n_allow", "2", "network.allow", "[\"a.example:443\",\"b.example:443\"]"),
        OK("network_upload_default_with_allow", "network.max_upload_bytes", "1048576",
           "network.allow", "[\"a.example:443\"]"),
        OK("network_upload_set", "network.max_upload_bytes", "65536", "network.allow", "[\"a.example:443\"]",
           "network.max_upload_bytes", "\"64k\""),
        OK("network_download_set", "network.max_download_bytes", "104857600", "network.allow",
           "[\"a.example:443\"]", "network.max_download_bytes", "\"100m\""),
        BAD("network_upload_0", "out_of_range", "network.max_upload_bytes", "network.allow", "[\"a.example:443\"]",
            "network.max_upload_bytes", "0"),
        BAD("network_download_malformed", "bad_value", "network.max_download_bytes", "network.allow",
            "[\"a.example:443\"]", "network.max_download_bytes", "\"2G\""),
        BAD("network_null", "bad_type", "network", "network", "null"),
        BAD("network_not_object", "bad_type", "network", "network", "[\"a.example:443\"]"),
        BAD("network_unknown_key", "unknown_field", "network.hosts", "network.allow", "[\"a.example:443\"]",
            "network.hosts", "[]"),
        BAD("network_without_allow", "missing_field", "network.allow", "network", "{}"),
        BAD("network_allow_empty", "bad_value", "network.allow", "network.allow", "[]"),
        BAD("network_allow_string", "bad_type", "network.allow", "network.allow", "\"a.example:443\""),
        BAD("network_allow_number", "bad_type", "network.allow[1]", "network.allow", "[\"a.example:443\",443]"),
        BAD("network_allow_no_port", "bad_value", "network.allow[0]", "network.allow", "[\"a.example\"]"),
        BAD("network_allow_port_0", "bad_value", "network.allow[0]", "network.allow", "[\"a.example:0\"]"),
        BAD("network_allow_port_leading_zero", "bad_value", "network.allow[0]", "network.allow",
            "[\"a.example:0443\"]"),
        BAD("network_allow_bare_star", "bad_value", "network.allow[0]", "network.allow", "[\"*:443\"]"),
        BAD("network_allow_url", "bad_value", "network.allow[0]", "network.allow", "[\"https://a.example:443\"]"),
        BAD("network_allow_numeric_name", "bad_value", "network.allow[0]", "network.allow", "[\"a.123:443\"]"),
        BAD("network_allow_duplicate", "bad_value", "network.allow[1]", "network.allow",
            "[\"a.example:443\",\"A.EXAMPLE:443\"]"),
        BAD("network_with_docker", "inconsistent", "network", "runtime.driver", "\"docker\"",
            "runtime.image", "\"sha256:" H64 "\"", "network.allow", "[\"a.example:443\"]"),
        BAD("network_with_podman", "inconsistent", "network", "runtime.driver", "\"podman\"",
            "runtime.image", "\"sha256:" H64 "\"", "network.allow", "[\"a.example:443\"]"),
};
/* clang-format on */

/* Cases whose values are built at run time (lengths at the edges). */
static Case dynamic_cases[48];
static size_t n_dynamic;

static void add_dynamic(const char *name, const char *code, const char *names, const char *get,
                        const char *want, const char *k1, const char *v1, const char *k2,
                        const char *v2) {
        assert_true(n_dynamic < ELEMENTSOF(dynamic_cases));
        dynamic_cases[n_dynamic++] = (Case) {
                name, code, names, get, want, { k1, v1, k2, v2, NULL },
        };
}

/* A relative path of exactly total bytes: components of at most 255 bytes ('c'), each
 * separated by '/', none empty. Wrapped in prefix and suffix. */
static const char *long_rel_path(size_t total, const char *prefix, const char *suffix) {
        size_t p = strlen(prefix), s = strlen(suffix), o = p, rem = total;
        char *b = malloc(p + total + s + 1);
        assert_non_null(b);
        memcpy(b, prefix, p);
        while (rem > 0) {
                size_t n = MIN(rem, (size_t) 255);
                if (rem - n == 1)
                        n--; /* leave room for "/c": never a trailing '/' */
                memset(b + o, 'c', n);
                o += n;
                rem -= n;
                if (rem > 0) {
                        b[o++] = '/';
                        rem--;
                }
        }
        memcpy(b + o, suffix, s + 1);
        return b;
}

static void make_cache_dynamic_cases(void) {
        /* one component: 255 bytes accepted, 256 refused */
        add_dynamic("cache_path_component_255", NULL, NULL, "cache.paths", rep('c', 255, "", ""),
                    "cache.paths", rep('c', 255, "[\"", "\"]"), NULL, NULL);
        add_dynamic("cache_path_component_256", "bad_value", "cache.paths[0]", NULL, NULL,
                    "cache.paths", rep('c', 256, "[\"", "\"]"), NULL, NULL);
        /* the whole path: CONFIG_CACHE_PATH_MAX bytes accepted, one more refused */
        add_dynamic("cache_path_max_bytes", NULL, NULL, "cache.paths",
                    long_rel_path(CONFIG_CACHE_PATH_MAX, "", ""), "cache.paths",
                    long_rel_path(CONFIG_CACHE_PATH_MAX, "[\"", "\"]"), NULL, NULL);
        add_dynamic("cache_path_max_plus_1_bytes", "bad_value", "cache.paths[0]", NULL, NULL, "cache.paths",
                    long_rel_path(CONFIG_CACHE_PATH_MAX + 1, "[\"", "\"]"), NULL, NULL);
        /* CONFIG_CACHE_PATHS_MAX paths accepted, one more refused */
        for (int extra = 0; extra <= 1; extra++) {
                int n = CONFIG_CACHE_PATHS_MAX + extra;
                char *list = malloc((size_t) n * 16 + 8), *want = malloc((size_t) n * 16), *p = list, *q = want;
                assert_non_null(list);
                assert_non_null(want);
                p += sprintf(p, "[");
                for (int i = 0; i < n; i++) {
                        p += sprintf(p, "%s\"p%d\"", i ? "," : "", i);
                        q += sprintf(q, "%sp%d", i ? "," : "", i);
                }
                sprintf(p, "]");
                if (extra) {
                        free(want);
                        add_dynamic("cache_paths_one_too_many", "out_of_range", "cache.paths", NULL, NULL,
                                    "cache.paths", list, NULL, NULL);
                } else
                        add_dynamic("cache_paths_at_the_maximum", NULL, NULL, "cache.paths", want, "cache.paths",
                                    list, NULL, NULL);
        }
}

static void make_dynamic_cases(void) {
        make_cache_dynamic_cases();
        /* name: 48 characters accepted, 49 refused */
        const char *n48 = rep('a', 48, "", "");
        add_dynamic("name_48_chars", NULL, NULL, "name", n48, "name", rep('a', 48, "\"", "\""),
                    NULL, NULL);
        add_dynamic("name_49_chars", "bad_value", "name", NULL, NULL, "name",
                    rep('a', 49, "\"", "\""), NULL, NULL);
        /* paths: CONFIG_PATH_MAX bytes accepted, one more refused */
        const char *p1024 = rep('w', CONFIG_PATH_MAX - 5, "/srv/", "");
        add_dynamic("workspace_1024_bytes", NULL, NULL, "workspace", p1024, "workspace",
                    rep('w', CONFIG_PATH_MAX - 5, "\"/srv/", "\""), NULL, NULL);
        add_dynamic("workspace_1025_bytes", "bad_value", "workspace", NULL, NULL, "workspace",
                    rep('w', CONFIG_PATH_MAX - 4, "\"/srv/", "\""), NULL, NULL);
        add_dynamic("system_mount_host_1025_bytes", "bad_value", "runtime.system_mounts[0]", NULL,
                    NULL, "runtime.system_mounts", rep('w', CONFIG_PATH_MAX - 4, "[\"/srv/", "\"]"),
                    NULL, NULL);
        /* identities: CONFIG_IDENTITY_MAX accepted, one more refused */
        add_dynamic("system_mounts_identity_256", NULL, NULL, "runtime.system_mounts",
                    rep('i', CONFIG_IDENTITY_MAX, "/usr=", ""), "runtime.system_mounts",
                    rep('i', CONFIG_IDENTITY_MAX, "[\"/usr=", "\"]"), NULL, NULL);
        add_dynamic("system_mounts_identity_257", "bad_value", "runtime.system_mounts[0]", NULL,
                    NULL, "runtime.system_mounts",
                    rep('i', CONFIG_IDENTITY_MAX + 1, "[\"/usr=", "\"]"), NULL, NULL);
        add_dynamic("signing_identity_256", NULL, NULL, "signing_identity",
                    rep('i', CONFIG_IDENTITY_MAX, "", ""), "signing_identity",
                    rep('i', CONFIG_IDENTITY_MAX, "\"", "\""), "signing_key", "\"/etc/k\"");
        add_dynamic("signing_identity_257", "bad_value", "signing_identity", NULL, NULL,
                    "signing_identity", rep('i', CONFIG_IDENTITY_MAX + 1, "\"", "\""),
                    "signing_key", "\"/etc/k\"");
        /* image names: 255 accepted, 256 refused */
        add_dynamic("image_name_255", NULL, NULL, "runtime.image",
                    rep('a', 255, "", "@sha256:" H64), "runtime.image",
                    rep('a', 255, "\"", "@sha256:" H64 "\""), "runtime.driver", "\"docker\"");
        add_dynamic("image_name_256", "bad_value", "runtime.image", NULL, NULL, "runtime.image",
                    rep('a', 256, "\"", "@sha256:" H64 "\""), "runtime.driver", "\"docker\"");

        /* extra_system_mounts: up to CONFIG_MAX_SYSTEM_MOUNTS with the 8 defaults, one more
         * refused */
        for (int extra = 0; extra <= 1; extra++) {
                int n = CONFIG_MAX_SYSTEM_MOUNTS - 8 + extra;
                char *list = malloc((size_t) n * 32 + 8), *p = list;
                assert_non_null(list);
                p += sprintf(p, "[");
                for (int i = 0; i < n; i++)
                        p += sprintf(p, "%s\"/opt:/m%d\"", i ? "," : "", i);
                sprintf(p, "]");
                if (extra)
                        add_dynamic("extra_system_mounts_one_too_many", "out_of_range",
                                    "runtime.extra_system_mounts", NULL, NULL,
                                    "runtime.extra_system_mounts", list, NULL, NULL);
                else {
                        char *want = malloc((size_t) n * 32 + 128), *q = want;
                        assert_non_null(want);
                        q += sprintf(q, "%s", "/usr,/bin,/sbin,/lib,/lib64,/etc/ld.so.cache,/etc/alternatives,/etc/ssl/certs");
                        for (int i = 0; i < n; i++)
                                q += sprintf(q, ",/opt:/m%d", i);
                        add_dynamic("extra_system_mounts_at_the_maximum", NULL, NULL,
                                    "runtime.system_mounts", want, "runtime.extra_system_mounts",
                                    list, NULL, NULL);
                }
        }
        /* system_mounts: CONFIG_MAX_SYSTEM_MOUNTS accepted, one more refused */
        for (int extra = 0; extra <= 1; extra++) {
                int n = CONFIG_MAX_SYSTEM_MOUNTS + extra;
                char *list = malloc((size_t) n * 32 + 8), *p = list;
                assert_non_null(list);
                p += sprintf(p, "[");
                for (int i = 0; i < n; i++)
                        p += sprintf(p, "%s\"/usr:/m%d\"", i ? "," : "", i);
                sprintf(p, "]");
                if (extra)
                        add_dynamic("system_mounts_one_too_many", "out_of_range",
                                    "runtime.system_mounts", NULL, NULL, "runtime.system_mounts",
                                    list, NULL, NULL);
                else {
                        char *want = malloc((size_t) n * 32), *q = want;
                        assert_non_null(want);
                        for (int i = 0; i < n; i++)
                                q += sprintf(q, "%s/usr:/m%d", i ? "," : "", i);
                        add_dynamic("system_mounts_at_the_maximum", NULL, NULL,
                                    "runtime.system_mounts", want, "runtime.system_mounts", list,
                                    NULL, NULL);
                }
        }
}

/* ---- raw-text cases: the strict JSON layer ------------------------------------------------ */

static void expect_raw(const char *buf, size_t len, const char *code) {
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};
        int r = config_parse_buffer(buf, len, &c, &e);
        if (r >= 0)
                fail_msg("accepted, expected %s", code);
        assert_null(c);
        assert_non_null(e.code);
        assert_string_equal(e.code, code);
        for (const char *m = e.message; *m; m++)
                if ((unsigned char) *m < 0x20 || *m == 0x7f)
                        fail_msg("control character 0x%02x in message '%s'", *m, e.message);
}

static void test_duplicate_top_level_key(void **state) {
        (void) state;
        const char *s = "{\"version\":1,\"name\":\"a\",\"name\":\"b\",\"workspace\":\"/w\","
                        "\"container_uid\":1,\"container_gid\":1}";
        expect_raw(s, strlen(s), "duplicate_key");
}

static void test_duplicate_nested_key(void **state) {
        (void) state;
        size_t n;
        _cleanup_free_ char *s = tfw_read_fixture("config/bad-duplicate-nested.json", &n);
        expect_raw(s, n, "duplicate_key");
}

static void test_nul_byte(void **state) {
        (void) state;
        const char s[] = "{\"version\":1,\"name\":\"a\0b\",\"workspace\":\"/w\","
                         "\"container_uid\":1,\"container_gid\":1}";
        expect_raw(s, sizeof(s) - 1, "nul_byte");
}

static void test_escaped_nul(void **state) {
        (void) state;
        const char *s = "{\"version\":1,\"name\":\"a\\u0000b\",\"workspace\":\"/w\","
                        "\"container_uid\":1,\"container_gid\":1}";
        expect_raw(s, strlen(s), "nul_byte");
}

static void test_invalid_utf8(void **state) {
        (void) state;
        size_t n;
        _cleanup_free_ char *s = tfw_read_fixture("config/bad-invalid-utf8.json", &n);
        expect_raw(s, n, "invalid_utf8");
}

static void test_bad_json(void **state) {
        (void) state;
        const char *bad[] = {
                "",
                "{",
                "{\"version\":1,}",
                "{\"version\":1} trailing",
                "{'version':1}",
                "{\"version\":1}{\"version\":1}",
                /* jansson quotes the bytes near the error raw: they must not reach the message */
                "{\"version\":\"\\\n\"}",
                "{\"version\":1\x1b}",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                expect_raw(bad[i], strlen(bad[i]), "bad_json");
}

static void test_top_level_not_object(void **state) {
        (void) state;
        expect_raw("[]", 2, "bad_type");
        expect_raw("1", 1, "bad_type");
        expect_raw("null", 4, "bad_type");
}

/* A negative byte count is named as such, not shown as its 64-bit wrap-around. */
static void test_negative_size_message(void **state) {
        (void) state;
        _cleanup_free_ char *json = build_config((const char *const[]) { "limits.tmp_tmpfs", "-5", NULL });
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};
        assert_true(config_parse_buffer(json, strlen(json), &c, &e) < 0);
        assert_string_equal(e.code, "out_of_range");
        assert_string_equal(e.message, "key 'limits.tmp_tmpfs': -5 is negative, allowed 1m..1024g");
}

static void test_huge_number(void **state) {
        (void) state;
        const char *s = "{\"version\":1,\"name\":\"a\",\"workspace\":\"/w\","
                        "\"container_uid\":99999999999999999999,\"container_gid\":1}";
        expect_raw(s, strlen(s), "out_of_range");
}

static void test_buffer_too_large(void **state) {
        (void) state;
        _cleanup_free_ char *json = build_config((const char *const[]) { NULL });
        size_t n = CONFIG_MAX_BYTES + 1;
        _cleanup_free_ char *big = malloc(n);
        assert_non_null(big);
        /* A valid config padded with whitespace: only the size is wrong. */
        memset(big, ' ', n);
        memcpy(big, json, strlen(json));
        expect_raw(big, n, "too_large");
        /* The same bytes one shorter parse. */
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};
        assert_int_equal(config_parse_buffer(big, n - 1, &c, &e), 0);
}

/* ---- whole files -------------------------------------------------------------------------- */

static Config *parse_fixture(const char *rel) {
        size_t n;
        _cleanup_free_ char *s = tfw_read_fixture(rel, &n);
        Config *c = NULL;
        TfwError e = {};
        if (config_parse_buffer(s, n, &c, &e) < 0)
                fail_msg("%s: %s (%s)", rel, e.message, e.code);
        return c;
}

static void test_minimal_all_defaults(void **state) {
        (void) state;
        _cleanup_config_ Config *c = parse_fixture(MINIMAL);
        RequestPolicy p;

        assert_int_equal(c->version, 1);
        assert_string_equal(c->name, "hermes-coding");
        assert_string_equal(c->workspace, "/var/lib/hermes-coding/workspace");
        assert_string_equal(c->state_dir, "/var/lib/tentaflake-worker-hermes-coding");
        assert_string_equal(c->results_dir, "/run/tentaflake-worker-hermes-coding/results");
        assert_int_equal(c->container_uid, 10000);
        assert_int_equal(c->container_gid, 10000);
        assert_int_equal(c->concurrency, 1);
        assert_int_equal(c->retention_days, 14);
        assert_int_equal(c->audit_generations, 14);
        assert_int_equal(c->pending_ttl_hours, 72);
        assert_int_equal(c->driver, DRIVER_RUNSC);
        assert_null(c->runsc);
        assert_string_equal(c->platform, "systrap");
        assert_null(c->rootfs);
        assert_int_equal(c->n_system_mounts, 8);
        for (size_t i = 0; i < c->n_system_mounts; i++) {
                assert_string_equal(c->system_mounts[i].host, c->system_mounts[i].sandbox);
                assert_null(c->system_mounts[i].identity);
        }
        assert_string_equal(c->system_mounts[7].host, "/etc/ssl/certs");
        assert_null(c->image);
        assert_int_equal(c->limits.max_request_bytes, 64 << 10);
        assert_int_equal(c->limits.max_argv, 256);
        assert_int_equal(c->limits.max_argv_bytes, 64 << 10);
        assert_int_equal(c->limits.default_timeout_seconds, 300);
        assert_int_equal(c->limits.max_timeout_seconds, 900);
        assert_int_equal(c->limits.max_snapshot_bytes, 1ULL << 30);
        assert_int_equal(c->limits.max_snapshot_entries, 200000);
        assert_int_equal(c->limits.memory, 2ULL << 30);
        assert_int_equal(c->limits.memory_swap, 2ULL << 30);
        assert_string_equal(c->limits.cpus, "2.0");
        assert_int_equal(c->limits.cpus_milli, 2000);
        assert_int_equal(c->limits.pids, 512);
        assert_int_equal(c->limits.workspace_tmpfs, 2ULL << 30);
        assert_int_equal(c->limits.tmp_tmpfs, 256ULL << 20);
        assert_int_equal(c->limits.max_log_bytes, 8ULL << 20);
        assert_int_equal(c->limits.max_artifact_bytes, 1ULL << 30);
        assert_int_equal(c->limits.max_artifact_entries, 200000);
        assert_null(c->signing_key);
        assert_null(c->signing_identity);

        config_request_policy(c, &p);
        assert_int_equal(p.max_request_bytes, 64 << 10);
        assert_int_equal(p.max_argv, 256);
        assert_int_equal(p.max_argv_bytes, 64 << 10);
        assert_int_equal(p.default_timeout_seconds, 300);
        assert_int_equal(p.max_timeout_seconds, 900);
}

static void test_full_every_key(void **state) {
        (void) state;
        _cleanup_config_ Config *c = parse_fixture("config/full.json");
        RequestPolicy p;

        assert_string_equal(c->name, "ci-runner-7");
        assert_string_equal(c->workspace, "/srv/agents/ci-runner-7/workspace");
        assert_string_equal(c->state_dir, "/var/lib/tfw/ci-runner-7");
        assert_string_equal(c->results_dir, "/srv/agents/ci-runner-7/results");
        assert_int_equal(c->container_uid, 20001);
        assert_int_equal(c->container_gid, 20002);
        assert_int_equal(c->concurrency, 4);
        assert_int_equal(c->retention_days, 30);
        assert_int_equal(c->audit_generations, 60);
        assert_int_equal(c->pending_ttl_hours, 24);
        assert_int_equal(c->driver, DRIVER_RUNSC);
        assert_string_equal(c->runsc, "/usr/local/bin/runsc");
        assert_string_equal(c->platform, "systrap");
        assert_null(c->rootfs);
        assert_null(c->image);
        assert_int_equal(c->n_system_mounts, 5);
        assert_string_equal(c->system_mounts[0].host, "/usr");
        assert_string_equal(c->system_mounts[0].sandbox, "/usr");
        assert_null(c->system_mounts[0].identity);
        assert_string_equal(c->system_mounts[3].host, "/nix/store");
        assert_string_equal(c->system_mounts[3].sandbox, "/nix/store");
        assert_string_equal(c->system_mounts[3].identity, "nixpkgs-24.05");
        assert_string_equal(c->system_mounts[4].host, "/opt/toolchain");
        assert_string_equal(c->system_mounts[4].sandbox, "/toolchain");
        assert_string_equal(c->system_mounts[4].identity, "sha256:" H64);
        assert_int_equal(c->limits.max_request_bytes, 128 << 10);
        assert_int_equal(c->limits.max_argv, 512);
        assert_int_equal(c->limits.max_argv_bytes, 131072);
        assert_int_equal(c->limits.default_timeout_seconds, 600);
        assert_int_equal(c->limits.max_timeout_seconds, 3600);
        assert_int_equal(c->limits.max_snapshot_bytes, 4ULL << 30);
        assert_int_equal(c->limits.max_snapshot_entries, 500000);
        assert_int_equal(c->limits.memory, 8ULL << 30);
        assert_int_equal(c->limits.memory_swap, 10ULL << 30);
        assert_string_equal(c->limits.cpus, "3.5");
        assert_int_equal(c->limits.cpus_milli, 3500);
        assert_int_equal(c->limits.pids, 1024);
        assert_int_equal(c->limits.workspace_tmpfs, 8ULL << 30);
        assert_int_equal(c->limits.tmp_tmpfs, 1ULL << 30);
        assert_int_equal(c->limits.max_log_bytes, 16ULL << 20);
        assert_int_equal(c->limits.max_artifact_bytes, 2ULL << 30);
        assert_int_equal(c->limits.max_artifact_entries, 100000);
        assert_string_equal(c->signing_key, "/var/lib/tfw/ci-runner-7/signing.key");
        assert_string_equal(c->signing_identity, "ci-runner-7@build.example.org");
        assert_int_equal(c->cache.n_paths, 3);
        assert_string_equal(c->cache.paths[0], "target");
        assert_string_equal(c->cache.paths[1], "build/cache");
        assert_string_equal(c->cache.paths[2], ".cache/pip");
        assert_null(c->cache.paths[3]);
        assert_int_equal(c->cache.max_bytes, 4ULL << 30);
        assert_int_equal(c->cache.max_entries, 300000);
        assert_int_equal(c->network.n_allow, 3);
        assert_string_equal(c->network.allow[1], "*.pythonhosted.org:443");
        assert_null(c->network.allow[3]);
        assert_int_equal(c->network.rules[1].kind, EGRESS_ALLOW_SUFFIX);
        assert_string_equal(c->network.rules[1].name, "pythonhosted.org");
        assert_int_equal(c->network.rules[2].kind, EGRESS_ALLOW_IP);
        assert_int_equal(c->network.rules[2].port, 3128);
        assert_int_equal(c->network.max_upload_bytes, 2ULL << 20);
        assert_int_equal(c->network.max_download_bytes, 4ULL << 30);

        config_request_policy(c, &p);
        assert_int_equal(p.max_request_bytes, 128 << 10);
        assert_int_equal(p.max_argv, 512);
        assert_int_equal(p.max_argv_bytes, 131072);
        assert_int_equal(p.default_timeout_seconds, 600);
        assert_int_equal(p.max_timeout_seconds, 3600);
}

static void test_docker_fixture(void **state) {
        (void) state;
        _cleanup_config_ Config *c = parse_fixture("config/docker.json");
        assert_int_equal(c->driver, DRIVER_DOCKER);
        assert_string_equal(c->image, "localhost:5000/tentaflake/worker-toolchain:2024.11@sha256:" H64);
        assert_int_equal(c->n_system_mounts, 0);
        assert_null(c->system_mounts);
        assert_null(c->runsc);
        assert_null(c->rootfs);
        assert_string_equal(c->platform, "systrap");
        assert_int_equal(c->limits.memory, 4ULL << 30);
        assert_int_equal(c->limits.memory_swap, 4ULL << 30);
        assert_int_equal(c->limits.cpus_milli, 1500);
        assert_null(c->cache.paths);
}

static void test_rootfs_fixture(void **state) {
        (void) state;
        _cleanup_config_ Config *c = parse_fixture("config/rootfs.json");
        assert_int_equal(c->driver, DRIVER_RUNSC);
        assert_string_equal(c->rootfs, "/var/lib/images/bookworm");
        assert_string_equal(c->platform, "kvm");
        assert_int_equal(c->n_system_mounts, 0);
}

static void test_bad_fixtures(void **state) {
        (void) state;
        const struct {
                const char *file, *code, *key;
        } t[] = {
                { "config/bad-unknown-limits.json", "unknown_field", "'limits.swap'" },
                { "config/bad-memory-size.json", "bad_value", "'limits.memory'" },
                { "config/bad-state-in-workspace.json", "inconsistent", "'state_dir'" },
                { "config/bad-docker-rootfs.json", "inconsistent", "'runtime.rootfs'" },
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                size_t n;
                _cleanup_free_ char *s = tfw_read_fixture(t[i].file, &n);
                _cleanup_config_ Config *c = NULL;
                TfwError e = {};
                if (config_parse_buffer(s, n, &c, &e) >= 0)
                        fail_msg("%s accepted", t[i].file);
                assert_string_equal(e.code, t[i].code);
                if (!strstr(e.message, t[i].key))
                        fail_msg("%s: '%s' does not name %s", t[i].file, e.message, t[i].key);
        }
}

/* An id of the egress proxies' range (issue 33 finding 4): the message says whose ids they are
 * and what sharing one would give a proxy taken over; the hook's default is never one. */
static void test_egress_ids_refused(void **state) {
        (void) state;
        const struct {
                const char *key, *value, *says;
        } t[] = {
                { "notify.uid", "2130706432", "a webhook's token" },
                { "notify.gid", "2130771967", "the hook and the files of its group" },
                { "container_uid", "2130740000", "the controller" },
                { "container_gid", "2130740000", "the controller's group" },
        };
        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                const char *mods[] = { "notify.command", "[\"/bin/true\"]", t[i].key, t[i].value, NULL };
                _cleanup_free_ char *json = build_config(mods);
                _cleanup_config_ Config *c = NULL;
                TfwError e = {};
                assert_true(config_parse_buffer(json, strlen(json), &c, &e) < 0);
                assert_string_equal(e.code, "out_of_range");
                if (!strstr(e.message, "2130706432..2130771967, the egress proxies' own ids") ||
                    !strstr(e.message, t[i].says))
                        fail_msg("%s: %s", t[i].key, e.message);
        }
        const char *mods[] = { "notify.command", "[\"/bin/true\"]", NULL };
        _cleanup_free_ char *json = build_config(mods);
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};
        assert_int_equal(config_parse_buffer(json, strlen(json), &c, &e), 0);
        assert_false(config_id_is_egress(c->notify.uid) || config_id_is_egress(c->notify.gid));
}

/* ---- the cache ------------------------------------------------------------------------------ */

static Config *parse_mods(const char *const *mods) {
        _cleanup_free_ char *json = build_config(mods);
        Config *c = NULL;
        TfwError e = {};
        if (config_parse_buffer(json, strlen(json), &c, &e) < 0)
                fail_msg("%s: refused: %s (%s)", json, e.message, e.code);
        return c;
}

static void expect_message(const char *const *mods, const char *code, const char *message) {
        _cleanup_free_ char *json = build_config(mods);
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};
        if (config_parse_buffer(json, strlen(json), &c, &e) >= 0)
                fail_msg("%s: accepted, expected %s", json, code);
        assert_string_equal(e.code, code);
        assert_string_equal(e.message, message);
}

static void test_cache_absent(void **state) {
        (void) state;
        _cleanup_config_ Config *c = parse_fixture(MINIMAL);

        assert_null(c->cache.paths);
        assert_int_equal(c->cache.n_paths, 0);
        /* no cache: the store is limits.max_store_bytes (2 x 1g) and needs no inodes for one */
        assert_int_equal(config_store_tmpfs_bytes(c), c->limits.max_store_bytes);
        assert_int_equal(config_store_tmpfs_bytes(c), 2ULL << 30);
        assert_int_equal(config_store_cache_inodes(c), 0);
        /* two lanes of 200000 entries and 8 of their own, 1024 for the store */
        assert_int_equal(config_store_tmpfs_inodes(c), 2 * (200000 + 8) + 1024);
}

static void test_cache_defaults(void **state) {
        (void) state;
        _cleanup_config_ Config *c = parse_mods((const char *const[]) {
                "cache.paths", "[\"target\",\"node_modules/.cache\"]", NULL });

        assert_int_equal(c->cache.n_paths, 2);
        assert_string_equal(c->cache.paths[0], "target");
        assert_string_equal(c->cache.paths[1], "node_modules/.cache");
        assert_null(c->cache.paths[2]);
        assert_int_equal(c->cache.max_bytes, CONFIG_DEFAULT_CACHE_MAX_BYTES);
        assert_int_equal(c->cache.max_bytes, 2ULL << 30);
        assert_int_equal(c->cache.max_entries, CONFIG_DEFAULT_CACHE_MAX_ENTRIES);
        assert_int_equal(c->cache.max_entries, 200000);
        /* the store grows by (2 x concurrency + 1) caches: the current one, a take-in and an older
         * one held by a lane per running job: 2g + 3 x 2g */
        assert_int_equal(c->concurrency, 1);
        assert_int_equal(c->limits.max_store_bytes, 2ULL << 30);
        assert_int_equal(config_store_tmpfs_bytes(c), 8ULL << 30);
        /* three caches of 200000 entries, 2 roots and 6 files of their own, 64 for the cache's
         * files, and per lane (2) the mount points target, node_modules, node_modules/.cache */
        assert_int_equal(config_store_cache_inodes(c), 3 * (200000 + 2 + 6) + 64 + 2 * 3);
        assert_int_equal(config_store_tmpfs_inodes(c), 2 * (200000 + 8) + 1024 + 600094);
}

static void test_cache_set(void **state) {
        (void) state;
        _cleanup_config_ Config *c = parse_mods((const char *const[]) {
                "cache.paths", "[\"build\"]", "cache.max_bytes", "\"512m\"", "cache.max_entries", "1000",
                "limits.max_store_bytes", "\"3g\"", NULL });

        assert_int_equal(c->cache.n_paths, 1);
        assert_string_equal(c->cache.paths[0], "build");
        assert_int_equal(c->cache.max_bytes, 512ULL << 20);
        assert_int_equal(c->cache.max_entries, 1000);
        /* limits.max_store_bytes itself is what the file says; only the tmpfs adds the cache */
        assert_int_equal(c->limits.max_store_bytes, 3ULL << 30);
        assert_int_equal(config_store_tmpfs_bytes(c), (3ULL << 30) + 3 * (512ULL << 20));
        assert_int_equal(config_store_cache_inodes(c), 3 * (1000 + 1 + 6) + 64 + 2 * 1);
}

/* docs/config.md, "Sizing the store": its table's row for concurrency 4 and a cache of 8g (200000
 * entries at one path, the other limits their defaults): 74 GiB, 2,801,196 inodes. */
static void test_store_sizing_row(void **state) {
        (void) state;
        _cleanup_config_ Config *c = parse_mods((const char *const[]) {
                "concurrency", "4", "cache.paths", "[\"build\"]", "cache.max_bytes", "\"8g\"", NULL });

        assert_int_equal(config_store_tmpfs_bytes(c), (2ULL << 30) + 9 * (8ULL << 30));
        assert_int_equal(config_store_tmpfs_bytes(c), 74ULL << 30);
        assert_int_equal(config_store_tmpfs_inodes(c), 5 * (200000 + 8) + 1024 + 9 * (200000 + 1 + 6) + 64 + 5);
        assert_int_equal(config_store_tmpfs_inodes(c), 2801196);
}

static void test_cache_store_at_the_maxima(void **state) {
        (void) state;
        _cleanup_config_ Config *c = parse_mods((const char *const[]) {
                "cache.paths", "[\"build\"]", "cache.max_bytes", "\"2048g\"", "cache.max_entries", "10000000",
                "limits.max_store_bytes", "\"2048g\"", NULL });

        assert_int_equal(config_store_tmpfs_bytes(c), 4 * (2ULL << 40));
        assert_int_equal(config_store_cache_inodes(c), 3 * (10000000 + 1 + 6) + 64 + 2);
}

/* The helpers saturate rather than wrap, whatever a caller put in a Config. */
static void test_cache_store_saturates(void **state) {
        (void) state;
        char *paths[] = { (char *) "build", NULL };
        Config c = {
                .limits.max_store_bytes = UINT64_MAX - 10,
                .cache = { .paths = paths, .n_paths = 1, .max_bytes = 6, .max_entries = UINT64_MAX / 2 },
        };

        assert_true(config_store_tmpfs_bytes(&c) == UINT64_MAX);
        assert_true(config_store_cache_inodes(&c) == UINT64_MAX);
        c.limits.max_store_bytes = 1;
        c.cache.max_bytes = UINT64_MAX / 2 + 1;
        assert_true(config_store_tmpfs_bytes(&c) == UINT64_MAX);
        c.cache.max_bytes = 5;
        c.cache.max_entries = UINT64_MAX / 3 - 63;
        assert_true(config_store_tmpfs_bytes(&c) == 16); /* concurrency 0 counts as 1: 1 + 3 x 5 */
        /* 3 caches of (M + 1 root + 6), 64, 2 lanes x 1 mount point: just below the top */
        assert_true(config_store_cache_inodes(&c) == UINT64_MAX - 189 + 3 * 7 + 64 + 2);
        assert_true(config_store_tmpfs_inodes(&c) == UINT64_MAX); /* + the lanes' 1024 and 16 */
        c.cache.max_entries = UINT64_MAX / 3;
        assert_true(config_store_cache_inodes(&c) == UINT64_MAX);
        c.cache.max_entries = UINT64_MAX / 3 - 63;
        c.concurrency = 4; /* 9 caches */
        assert_true(config_store_tmpfs_bytes(&c) == 46);
}

static void test_cache_messages(void **state) {
        (void) state;
        expect_message((const char *const[]) { "cache.paths", "[\"build\",\"target\",\"build/x\"]", NULL },
                       "bad_value",
                       "key 'cache.paths[2]': 'build/x' and cache.paths[0] 'build' overlap: the cache owns "
                       "each path whole, so no path may be inside another");
        expect_message((const char *const[]) { "cache.paths", "[\"build\",\"build\"]", NULL }, "bad_value",
                       "key 'cache.paths[1]': 'build' is already cache.paths[0]");
        expect_message((const char *const[]) { "cache.paths", "[\"a\",\"/srv/build\"]", NULL }, "bad_value",
                       "key 'cache.paths[1]': '/srv/build' must be relative to the workspace (no leading '/')");
        expect_message((const char *const[]) { "cache.paths", "[\"a/../b\"]", NULL }, "bad_value",
                       "key 'cache.paths[0]': 'a/../b' must be normalised (no '.' or '..' component)");
        expect_message((const char *const[]) { "cache.paths", "[\"a\\u0001b\"]", NULL }, "bad_value",
                       "key 'cache.paths[0]': 'a?b' must not contain control characters");
        expect_message((const char *const[]) { "cache.paths", "[\"artifacts/x\"]", NULL }, "bad_value",
                       "key 'cache.paths[0]': 'artifacts/x' is inside 'artifacts', the artifact directory: "
                       "what a job leaves in /work/artifacts are its artifacts");
        expect_message((const char *const[]) { "cache.paths", "[\".tentaflake-worker\"]", NULL }, "bad_value",
                       "key 'cache.paths[0]': '.tentaflake-worker' is the worker's control directory, never "
                       "part of a snapshot");
        expect_message((const char *const[]) { "cache.paths", "[]", NULL }, "bad_value",
                       "key 'cache.paths': must name at least one path (leave cache out for no cache)");
        expect_message((const char *const[]) { "runtime.driver", "\"podman\"", "runtime.image",
                                               "\"sha256:" H64 "\"", "cache.paths", "[\"build\"]", NULL },
                       "inconsistent",
                       "key 'cache': needs runtime.driver \"runsc\" or \"runc\": the engines' daemons cannot see the "
                       "worker's cache (driver 'podman')");
}

static void test_names_and_drivers(void **state) {
        (void) state;
        assert_true(config_name_is_valid("a"));
        assert_true(config_name_is_valid("hermes-coding"));
        assert_false(config_name_is_valid(NULL));
        assert_false(config_name_is_valid(""));
        assert_false(config_name_is_valid("-a"));
        assert_false(config_name_is_valid("a.b"));
        assert_string_equal(driver_to_string(DRIVER_RUNSC), "runsc");
        assert_string_equal(driver_to_string(DRIVER_DOCKER), "docker");
        assert_string_equal(driver_to_string(DRIVER_PODMAN), "podman");
        assert_null(driver_to_string(_DRIVER_MAX));
}

/* ---- config_load -------------------------------------------------------------------------- */

static char *path_in(const TestDir *d, const char *name) {
        char *p;
        assert_true(asprintf(&p, "%s/%s", d->path, name) > 0);
        return p;
}

static void expect_load_error(const char *path, const char *code) {
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};
        char prefix[4200];

        if (config_load(path, &c, &e) >= 0)
                fail_msg("'%s' loaded, expected %s", path, code);
        assert_null(c);
        assert_string_equal(e.code, code);
        snprintf(prefix, sizeof(prefix), "config '%s': ", path);
        if (strncmp(e.message, prefix, strlen(prefix)) != 0)
                fail_msg("message '%s' does not start with \"%s\"", e.message, prefix);
}

static void test_load_good(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *json = tfw_read_fixture("config/full.json", NULL);
        _cleanup_free_ char *p = path_in(d, "worker.json");
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};

        tfw_write_file(d->fd, "worker.json", json, (size_t) -1);
        if (config_load(p, &c, &e) < 0)
                fail_msg("%s", e.message);
        assert_string_equal(c->name, "ci-runner-7");
}

/* NixOS keeps /etc files as symlinks into the store: the last component may be a symlink. */
static void test_load_symlink(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *json = tfw_read_fixture(MINIMAL, NULL);
        _cleanup_free_ char *p = path_in(d, "link.json");
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};

        tfw_write_file(d->fd, "target.json", json, (size_t) -1);
        assert_int_equal(symlinkat("target.json", d->fd, "link.json"), 0);
        if (config_load(p, &c, &e) < 0)
                fail_msg("%s", e.message);
        assert_string_equal(c->name, "hermes-coding");
}

static void test_load_message_exact(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *json = tfw_read_fixture("config/bad-memory-size.json", NULL);
        _cleanup_free_ char *p = path_in(d, "x.json");
        _cleanup_free_ char *want = NULL;
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};

        tfw_write_file(d->fd, "x.json", json, (size_t) -1);
        assert_true(config_load(p, &c, &e) < 0);
        assert_true(asprintf(&want,
                             "config '%s': key 'limits.memory': invalid size '2x' (an integer, or "
                             "digits with k, m or g)",
                             p) > 0);
        assert_string_equal(e.message, want);
        assert_string_equal(e.code, "bad_value");
        assert_int_equal(e.error, EBADMSG);
}

static void on_alarm(int sig) {
        (void) sig;
        static const char m[] = "config_load blocked on a FIFO\n";
        (void) !write(STDERR_FILENO, m, sizeof(m) - 1);
        _exit(1);
}

static void test_load_fifo(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *p = path_in(d, "fifo.json");

        assert_int_equal(mkfifoat(d->fd, "fifo.json", 0600), 0);
        /* Without O_NONBLOCK the open would wait for a writer forever; the alarm turns that
         * hang into a failure (a watchdog, not a timing assertion). */
        signal(SIGALRM, on_alarm);
        alarm(60);
        expect_load_error(p, "not_regular_file");
        alarm(0);
        signal(SIGALRM, SIG_DFL);
}

static void test_load_directory(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *p = path_in(d, "dir.json");
        assert_int_equal(mkdirat(d->fd, "dir.json", 0700), 0);
        expect_load_error(p, "not_regular_file");
}

static void test_load_device(void **state) {
        (void) state;
        expect_load_error("/dev/null", "not_regular_file");
}

static void test_load_missing(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *p = path_in(d, "missing.json");
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};
        expect_load_error(p, "io_error");
        assert_true(config_load(p, &c, &e) < 0);
        assert_int_equal(e.error, ENOENT);
}

static void write_oversize(int dir_fd, const char *name) {
        _cleanup_free_ char *json = build_config((const char *const[]) { NULL });
        size_t n = CONFIG_MAX_BYTES + 1;
        _cleanup_free_ char *big = malloc(n);
        assert_non_null(big);
        memset(big, '\n', n);
        memcpy(big, json, strlen(json));
        tfw_write_file(dir_fd, name, big, n);
}

static void test_load_oversize(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *p = path_in(d, "big.json");
        write_oversize(d->fd, "big.json");
        expect_load_error(p, "too_large");
}

/* The bounded read on its own, without config_load's size check in front of it. */
static void test_parse_fd_oversize(void **state) {
        TestDir *d = *state;
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};
        write_oversize(d->fd, "big.json");
        _cleanup_close_ int fd = openat(d->fd, "big.json", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(config_parse_fd(fd, &c, &e), -E2BIG);
        assert_string_equal(e.code, "too_large");
        assert_null(c);
}

static void test_parse_fd_pipe(void **state) {
        (void) state;
        _cleanup_free_ char *json = build_config((const char *const[]) { NULL });
        _cleanup_config_ Config *c = NULL;
        TfwError e = {};
        int p[2];

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(write_all(p[1], json, strlen(json)), 0);
        safe_close(p[1]);
        if (config_parse_fd(p[0], &c, &e) < 0)
                fail_msg("%s", e.message);
        safe_close(p[0]);
        assert_string_equal(c->name, "hermes-coding");
}

int main(void) {
        static const struct CMUnitTest fixed[] = {
                cmocka_unit_test(test_duplicate_top_level_key),
                cmocka_unit_test(test_duplicate_nested_key),
                cmocka_unit_test(test_nul_byte),
                cmocka_unit_test(test_escaped_nul),
                cmocka_unit_test(test_invalid_utf8),
                cmocka_unit_test(test_bad_json),
                cmocka_unit_test(test_top_level_not_object),
                cmocka_unit_test(test_huge_number),
                cmocka_unit_test(test_negative_size_message),
                cmocka_unit_test(test_buffer_too_large),
                cmocka_unit_test(test_minimal_all_defaults),
                cmocka_unit_test(test_full_every_key),
                cmocka_unit_test(test_docker_fixture),
                cmocka_unit_test(test_rootfs_fixture),
                cmocka_unit_test(test_bad_fixtures),
                cmocka_unit_test(test_names_and_drivers),
                cmocka_unit_test(test_egress_ids_refused),
                cmocka_unit_test(test_cache_absent),
                cmocka_unit_test(test_cache_defaults),
                cmocka_unit_test(test_cache_set),
                cmocka_unit_test(test_store_sizing_row),
                cmocka_unit_test(test_cache_store_at_the_maxima),
                cmocka_unit_test(test_cache_store_saturates),
                cmocka_unit_test(test_cache_messages),
                cmocka_unit_test_setup_teardown(test_load_good, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_load_symlink, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_load_message_exact, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_load_fifo, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_load_directory, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_load_device),
                cmocka_unit_test_setup_teardown(test_load_missing, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_load_oversize, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_parse_fd_oversize, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_parse_fd_pipe),
        };
        size_t n_static = ELEMENTSOF(static_cases), n = 0;
        struct CMUnitTest *tests;
        int r;

        make_dynamic_cases();
        tests = calloc(n_static + n_dynamic + ELEMENTSOF(fixed), sizeof(*tests));
        if (!tests)
                return 1;
        for (size_t i = 0; i < n_static; i++)
                tests[n++] = (struct CMUnitTest) {
                        .name = static_cases[i].name,
                        .test_func = run_case,
                        .initial_state = (void *) &static_cases[i],
                };
        for (size_t i = 0; i < n_dynamic; i++)
                tests[n++] = (struct CMUnitTest) {
                        .name = dynamic_cases[i].name,
                        .test_func = run_case,
                        .initial_state = &dynamic_cases[i],
                };
        for (size_t i = 0; i < ELEMENTSOF(fixed); i++)
                tests[n++] = fixed[i];
        r = _cmocka_run_group_tests("config", tests, n, NULL, NULL);
        free(tests);
        return r;
}
