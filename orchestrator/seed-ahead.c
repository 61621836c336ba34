/* SPDX-License-Identifier: MIT */
/* A capsule started ahead's lane seeded while it waits. See seed-ahead.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>

#include "common/log.h"
#include "common/macro.h"
#include "common/sha256.h"
#include "common/time-util.h"
#include "exec/exec.h"
#include "orchestrator/scratch.h"
#include "orchestrator/seed-ahead.h"

/* The lane's index read now, not by the request's walk. A failure is said and left to that
 * walk, which reads the file again (and empties the lane if it still cannot). */
static void load_ahead(Worker *w, const char *warm_id, GenLane *lane) {
        TfwError e = {0};
        if (gen_lane_load_ahead(lane, exec_walk_limits(w->config, NULL, false, NULL).max_entries, &e) < 0)
                worker_say(w, LOG_WARNING, "warm capsule '%s': the index of lane-%u could not be read ahead (%s)", warm_id,
                           lane->number, e.message);
}

void seed_ahead(Worker *w, const char *warm_id, GenLane *lane, int wake_fd) {
        if (!lane)
                return;
        /* The walk's hasher loads libcrypto (2 to 3 ms of the request's 'input' on the npm tree
         * under runc, load 6): loaded while the capsule waits. A failure is the walk's to say. */
        (void) sha256_preload();
        for (int wait_ms = SEED_AHEAD_POLL_MS;;) {
                bool busy = false;
                TfwError e = {0};
                usec_t t0 = now_monotonic();
                int r = gen_lane_seed_ahead(lane, w->dirs.store_fd, scratch_store_lanes(w->config), &busy, &e);
                if (r < 0) {
                        worker_say(w, LOG_WARNING, "warm capsule '%s': lane-%u could not be seeded ahead (%s); its job makes its generation",
                                   warm_id, lane->number, e.message);
                        return;
                }
                if (r > 0) {
                        if (lane->seeded_from >= 0)
                                worker_say(w, LOG_INFO, "warm capsule '%s': lane-%u seeded from lane-%d%s ahead of its request (%" PRIu64 " ms)",
                                           warm_id, lane->number, lane->seeded_from,
                                           lane->seeded_mirror ? " (its mirror taken)" : "",
                                           (uint64_t) ((now_monotonic() - t0) / USEC_PER_MSEC));
                        load_ahead(w, warm_id, lane);
                        return;
                }
                /* Nothing being made: the job that started this capsule may not have taken its lane
                 * yet, or no job will make a generation (a streamed one): look again, less often. */
                wait_ms = busy ? SEED_AHEAD_POLL_MS : MIN(2 * wait_ms, SEED_AHEAD_IDLE_MS);
                struct pollfd p = { .fd = wake_fd, .events = POLLIN };
                int n = poll(&p, 1, wait_ms);
                if (n > 0 || (n < 0 && errno != EINTR))
                        return;
        }
}
