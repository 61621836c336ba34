/* SPDX-License-Identifier: MIT */
/* Retention (contract sections 2 and 3): final results, their ids, .rejected/ records and
 * old audit files expire after retention_days / audit_generations. A request that is not
 * final never expires here (pending requests expire through pending_ttl_hours instead). */
#pragma once

#include "orchestrator/worker.h"

#include "orchestrator/audit.h"

typedef struct RetentionReport {
        int results;        /* final results (and their ids) removed */
        int rejected;       /* .rejected/ records removed */
        AuditRotation audit;
} RetentionReport;

/* Remove what has expired at now. *ret_next (may be NULL) is set to the earliest time at
 * which something else will expire, or 0 when nothing is waiting; ret (may be NULL) says what
 * was removed and rotated. Returns how many results were removed. force_rotate rotates the
 * audit log even within the day (gc). */
int retention_run(Worker *w, usec_t now, bool force_rotate, usec_t *ret_next, RetentionReport *ret,
                  TfwError *e);
