/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/json-util.h"
#include "common/path-util.h"
#include "common/size.h"
#include "parser/config.h"
#include "parser/egress-allow.h"
#include "parser/worker-info.h"

static const char *const policy_names[] = {
        [ACTION_POLICY_RUN] = "run",
        [ACTION_POLICY_APPROVAL] = "approval",
        [ACTION_POLICY_REJECT] = "rejected",
};

static json_t *job_build(const WorkerJobInfo *j) {
        char cpus[32];
        json_t *net = json_null(), *cache = json_null();

        snprintf(cpus, sizeof(cpus), "%" PRIu64 ".%03" PRIu64, j->cpus_milli / 1000, j->cpus_milli % 1000);
        /* "2.000" -> "2.0", "0.500" -> "0.5": the config's own spelling. */
        for (size_t n = strlen(cpus); n > 0 && cpus[n - 1] == '0' && cpus[n - 2] != '.'; n--)
                cpus[n - 1] = 0;
        if (j->network_allow)
                net = json_pack("{s:O, s:I, s:I, s:I}", "allow", j->network_allow, "max_upload_bytes",
                                (json_int_t) j->max_upload_bytes, "max_download_bytes",
                                (json_int_t) j->max_download_bytes, "max_connections", (json_int_t) j->max_connections);
        if (j->cache_paths)
                cache = json_pack("{s:O}", "paths", j->cache_paths);
        if (!net || !cache) {
                json_decref(net);
                json_decref(cache);
                return NULL;
        }
        json_t *job = json_pack("{s:{s:I, s:s, s:I, s:I, s:I, s:I}, s:o, s:o, s:b}", "limits", "memory_bytes",
                                (json_int_t) j->memory_bytes, "cpus", cpus, "pids", (json_int_t) j->pids,
                                "max_log_bytes", (json_int_t) j->max_log_bytes, "max_artifact_bytes",
                                (json_int_t) j->max_artifact_bytes, "max_artifact_entries",
                                (json_int_t) j->max_artifact_entries, "network", net, "cache", cache, "changes",
                                j->changes);
        if (job && j->engine && j->kernel &&
            json_object_set_new(job, "isolation", json_pack("{s:s, s:s}", "engine", j->engine, "kernel", j->kernel)) < 0)
                return json_decref(job), NULL;
        return job;
}

json_t *worker_info_build(const WorkerInfo *info, usec_t started_at) {
        char ts[RFC3339_MAX], inbox[4096];
        const RequestPolicy *p = &info->limits;

        if (path_join_buf(inbox, sizeof(inbox), info->workspace, ".tentaflake-worker/inbox") < 0)
                return NULL;
        _cleanup_(json_decrefp) json_t *classes = json_object();
        if (!classes)
                return NULL;
        for (int c = 0; c < _ACTION_CLASS_MAX; c++)
                if (json_object_set_new(classes, action_class_to_string((ActionClass) c),
                                        json_string(policy_names[action_class_policy((ActionClass) c)])) < 0)
                        return NULL;
        json_t *job = job_build(&info->job);
        if (!job)
                return NULL;
        return json_pack("{s:i, s:s, s:s, s:s, s:s, s:s?, s:{s:I, s:I, s:I, s:I, s:I, s:i, s:i}, s:O, s:o, s:s, s:s}",
                         "version", 1, "name", info->name, "workspace", info->workspace, "inbox", inbox,
                         "results_dir", info->results_dir, "config", info->config, "limits",
                         "max_request_bytes", (json_int_t) p->max_request_bytes, "max_argv",
                         (json_int_t) p->max_argv, "max_argv_bytes", (json_int_t) p->max_argv_bytes,
                         "default_timeout_seconds", (json_int_t) p->default_timeout_seconds,
                         "max_timeout_seconds", (json_int_t) p->max_timeout_seconds, "max_reason_bytes",
                         REQUEST_REASON_MAX, "max_id_bytes", REQUEST_ID_MAX, "action_classes", classes, "job",
                         job, "worker_version", TFW_VERSION, "started_at", format_rfc3339(started_at, ts));
}

static int get_path(json_t *obj, const char *key, bool required, const char **ret, TfwError *e) {
        const char *s = NULL;
        int r = json_get_string(obj, key, key, required, !required, &s, e);
        if (r == -ENOENT) {
                *ret = NULL;
                return 0;
        }
        if (r < 0)
                return r;
        if (!path_is_absolute_normalized(s))
                return tfw_error(e, EBADMSG, "bad_path", "field '%s' is not an absolute, normalised path", key);
        *ret = s;
        return 0;
}

