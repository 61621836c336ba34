/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "common/json-util.h"
#include "orchestrator/publish.h"
#include "orchestrator/start.h"

int job_mark_started(Worker *w, const char *id, RequestRecord *ret, TfwError *e) {
        RequestRecord rec;
        int r;

        int lock = r = store_lock(w->dirs.requests_fd);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot lock the request store");
        r = store_load(w->dirs.requests_fd, id, &rec, e);
        if (r >= 0 && rec.state != STATE_QUEUED)
                r = -ESTALE; /* decided or ended meanwhile */
        RequestRecord queued = rec;
        if (r >= 0) {
                /* Recorded before anything runs: the record marked running, then the audit line
                 * (fail closed: the record goes back to queued when it cannot be written, and
                 * nothing starts). After a crash from the save on, the request ends as
                 * interrupted and is never started again, so no request is ever audited
                 * "started" twice (an audit line first, then a crash before the save, would
                 * have had it started again at the next start). */
                rec.state = STATE_RUNNING;
                rec.updated_at = now_realtime();
                r = store_save(w->dirs.requests_fd, &rec, e);
        }
        if (r >= 0) {
                _cleanup_(json_decrefp) json_t *f =
                        json_pack("{s:s, s:s}", "id", rec.id, "request_sha256", rec.sha256);
                r = f ? worker_audit_required(w, "started", f, e)
                      : tfw_error(e, ENOMEM, "internal", "out of memory");
                if (r < 0) {
                        TfwError re = {0};
                        (void) store_save(w->dirs.requests_fd, &queued, &re);
                }
        }
        store_unlock(lock);
        if (r < 0)
                return r;
        (void) publish_state(&w->dirs, w->config->container_gid, &rec, rec.updated_at, NULL);
        *ret = rec;
        return 0;
}
