/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/json-util.h"
#include "common/path-util.h"
#include "parser/worker-info.h"

static const char *const policy_names[] = {
        [ACTION_POLICY_RUN] = "run",
        [ACTION_POLICY_APPROVAL] = "approval",
        [ACTION_POLICY_REJECT] = "rejected",
};

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
        return json_pack("{s:i, s:s, s:s, s:s, s:s, s:s?, s:{s:I, s:I, s:I, s:I, s:I, s:i, s:i}, s:O, s:s, s:s}",
                         "version", 1, "name", info->name, "workspace", info->workspace, "inbox", inbox,
                         "results_dir", info->results_dir, "config", info->config, "limits",
                         "max_request_bytes", (json_int_t) p->max_request_bytes, "max_argv",
                         (json_int_t) p->max_argv, "max_argv_bytes", (json_int_t) p->max_argv_bytes,
                         "default_timeout_seconds", (json_int_t) p->default_timeout_seconds,
                         "max_timeout_seconds", (json_int_t) p->max_timeout_seconds, "max_reason_bytes",
                         REQUEST_REASON_MAX, "max_id_bytes", REQUEST_ID_MAX, "action_classes", classes,
                         "worker_version", TFW_VERSION, "started_at", format_rfc3339(started_at, ts));
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
        *ret = info;
        *ret_json = TAKE_PTR(j);
        return 0;
}
