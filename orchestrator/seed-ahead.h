/* SPDX-License-Identifier: MIT */
/* A capsule started ahead whose lane has no generation yet (the second lane of a fresh store, a
 * lane just emptied): its lane is seeded from another lane's (snapshot/gen-seed.h) while the
 * capsule waits for its request, as soon as another lane's generation is complete, so that the
 * request costs a walk rather than a seed and a walk (docs/snapshot.md, "A lane's first
 * generation"; issue 36). */
#pragma once

#include "orchestrator/worker.h"
#include "snapshot/gen-store.h"

/* How often a capsule started ahead looks again while another lane's generation is being made,
 * and at most while none is (doubling from the first). */
#define SEED_AHEAD_POLL_MS 20
#define SEED_AHEAD_IDLE_MS 1000

/* Seed lane (NULL: nothing to do) for the capsule warm_id, unless it has a generation. While no
 * lane can be a source yet, look again: every SEED_AHEAD_POLL_MS while one is being made or
 * changed, else less and less often, up to SEED_AHEAD_IDLE_MS; stop at once when wake_fd is
 * readable (the daemon's word: the request, or go; a job then seeds the lane as it would have).
 * A seed under way is finished first: the request waits for it, as its job would have made it.
 * A seed is said; a failure leaves the lane empty for its job, and is said. A lane with a
 * generation (seeded now, or kept) has its index read now too (gen_lane_load_ahead), and
 * libcrypto, which the walk's hasher needs, is loaded first (sha256_preload). */
void seed_ahead(Worker *w, const char *warm_id, GenLane *lane, int wake_fd);
