/* SPDX-License-Identifier: MIT */
/* `approve --wait`: wait for an approved request's result, never forever.
 *
 * Contract:
 *  - returns 0 with *ret_result the result once results/<id>/result.json exists (inotify on
 *    the results directory, watched before the first look, so a result published in between is
 *    not missed);
 *  - -ETIMEDOUT when timeout_seconds pass first (0: the request's own timeout plus
 *    APPROVE_WAIT_MARGIN_SECONDS); the request itself goes on, only the wait ends;
 *  - -ESRCH at once when no worker holds <state_dir>/daemon.lock and none can be started (no
 *    tentaflake-worker@NAME.service, tentaflake-worker-queue@NAME.service or
 *    tentaflake-worker-queue@NAME.path active or activating in systemd); checked again every
 *    APPROVE_WAIT_RECHECK_SECONDS while waiting, so a worker that goes away ends the wait too;
 *  - never takes the daemon's lock, not even for a moment (a worker starting at that moment
 *    would fail): who holds it is read from /proc/locks. */
#pragma once

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "orchestrator/worker.h"

#define APPROVE_WAIT_MARGIN_SECONDS 120
#define APPROVE_WAIT_RECHECK_SECONDS 5
#define APPROVE_WAIT_TIMEOUT_MAX (30U * 86400)

typedef enum WorkerPresence {
        WORKER_RUNNING,   /* something holds daemon.lock (or /proc/locks cannot tell) */
        WORKER_STARTABLE, /* nothing holds it, but a unit of this worker is active or starting */
        WORKER_NONE,
} WorkerPresence;

/* Is a worker for this config running, or about to? why (may be NULL) gets a short text. */
WorkerPresence approve_worker_presence(Worker *w, char *why, size_t size);

int approve_wait_result(Worker *w, const char *id, uint64_t timeout_seconds, json_t **ret_result, TfwError *e);
