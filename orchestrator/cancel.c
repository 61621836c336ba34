/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/path-util.h"
#include "common/resolve.h"
#include "orchestrator/cancel.h"
#include "orchestrator/finish.h"
#include "orchestrator/inbox.h"
#include "orchestrator/publish.h"
#include "orchestrator/store.h"

bool cancel_name_to_id(const char *name, char *ret_id, size_t size) {
        char id[REQUEST_ID_MAX + 1];
        size_t n = strlen(name), k = strlen(CANCEL_SUFFIX);
        if (n <= k || n - k > REQUEST_ID_MAX || strcmp(name + n - k, CANCEL_SUFFIX) != 0)
                return false;
        memcpy(id, name, n - k);
        id[n - k] = 0;
        if (!request_id_is_valid(id))
                return false;
        if (ret_id)
                snprintf(ret_id, size, "%s", id);
        return true;
}

/* Refused: a .rejected/ record the controller can read, an audit line, a journal line. */
static int refuse(Worker *w, const char *name, const char *id, const char *code, const char *message,
                  CancelOutcome *ret, TfwError *e) {
        char pname[256];
        printable_name(name, pname, sizeof(pname));
        int r = publish_rejected_record(&w->dirs, w->config->container_gid, name, code, message, now_realtime(), e);
        if (r < 0)
                return r;
        _cleanup_(json_decrefp) json_t *f = json_pack("{s:s, s:s?, s:s, s:s, s:s}", "name", pname, "id", id, "outcome",
                                                      "refused", "error", code, "message", message);
        (void) worker_audit_best_effort(w, "cancel-refused", f);
        worker_say(w, LOG_NOTICE, "inbox entry '%s': cancel refused (%s): %s", pname, code, message);
        *ret = CANCEL_REFUSED;
        return 0;
}

/* Under the store lock: end a pending or queued request, or say that it runs. */
static int cancel_locked(Worker *w, RequestRecord *rec, CancelOutcome *ret, TfwError *e) {
        char msg[200];
        if (rec->state == STATE_RUNNING) {
                _cleanup_(json_decrefp) json_t *f =
                        json_pack("{s:s, s:s}", "id", rec->id, "request_sha256", rec->sha256);
                int r = f ? worker_audit_required(w, "cancel-requested", f, e)
                          : tfw_error(e, ENOMEM, "internal", "out of memory");
                if (r >= 0)
                        *ret = CANCEL_RUNNING;
                return r;
        }
        snprintf(msg, sizeof(msg), "%s by the controller while it was %s",
                 rec->state == STATE_PENDING ? "withdrawn" : "cancelled", request_state_to_string(rec->state));
        _cleanup_(json_decrefp) json_t *f =
                json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", rec->id, "request_sha256", rec->sha256, "outcome",
                          "cancelled", "error", CANCEL_ERROR, "message", msg);
        int r = finish_request(w, rec, NULL, "cancelled", CANCEL_ERROR, msg, NULL, &(FinishAudit){"cancelled", f}, e);
        if (r >= 0)
                *ret = CANCEL_ENDED;
        return r;
}

/* The entry is acted on once: removed if it is still the object that was looked at. */
static void consume(Worker *w, const char *name, const struct stat *seen) {
        struct stat now;
        _cleanup_close_ int pfd = openat_child_same_mount(w->inbox_fd, name, O_PATH);
        if (pfd >= 0 && fstat(pfd, &now) >= 0 && now.st_dev == seen->st_dev && now.st_ino == seen->st_ino)
                (void) unlinkat(w->inbox_fd, name, S_ISDIR(now.st_mode) ? AT_REMOVEDIR : 0);
}

int cancel_take(Worker *w, const char *name, CancelOutcome *ret, char ret_id[static REQUEST_ID_MAX + 1],
                TfwError *e) {
        char id[REQUEST_ID_MAX + 1], msg[400], pname[256];
        struct stat st;
        RequestRecord rec;
        int r;

        *ret = CANCEL_IGNORED;
        if (!cancel_name_to_id(name, id, sizeof(id)))
                return 0;
        printable_name(name, pname, sizeof(pname));
        {
                _cleanup_close_ int pfd = openat_child_same_mount(w->inbox_fd, name, O_PATH);
                if (pfd == -ENOENT)
                        return 0;
                if (pfd < 0) /* a mount point stays, untouched, as in the inbox */
                        return refuse(w, name, id, "not_regular_file",
                                      "a cancel must be an empty regular file of the inbox", ret, e);
                if (fstat(pfd, &st) < 0)
                        return tfw_error(e, errno, "inbox", "inbox entry '%s': %m", pname);
        }
        if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_size != 0) {
                snprintf(msg, sizeof(msg), "cancel '%s' is not an empty regular file with one link; nothing was cancelled",
                         id);
                r = refuse(w, name, id, "bad_cancel", msg, ret, e);
                if (r >= 0 && !S_ISDIR(st.st_mode))
                        consume(w, name, &st);
                return r;
        }
        /* A request still in the inbox is taken first: the cancel names it, whatever order the
         * directory is read in. */
        char req_name[REQUEST_ID_MAX + 8];
        snprintf(req_name, sizeof(req_name), "%s.json", id);
        CaptureOutcome co;
        TfwError ce = {0};
        if (inbox_holds(w, id) && inbox_capture(w, req_name, &co, &ce) < 0)
                return tfw_error(e, ce.error ? ce.error : EIO, "inbox", "cancel '%s': its request is still in the inbox and cannot be "
                                 "taken: %s", id, ce.message);

        int lock = r = store_lock(w->dirs.requests_fd);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot lock the request store");
        r = store_load(w->dirs.requests_fd, id, &rec, e);
        if (r >= 0 && rec.state != STATE_FINAL)
                r = cancel_locked(w, &rec, ret, e);
        store_unlock(lock);
        if (r == -ENOENT) {
                snprintf(msg, sizeof(msg), "cancel '%s': this workspace's worker has no request with that id", id);
                r = refuse(w, name, id, "cancel_unknown_id", msg, ret, e);
        } else if (r >= 0 && *ret == CANCEL_IGNORED) {
                snprintf(msg, sizeof(msg), "cancel '%s': the request already ended as %s; nothing was cancelled", id,
                         rec.status);
                r = refuse(w, name, id, "cancel_already_ended", msg, ret, e);
        }
        if (r < 0)
                return r;
        if (*ret == CANCEL_ENDED)
                worker_say(w, LOG_NOTICE, "request '%s': cancelled by the controller before it ran", id);
        memcpy(ret_id, id, sizeof(id));
        consume(w, name, &st);
        return 0;
}