/* Why s is not a network.allow entry, NULL when it is one. */
static const char *allow_problem(const char *s, size_t len) {
        EgressAllow a;
        const char *reason = NULL;
        if (strlen(s) != len)
                return "must not contain a NUL byte";
        if (len > CONFIG_NETWORK_ENTRY_MAX)
                return "is too long for an allowlist entry";
        return egress_allow_parse(s, &a, &reason) < 0 ? reason : NULL;
}

/* obj's key: null (*ret NULL) or an array of at most max strings, each one problem() takes. */
static int get_strings(json_t *obj, const char *key, const char *field, size_t max,
                       const char *(*problem)(const char *s, size_t len), json_t **ret, TfwError *e) {
        json_t *a = json_object_get(obj, key), *v;
        size_t i;
        if (!a)
                return tfw_error(e, EBADMSG, "missing_field", "field '%s' is required", field);
        if (json_is_null(a)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > max)
                return tfw_error(e, EBADMSG, "bad_type", "field '%s' must be null or an array of 1..%zu strings", field,
                                 max);
        json_array_foreach(a, i, v) {
                const char *why = json_is_string(v) ? problem(json_string_value(v), json_string_length(v))
                                                    : "must be a string";
                if (why)
                        return tfw_error(e, EBADMSG, "bad_value", "field '%s[%zu]' %s", field, i, why);
        }
        *ret = a;
        return 0;
}

static int get_u64(json_t *obj, const char *key, const char *prefix, uint64_t *ret, TfwError *e) {
        char field[64];
        int64_t v;
        snprintf(field, sizeof(field), "%s%s", prefix, key);
        int r = json_get_int_range(obj, key, field, true, 1, INT64_MAX, &v, e);
        if (r < 0)
                return r;
        *ret = (uint64_t) v;
        return 0;
}

static int get_object(json_t *obj, const char *key, const char *field, bool nullable, json_t **ret, TfwError *e) {
        json_t *v = json_object_get(obj, key);
        if (!v)
                return tfw_error(e, EBADMSG, "missing_field", "field '%s' is required", field);
        if (nullable && json_is_null(v)) {
                *ret = NULL;
                return 0;
        }
        if (!json_is_object(v))
                return tfw_error(e, EBADMSG, "bad_type", "field '%s' must be an object%s", field, nullable ? " or null" : "");
        *ret = v;
        return 0;
}

/* "job": every key required, as this worker writes them all. */
/* "isolation" (optional: an older worker has none): one of the engines and kernels this client
 * knows, since its words reach a model. */
static int isolation_parse(json_t *job, WorkerJobInfo *j, TfwError *e) {
        static const char *const engines[] = {"runsc", "runc", "docker", "podman", NULL};
        static const char *const kernels[] = {"gvisor", "host", NULL};
        json_t *iso = json_object_get(job, "isolation");
        const char *engine, *kernel;
        bool known_engine = false, known_kernel = false;
        int r;

        if (!iso || json_is_null(iso))
                return 0;
        if (!json_is_object(iso))
                return tfw_error(e, EBADMSG, "bad_type", "field 'job.isolation' must be an object");
        if ((r = json_get_string(iso, "engine", "job.isolation.engine", true, false, &engine, e)) < 0 ||
            (r = json_get_string(iso, "kernel", "job.isolation.kernel", true, false, &kernel, e)) < 0)
                return r;
        for (const char *const *k = engines; *k; k++)
                known_engine = known_engine || streq(*k, engine);
        for (const char *const *k = kernels; *k; k++)
                known_kernel = known_kernel || streq(*k, kernel);
        if (!known_engine || !known_kernel)
                return tfw_error(e, EBADMSG, "bad_value", "field 'job.isolation' names an engine or a kernel this client "
                                                          "does not know");
        j->engine = engine;
        j->kernel = kernel;
        return 0;
}

