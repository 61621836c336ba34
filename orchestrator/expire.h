/* SPDX-License-Identifier: MIT */
/* Pending requests that nobody approved within pending_ttl_hours end `expired` (contract
 * section 5). The daemon does it on time, `gc` (and its hourly timer in path mode) otherwise.
 * Under the store lock, so an approve racing an expiry sees one or the other. The expiry's
 * audit line is best effort: the request ends expired all the same, and nothing runs. */
#pragma once

#include "orchestrator/worker.h"

/* Returns how many expired, or a negative errno. */
int expire_pending(Worker *w, usec_t now, TfwError *e);
