/* SPDX-License-Identifier: MIT */
/* Start-up recovery (contract section 7; threat 10). Run once, before anything is captured or
 * started, with no job of this worker alive.
 *
 * Guarantees: a request recorded as running ends as `interrupted` and is never started
 * again; its snapshot and bundle are removed. A request whose result was published but whose
 * record was not updated (a crash between the two) takes the published status. A final
 * request whose result is missing gets one (status kept, error "result_lost"). Staging left by
 * a crash is removed. Every pending or queued request has its <id>.state.json. */
#pragma once

#include "orchestrator/worker.h"

/* Returns the number of requests ended as interrupted. */
int recover_at_start(Worker *w, TfwError *e);

/* End a request that was running as interrupted (also used by the daemon when it kills a job
 * at shutdown and when a job's process dies without publishing). status is "interrupted" or
 * "error"; message says why. */
int recover_finish_unpublished(Worker *w, RequestRecord *rec, const char *status, const char *error,
                               const char *message, TfwError *e);
