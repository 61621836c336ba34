/* SPDX-License-Identifier: MIT */
/* A queued request becomes a running job (contract section 6, step 1; issue 11 item 9). */
#pragma once

#include "orchestrator/store.h"
#include "orchestrator/worker.h"

/* Under the store lock: id must still be queued (else -ESTALE: decided or ended meanwhile;
 * -ENOENT: gone); the record is marked running, then its "started" audit line is written,
 * both before anything runs, so no job ever runs unrecorded and a crash between the two ends
 * the request as interrupted (never started twice). When the line cannot be written the
 * record goes back to queued and the error (code "audit_failed") is returned: the caller
 * must not run it. After
 * the lock, the running state hint is published. *ret: the record as saved. */
int job_mark_started(Worker *w, const char *id, RequestRecord *ret, TfwError *e);
