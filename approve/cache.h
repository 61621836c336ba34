/* SPDX-License-Identifier: MIT */
/* `cache clear`: the operator empties the controller's build cache (docs/cache.md). The cache
 * lives in the running daemon's memory, which this process cannot reach: it asks the daemon
 * (orchestrator/worker.h's WORKER_CACHE_CLEAR_FILE) and waits until the daemon has done it. */
#pragma once

#include <stdbool.h>

#include "common/error.h"
#include "orchestrator/worker.h"

/* How long `cache clear` waits for the daemon. */
#define CACHE_CLEAR_WAIT_SECONDS 30

/* 0 with *ret_daemon: the daemon emptied the cache (true), or no daemon runs and the
 * request is left for its next start, which takes it before its first job (false). Errors: no cache configured (EINVAL, "no_cache"), the daemon did not
 * take the request in time (ETIMEDOUT: it stays, and is taken when the daemon gets to it). */
int cache_clear(Worker *w, bool *ret_daemon, TfwError *e);
