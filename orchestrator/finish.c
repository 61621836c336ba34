/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <syslog.h>

#include "capsule/walls.h"
#include "common/fd-util.h"
#include "artifacts/inbox-attest.h"
#include "common/json-util.h"
#include "orchestrator/audit.h"
#include "orchestrator/finish.h"
#include "orchestrator/publish.h"

/* The ending a published result stands for, when its own line may be missing: what recovery
 * records (the request's state says whether a job began). */
static const char *inferred_ending(const RequestRecord *rec, const char *status) {
        if (streq(status, "interrupted") || streq(status, "expired") || streq(status, "denied"))
                return status;
        if (streq(status, "rejected") && rec->state != STATE_RUNNING)
                return "rejected";
        if (streq(status, "cancelled") && rec->state != STATE_RUNNING)
                return "cancelled"; /* withdrawn before it ran (orchestrator/cancel.h) */
        return "finished";
}

/* A result's walls as the audit line's "walls" (strings: its schema has no nested objects),
 * or NULL when there are none. */
static json_t *audit_walls(const json_t *walls) {
        size_t i;
        json_t *el, *out = NULL;
        json_array_foreach(walls, i, el) {
                const char *wall = json_string_value(json_object_get(el, "wall"));
                const char *detail = json_string_value(json_object_get(el, "detail"));
                json_t *count = json_object_get(el, "count");
                char line[WALL_DETAIL_MAX + 64];
                if (!wall || !detail || !json_is_integer(count))
                        continue;
                snprintf(line, sizeof(line), "%s: %s (%lld)", wall, detail, (long long) json_integer_value(count));
                if (!out && !(out = json_array()))
                        return NULL;
                json_array_append_new(out, json_string(line));
        }
        return out;
}

/* rec's result was already published, by this process or one that died before it marked the
 * record final: its ending's audit line may or may not have been written (finish_request
 * writes it between the two). Written once: only when no ending of rec is in the audit log,
 * from the published result, its message saying so. */
static void audit_published_ending(Worker *w, const RequestRecord *rec, const char *status, const json_t *res) {
        static const char *const endings[] = {"finished", "interrupted", "error", "denied", "expired",
                                              "rejected", "cancelled", NULL};
        TfwError e = {0};
        int r = audit_find(w->dirs.state_fd, rec->id, rec->sha256, rec->submitted_at, endings, &e);
        if (r < 0)
                worker_say(w, LOG_ERR, "audit: cannot tell whether the ending of '%s' is recorded (not recorded "
                                       "again): %s", rec->id, e.message);
        if (r != 0)
                return;
        json_t *err = json_object_get(res, "error"), *msg = json_object_get(res, "message");
        json_t *code = json_object_get(res, "exit_code");
        char text[1100];
        snprintf(text, sizeof(text), "recorded at recovery, from the published result%s%s",
                 json_is_string(msg) ? ": " : "", json_is_string(msg) ? json_string_value(msg) : "");
        _cleanup_(json_decrefp) json_t *f = json_pack("{s:s, s:s, s:s, s:s?, s:s}", "id", rec->id, "request_sha256",
                                                      rec->sha256, "outcome", status, "error",
                                                      json_is_string(err) ? json_string_value(err) : NULL,
                                                      "message", text);
        if (f && json_is_integer(code))
                json_object_set(f, "exit_code", code);
        json_t *walls = audit_walls(json_object_get(res, "walls"));
        if (f && walls)
                json_object_set(f, "walls", walls);
        json_decref(walls);
        if (f)
                (void) worker_audit_best_effort(w, inferred_ending(rec, status), f);
}

int finish_request(Worker *w, RequestRecord *rec, const Request *req, const char *status,
                   const char *error, const char *message, const ResultRun *run, const FinishAudit *audit,
                   TfwError *e) {
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
                /* Published, then audited, then the record final: a crash before the record
                 * leaves a published result that recovery adopts (below), never a final
                 * record whose ending is not in the log. */
                if (audit && audit->fields)
                        (void) worker_audit_best_effort(w, audit->event, audit->fields);
                else if (audit) {
                        /* Its line names the ending it records (it read an empty status before). */
                        snprintf(rec->status, sizeof(rec->status), "%s", st);
                        finish_audit(w, audit->event, rec, error, message, run);
                }
        } else {
                _cleanup_(json_decrefp) json_t *res = publish_load_result(&w->dirs, rec->id);
                json_t *pst = json_object_get(res, "status");
                if (json_is_string(pst))
                        snprintf(st, sizeof(st), "%s", json_string_value(pst));
                if (audit)
                        audit_published_ending(w, rec, st, res);
        }
        rec->state = STATE_FINAL;
        rec->ending_unrecorded = false;
        snprintf(rec->status, sizeof(rec->status), "%s", st);
        rec->updated_at = now_realtime();
        return store_save(w->dirs.requests_fd, rec, e);
}

static bool isolation_words(json_t *iso, char *buf, size_t size) {
        json_t *wall;
        size_t i;
        int n = snprintf(buf, size, "%s %s ", json_string_value(json_object_get(iso, "engine")),
                         json_string_value(json_object_get(iso, "kernel")));
        json_array_foreach(json_object_get(iso, "walls"), i, wall) {
                if (n < 0 || (size_t) n >= size)
                        return false;
                n += snprintf(buf + n, size - (size_t) n, "%s%s", i ? "," : "", json_string_value(wall));
        }
        return n > 0 && (size_t) n < size;
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
        json_t *walls = run ? audit_walls(run->walls) : NULL;
        if (walls)
                json_object_set_new(f, "walls", walls);
        /* The engine it ran in and its walls, as its result names them (contract section 6):
         * "ENGINE KERNEL WALL,WALL,...". */
        char iso[512];
        if (run && run->isolation && isolation_words(run->isolation, iso, sizeof(iso)))
                json_object_set_new(f, "isolation", json_string(iso));
        (void) worker_audit_best_effort(w, event, f);
}

json_t *finish_decision_fields(const RequestRecord *rec, const char *reason) {
        return json_pack("{s:s, s:s, s:s?, s:s, s:s?}", "id", rec->id, "request_sha256", rec->sha256,
                         "action_class", rec->action_class >= 0 ? action_class_to_string(rec->action_class) : NULL,
                         "approver", rec->approver, "reason", reason);
}
