/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "orchestrator/finish.h"
#include "orchestrator/publish.h"
#include "orchestrator/recover.h"
#include "orchestrator/result.h"

int recover_finish_unpublished(Worker *w, RequestRecord *rec, const char *status, const char *error,
                               const char *message, TfwError *e) {
        (void) rm_rf_at(w->dirs.scratch_fd, rec->id);
        /* The job.log of a cut-short run is kept; artifacts it may have half imported are not
         * (nobody checked or normalised them, and a signature must not cover them). */
        _cleanup_close_ int sfd = open_dir_at(w->dirs.staging_fd, rec->id);
        if (sfd >= 0)
                (void) rm_rf_at(sfd, "artifacts");
        FinishAudit audit = {streq(status, "interrupted") ? "interrupted" : "error", NULL};
        return finish_request(w, rec, NULL, status, error, message, NULL, &audit, e);
}

int recover_at_start(Worker *w, TfwError *e) {
        _cleanup_free_ RequestRecord *list = NULL;
        size_t n = 0;
        int r, interrupted = 0;

        int lock = r = store_lock(w->dirs.requests_fd);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot lock the request store");
        (void) store_remove_incomplete(w->dirs.requests_fd);
        r = store_list(w->dirs.requests_fd, &list, &n, e);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                RequestRecord *rec = &list[i];
                _cleanup_(json_decrefp) json_t *res = publish_load_result(&w->dirs, rec->id);

                if (rec->state != STATE_FINAL && res) {
                        /* Published, then the record update was lost: the result is the truth,
                         * and its ending is audited unless that line was written. */
                        r = finish_request(w, rec, NULL, "error", NULL, NULL, NULL, &(FinishAudit){"finished", NULL}, e);
                } else if (rec->state == STATE_RUNNING) {
                        r = recover_finish_unpublished(w, rec, "interrupted", "interrupted",
                                                       "the worker stopped while the job ran; it is never restarted automatically",
                                                       e);
                        interrupted += r >= 0;
                } else if (rec->state == STATE_FINAL && res && rec->ending_unrecorded) {
                        /* A rejection captured final, published, then the worker died before
                         * its line or its record: the line, unless it was written. */
                        r = finish_request(w, rec, NULL, rec->status, NULL, NULL, NULL, &(FinishAudit){"rejected", NULL}, e);
                } else if (rec->state == STATE_FINAL && !res) {
                        r = recover_finish_unpublished(w, rec, rec->status[0] ? rec->status : "error", "result_lost",
                                                       "the worker stopped before this result was published", e);
                } else if (rec->state == STATE_PENDING || rec->state == STATE_QUEUED) {
                        r = publish_state(&w->dirs, w->config->container_gid, rec, rec->updated_at, e);
                }
                /* A live log outlives its job only when the worker died between publishing
                 * job.log and dropping it (publish_commit): published means it goes. */
                if (rec->state == STATE_FINAL || res)
                        publish_live_drop(&w->dirs, rec->id);
                if (rec->state == STATE_FINAL) {
                        (void) rm_rf_at(w->dirs.staging_fd, rec->id);
                        /* A state file is written without fsync (publish_state): one a power
                         * loss brought back next to a final result goes. */
                        char sname[REQUEST_ID_MAX + sizeof(".state.json")];
                        snprintf(sname, sizeof(sname), "%s.state.json", rec->id);
                        (void) unlinkat(w->dirs.results_fd, sname, 0);
                }
        }
        store_unlock(lock);
        return r < 0 ? r : interrupted;
}
