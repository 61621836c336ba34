/* SPDX-License-Identifier: MIT */
#include "orchestrator/result.h"

static json_t *time_or_null(usec_t t) {
        char buf[RFC3339_MAX];
        return t ? json_string(format_rfc3339(t, buf)) : json_null();
}

static json_t *ref_or_null(json_t *j) {
        return j ? json_incref(j) : json_null();
}

json_t *result_build(const Config *c, const RequestRecord *rec, const Request *req,
                     const char *status, const char *error, const char *message,
                     const ResultRun *run) {
        static const ResultRun none = {};
        json_t *argv = json_null(), *approval = json_null(), *limits;

        if (!run)
                run = &none;
        if (req) {
                argv = json_array();
                for (size_t i = 0; i < req->argc; i++)
                        json_array_append_new(argv, json_string(req->argv[i]));
        }
        if (rec->decision[0]) {
                char ts[RFC3339_MAX];
                approval = json_pack("{s:s, s:s?, s:s?, s:s?}", "decision", rec->decision, "by",
                                     rec->approver[0] ? rec->approver : NULL, "at",
                                     rec->decided_at ? format_rfc3339(rec->decided_at, ts) : NULL,
                                     "reason", rec->reason[0] ? rec->reason : NULL);
        }
        limits = json_pack("{s:I, s:I, s:I, s:s}", "timeout_seconds",
                           (json_int_t) (req ? req->timeout_seconds : c->limits.default_timeout_seconds),
                           "memory", (json_int_t) c->limits.memory, "pids", (json_int_t) c->limits.pids,
                           "cpus", c->limits.cpus);

        json_t *j = json_object();
        json_object_set_new(j, "version", json_integer(1));
        json_object_set_new(j, "id", json_string(rec->id));
        json_object_set_new(j, "status", json_string(status));
        json_object_set_new(j, "exit_code", run->has_exit_code ? json_integer(run->exit_code) : json_null());
        json_object_set_new(j, "signal", run->signal ? json_integer(run->signal) : json_null());
        json_object_set_new(j, "error", error ? json_string(error) : json_null());
        json_object_set_new(j, "message", message ? json_string(message) : json_null());
        json_object_set_new(j, "action_class",
                            rec->action_class >= 0 ? json_string(action_class_to_string(rec->action_class))
                                                   : json_null());
        json_object_set_new(j, "argv", argv);
        json_object_set_new(j, "request_sha256", json_string(rec->sha256));
        json_object_set_new(j, "approval", approval ? approval : json_null());
        json_object_set_new(j, "submitted_at", time_or_null(rec->submitted_at));
        json_object_set_new(j, "started_at", time_or_null(run->started_at));
        json_object_set_new(j, "finished_at", time_or_null(run->finished_at));
        json_object_set_new(j, "duration_ms",
                            run->started_at && run->finished_at >= run->started_at
                                    ? json_integer((json_int_t) ((run->finished_at - run->started_at) / USEC_PER_MSEC))
                                    : json_null());
        json_object_set_new(j, "limits", limits ? limits : json_null());
        json_object_set_new(j, "snapshot", ref_or_null(run->snapshot));
        json_object_set_new(j, "cache", ref_or_null(run->cache));
        json_object_set_new(j, "network", ref_or_null(run->network));
        json_object_set_new(j, "log", ref_or_null(run->log));
        json_object_set_new(j, "artifacts", ref_or_null(run->artifacts));
        json_object_set_new(j, "changes", ref_or_null(run->changes));
        json_object_set_new(j, "environment_digest",
                            run->environment_digest ? json_string(run->environment_digest) : json_null());
        json_object_set_new(j, "runtime", ref_or_null(run->runtime));
        json_object_set_new(j, "walls", run->walls ? json_incref(run->walls) : json_array());
        json_object_set_new(j, "isolation", ref_or_null(run->isolation));
        json_object_set_new(j, "attestation", run->attestation ? json_string("attestation.json") : json_null());
        return j;
}