static int job_parse(json_t *job, WorkerJobInfo *ret, TfwError *e) {
        WorkerJobInfo j = {};
        json_t *lim, *net, *cache, *ch;
        const char *cpus;
        int r;

        if ((r = get_object(job, "limits", "job.limits", false, &lim, e)) < 0 ||
            (r = get_u64(lim, "memory_bytes", "job.limits.", &j.memory_bytes, e)) < 0 ||
            (r = get_u64(lim, "pids", "job.limits.", &j.pids, e)) < 0 ||
            (r = get_u64(lim, "max_log_bytes", "job.limits.", &j.max_log_bytes, e)) < 0 ||
            (r = get_u64(lim, "max_artifact_bytes", "job.limits.", &j.max_artifact_bytes, e)) < 0 ||
            (r = get_u64(lim, "max_artifact_entries", "job.limits.", &j.max_artifact_entries, e)) < 0 ||
            (r = json_get_string(lim, "cpus", "job.limits.cpus", true, false, &cpus, e)) < 0)
                return r;
        if (parse_cpus(cpus, &j.cpus_milli) < 0)
                return tfw_error(e, EBADMSG, "bad_value", "field 'job.limits.cpus' is not a CPU count such as \"2.0\"");
        if ((r = get_object(job, "network", "job.network", true, &net, e)) < 0 ||
            (r = get_object(job, "cache", "job.cache", true, &cache, e)) < 0)
                return r;
        if (net && ((r = get_strings(net, "allow", "job.network.allow", CONFIG_NETWORK_ALLOW_MAX, allow_problem,
                                     &j.network_allow, e)) < 0 ||
                    (r = get_u64(net, "max_upload_bytes", "job.network.", &j.max_upload_bytes, e)) < 0 ||
                    (r = get_u64(net, "max_download_bytes", "job.network.", &j.max_download_bytes, e)) < 0 ||
                    (r = get_u64(net, "max_connections", "job.network.", &j.max_connections, e)) < 0))
                return r;
        if (net && !j.network_allow)
                return tfw_error(e, EBADMSG, "bad_type", "field 'job.network.allow' must be an array: no network is "
                                                         "'\"network\": null'");
        if (cache && (r = get_strings(cache, "paths", "job.cache.paths", CONFIG_CACHE_PATHS_MAX,
                                      config_cache_path_problem, &j.cache_paths, e)) < 0)
                return r;
        if (cache && !j.cache_paths)
                return tfw_error(e, EBADMSG, "bad_type", "field 'job.cache.paths' must be an array: no cache is "
                                                         "'\"cache\": null'");
        r = isolation_parse(job, &j, e);
        if (r < 0)
                return r;
        ch = json_object_get(job, "changes");
        if (!json_is_boolean(ch))
                return tfw_error(e, EBADMSG, ch ? "bad_type" : "missing_field", "field 'job.changes' must be true or false");
        j.changes = json_is_true(ch);
        *ret = j;
        return 0;
}

int worker_info_parse(const char *buf, size_t len, WorkerInfo *ret, json_t **ret_json, TfwError *e) {
        _cleanup_(json_decrefp) json_t *j = NULL;
        WorkerInfo info = {};
        int64_t v;
        int r;

        if (len > WORKER_INFO_MAX_BYTES)
                return tfw_error(e, E2BIG, "too_large", "worker.json is larger than %d bytes", WORKER_INFO_MAX_BYTES);
        r = json_load_object_strict(buf, len, "worker.json", &j, e);
        if (r < 0)
                return r;
        r = json_get_int_range(j, "version", "version", true, INT64_MIN, INT64_MAX, &v, e);
        if (r < 0)
                return r;
        if (v != 1)
                return tfw_error(e, EPROTONOSUPPORT, "unsupported_version",
                                 "worker.json has version %" PRId64 ", only 1 is understood", v);
        r = json_get_string(j, "name", "name", false, true, &info.name, e);
        if (r < 0 && r != -ENOENT)
                return r;
        if ((r = get_path(j, "workspace", false, &info.workspace, e)) < 0 ||
            (r = get_path(j, "results_dir", true, &info.results_dir, e)) < 0 ||
            (r = get_path(j, "config", false, &info.config, e)) < 0)
                return r;

        info.limits = request_policy_default;
        json_t *lim = json_object_get(j, "limits");
        if (lim) {
                static const struct {
                        const char *key;
                        size_t off;
                } keys[] = {
                        {"max_request_bytes", offsetof(RequestPolicy, max_request_bytes)},
                        {"max_argv", offsetof(RequestPolicy, max_argv)},
                        {"max_argv_bytes", offsetof(RequestPolicy, max_argv_bytes)},
                        {"default_timeout_seconds", offsetof(RequestPolicy, default_timeout_seconds)},
                        {"max_timeout_seconds", offsetof(RequestPolicy, max_timeout_seconds)},
                };
                if (!json_is_object(lim))
                        return tfw_error(e, EBADMSG, "bad_type", "field 'limits' must be an object");
                for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                        char field[64];
                        snprintf(field, sizeof(field), "limits.%s", keys[i].key);
                        r = json_get_int_range(lim, keys[i].key, field, false, 1, INT64_MAX, &v, e);
                        if (r == -ENOENT)
                                continue;
                        if (r < 0)
                                return r;
                        *(uint64_t *) ((char *) &info.limits + keys[i].off) = (uint64_t) v;
                }
        }
        json_t *job = json_object_get(j, "job");
        if (job) {
                if (!json_is_object(job))
                        return tfw_error(e, EBADMSG, "bad_type", "field 'job' must be an object");
                if ((r = job_parse(job, &info.job, e)) < 0)
                        return r;
                info.has_job = true;
        }
        r = json_get_string(j, "started_at", "started_at", false, true, &info.started_at, e);
        if (r < 0 && r != -ENOENT)
                return r;
        *ret = info;
        *ret_json = TAKE_PTR(j);
        return 0;
}
