/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>

#include "common/fd-util.h"
#include "artifacts/inbox-attest.h"
#include "common/json-util.h"
#include "orchestrator/finish.h"
#include "orchestrator/publish.h"

int finish_request(Worker *w, RequestRecord *rec, const Request *req, const char *status,
                   const char *error, const char *message, const ResultRun *run, TfwError *e) {
        _cleanup_request_ Request *loaded = NULL;
        char st[sizeof(rec->status)];
        int r;

        /* status may be rec->status itself: copy it before the record is rewritten. */
        snprintf(st, sizeof(st), "%s", status);
        if (!publish_exists(&w->dirs, rec->id)) {
                if (!req && store_read_request(w->dirs.requests_fd, rec->id, &w->policy, &loaded, NULL) >= 0)
                        req = loaded;
                _cleanup_(json_decrefp) json_t *res = result_build(w->config, rec, req, st, error, message, run);
                _cleanup_close_ int sfd = open_dir_at(w->dirs.staging_fd, rec->id);
                if (sfd < 0)
                        sfd = publish_stage_begin(&w->dirs, rec->id, e);
                if (sfd < 0)
                        return sfd;
                /* With a signing key, every final result is signed (contract section 7):
                 * attestation.json joins the staging directory before it is published. */
                r = inbox_attest_result(w->config, sfd, res, e);
                if (r < 0)
                        return r;
                r = publish_commit(&w->dirs, w->config->container_gid, rec->id, res, e);
                if (r < 0)
                        return r;
        }
        rec->state = STATE_FINAL;
        snprintf(rec->status, sizeof(rec->status), "%s", st);
        rec->updated_at = now_realtime();
        return store_save(w->dirs.requests_fd, rec, e);
}

void finish_audit(Worker *w, const char *event, const RequestRecord *rec, const char *error,
                  const char *message, const ResultRun *run) {
        _cleanup_(json_decrefp) json_t *f = json_pack("{s:s, s:s, s:s, s:s?, s:s?}", "id", rec->id, "request_sha256",
                                                      rec->sha256, "outcome", rec->status, "error", error,
                                                      "message", message);
        if (!f)
                return;
        if (run && run->has_exit_code)
                json_object_set_new(f, "exit_code", json_integer(run->exit_code));
        if (run && run->signal)
                json_object_set_new(f, "signal", json_integer(run->signal));
        if (run && run->started_at && run->finished_at >= run->started_at)
                json_object_set_new(f, "duration_ms",
                                    json_integer((json_int_t) ((run->finished_at - run->started_at) / USEC_PER_MSEC)));
        (void) worker_audit_best_effort(w, event, f);
}

json_t *finish_decision_fields(const RequestRecord *rec, const char *reason) {
        return json_pack("{s:s, s:s, s:s?, s:s, s:s?}", "id", rec->id, "request_sha256", rec->sha256,
                         "action_class", rec->action_class >= 0 ? action_class_to_string(rec->action_class) : NULL,
                         "approver", rec->approver, "reason", reason);
}
