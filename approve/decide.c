/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "approve/decide.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "orchestrator/finish.h"
#include "orchestrator/inbox.h"
#include "orchestrator/publish.h"
#include "orchestrator/result.h"
#include "orchestrator/store.h"

void decide_operator_identity(char *buf, size_t size) {
        const char *sudo = getenv("SUDO_USER");
        uid_t uid = (uid_t) -1;
        _cleanup_close_ int fd = -EBADF;
        char lb[32] = "";

        if (sudo && *sudo) {
                snprintf(buf, size, "%s", sudo);
                return;
        }
        fd = open("/proc/self/loginuid", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
                ssize_t n = read(fd, lb, sizeof(lb) - 1);
                if (n > 0) {
                        lb[n] = 0;
                        unsigned long v = strtoul(lb, NULL, 10);
                        if (v != 4294967295UL)
                                uid = (uid_t) v;
                }
        }
        if (uid == (uid_t) -1)
                uid = getuid();
        struct passwd *pw = getpwuid(uid);
        if (pw && pw->pw_name)
                snprintf(buf, size, "%s", pw->pw_name);
        else
                snprintf(buf, size, "uid %u", (unsigned) uid);
}

void decide_wake_daemon(Worker *w) {
        (void) write_file_atomic_at(w->dirs.state_fd, WORKER_WAKE_FILE, "", 0, 0600, (uid_t) -1, (gid_t) -1);
}

static const char *describe(const RequestRecord *r, char *buf, size_t size) {
        char ts[RFC3339_MAX];
        if (r->decision[0])
                snprintf(buf, size, "it was already %s%s%s at %s", r->decision, r->approver[0] ? " by " : "",
                         r->approver, format_rfc3339(r->decided_at, ts));
        else if (r->state == STATE_FINAL)
                snprintf(buf, size, "it is not pending: it already ended as %s", r->status);
        else
                snprintf(buf, size, "it is not pending: it is %s", request_state_to_string(r->state));
        return buf;
}

/* Load id under the lock and check it is pending. */
static int load_pending(Worker *w, const char *verb, const char *id, RequestRecord *rec, TfwError *e) {
        char why[300];
        int r = store_load(w->dirs.requests_fd, id, rec, e);
        if (r == -ENOENT && inbox_holds(w, id))
                return tfw_error(e, ENOENT, "not_taken",
                                 "%s '%s': not taken yet: it is still in the inbox, where the worker takes it when "
                                 "it runs ('list' shows it); decide once it is pending",
                                 verb, id);
        if (r == -ENOENT)
                return tfw_error(e, ENOENT, "not_found", "%s '%s': no pending request with that id", verb, id);
        if (r < 0)
                return r;
        if (rec->state != STATE_PENDING)
                return tfw_error(e, EALREADY, "not_pending", "%s '%s': %s", verb, id,
                                 describe(rec, why, sizeof(why)));
        return 0;
}

/* The line of an operator's decision (approve, deny), written under the store lock before the
 * decision is committed: a decision that cannot be recorded is refused, and the request stays
 * pending (fail closed, issue 11 item 9). */
static int audit_decision(Worker *w, const char *verb, const char *event, const RequestRecord *rec,
                          const char *reason, TfwError *e) {
        _cleanup_(json_decrefp) json_t *f = finish_decision_fields(rec, reason);
        int r = f ? worker_audit_required(w, event, f, e) : tfw_error(e, ENOMEM, "internal", "out of memory");
        if (r < 0)
                tfw_error_prefix(e, "%s '%s': refused, the request stays pending: ", verb, rec->id);
        return r;
}

int decide_approve(Worker *w, const char *id, const char *expect_sha256, const char *approver,
                   TfwError *e) {
        _cleanup_request_ Request *req = NULL;
        RequestRecord rec;
        int r;

        int lock = r = store_lock(w->dirs.requests_fd);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot lock the request store");
        r = load_pending(w, "approve", id, &rec, e);
        if (r < 0)
                goto out;
        /* Hash the captured bytes again: the decision binds to what will run. */
        r = store_read_request(w->dirs.requests_fd, id, &w->policy, &req, e);
        if (r < 0) {
                tfw_error_prefix(e, "approve '%s': the captured copy no longer parses: ", id);
                goto out;
        }
        if (!streq(req->sha256, rec.sha256)) {
                r = tfw_error(e, EBADMSG, "sha256_mismatch",
                              "approve '%s': the captured copy changed (sha256 %s, recorded %s)", id,
                              req->sha256, rec.sha256);
                goto out;
        }
        if (expect_sha256 && !streq(expect_sha256, req->sha256)) {
                r = tfw_error(e, EBADMSG, "sha256_mismatch",
                              "approve '%s': the captured request has sha256 %s, not the expected %s", id,
                              req->sha256, expect_sha256);
                goto out;
        }
        rec.state = STATE_QUEUED;
        strcpy(rec.decision, "approved");
        snprintf(rec.approver, sizeof(rec.approver), "%s", approver);
        rec.decided_at = rec.updated_at = now_realtime();
        r = audit_decision(w, "approve", "approved", &rec, NULL, e);
        if (r < 0)
                goto out;
        r = store_save(w->dirs.requests_fd, &rec, e);
        /* Still under the lock: once it is released the daemon may start and even finish
         * the job, and a "queued" state file written afterwards would outlive its result. */
        if (r >= 0)
                (void) publish_state(&w->dirs, w->config->container_gid, &rec, rec.updated_at, NULL);
out:
        store_unlock(lock);
        if (r < 0)
                return r;
        decide_wake_daemon(w);
        return 0;
}

int decide_deny(Worker *w, const char *id, const char *reason, const char *approver, TfwError *e) {
        RequestRecord rec;
        char msg[1200];
        int r;

        int lock = r = store_lock(w->dirs.requests_fd);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot lock the request store");
        r = load_pending(w, "deny", id, &rec, e);
        if (r >= 0) {
                strcpy(rec.decision, "denied");
                snprintf(rec.approver, sizeof(rec.approver), "%s", approver);
                snprintf(rec.reason, sizeof(rec.reason), "%s", reason ? reason : "");
                rec.decided_at = rec.updated_at = now_realtime();
                snprintf(msg, sizeof(msg), "denied by %s%s%s", approver, reason ? ": " : "", reason ? reason : "");
                r = audit_decision(w, "deny", "denied", &rec, reason, e);
                if (r >= 0)
                        r = finish_request(w, &rec, NULL, "denied", "denied", msg, NULL, NULL, e);
        }
        store_unlock(lock);
        if (r < 0)
                return r;
        decide_wake_daemon(w); /* its count of pending requests changed */
        return 0;
}

