/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "common/json-util.h"
#include "orchestrator/expire.h"
#include "orchestrator/finish.h"
#include "orchestrator/store.h"

int expire_pending(Worker *w, usec_t now, TfwError *e) {
        _cleanup_free_ RequestRecord *list = NULL;
        size_t n = 0;
        int r, expired = 0;
        usec_t ttl = (usec_t) w->config->pending_ttl_hours * 3600 * USEC_PER_SEC;

        int lock = r = store_lock(w->dirs.requests_fd);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot lock the request store");
        r = store_list(w->dirs.requests_fd, &list, &n, e);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                RequestRecord *rec = &list[i];
                char msg[128];
                if (rec->state != STATE_PENDING || rec->submitted_at + ttl > now)
                        continue;
                strcpy(rec->decision, "expired");
                rec->decided_at = rec->updated_at = now;
                snprintf(msg, sizeof(msg), "not approved within pending_ttl_hours (%u)",
                         w->config->pending_ttl_hours);
                _cleanup_(json_decrefp) json_t *f = finish_decision_fields(rec, NULL);
                r = finish_request(w, rec, NULL, "expired", "expired", msg, NULL, &(FinishAudit){"expired", f}, e);
                if (r >= 0)
                        worker_say(w, LOG_NOTICE, "request '%s': expired: %s", rec->id, msg);
                expired += r >= 0;
        }
        store_unlock(lock);
        return r < 0 ? r : expired;
}
