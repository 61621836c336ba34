/* SPDX-License-Identifier: MIT */
/* A lane's first generation from another lane's. See gen-seed.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "gen-check.h"
#include "gen-clone.h"
#include "gen-index.h"
#include "gen-mirror.h"
#include "gen-seed.h"
#include "snapshot.h"

/* Lane's mirror taken into l when it has one (gen-mirror.h); else lane's tree cloned into l,
 * its index too. */
static int clone_lane(GenLane *l, int lane, int tree) {
        int r = gen_mirror_take(lane, l);
        l->seeded_mirror = r > 0;
        if (r > 0)
                return r;
        if (r < 0) {
                /* A part of it in l: emptied, and lane cloned instead. */
                (void) unlinkat(l->lane_fd, GEN_LANE_INDEX, 0);
                r = rm_rf_children(l->tree_fd);
                if (r < 0)
                        return r;
        }
        r = gen_clone_tree(tree, l->tree_fd);
        return r < 0 ? r : gen_index_copy(lane, l->lane_fd, GEN_LANE_INDEX);
}

/* Lane k as the source: one no process holds, sealed (released with a complete generation),
 * locked while it is read and sealed again after; or one held but not being changed (its
 * update lock taken shared: its holder waits for the copy before it changes it), whose index
 * says it is complete, and which its holder seals when it releases it. A held lane being
 * changed, or without an index yet, sets *busy: it may be a source later. */
static int seed_from(GenLane *l, int store_fd, unsigned k, bool *busy) {
        struct timespec t;
        _cleanup_close_ int lane = gen_lane_dir_at(store_fd, k);
        if (lane < 0)
                return 0;
        _cleanup_close_ int lock = openat(lane, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int tree = open_dir_at(lane, "tree");
        if (lock < 0 || tree < 0)
                return 0;
        if (flock(lock, LOCK_EX | LOCK_NB) >= 0) {
                if (gen_lane_seal_time(lane, &t) <= 0 || faccessat(lane, GEN_LANE_INDEX, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        return 0;
                int r = clone_lane(l, lane, tree);
                /* Its files' ctimes moved (the links): sealed again, its tree and index unchanged. */
                if (gen_lane_seal(lane, tree) < 0)
                        (void) unlinkat(lane, GEN_LANE_SEAL, 0);
                return r < 0 ? r : 1;
        }
        _cleanup_close_ int update = openat(lane, GEN_LANE_UPDATE_LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (update < 0 || flock(update, LOCK_SH | LOCK_NB) < 0 ||
            faccessat(lane, GEN_LANE_INDEX, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                *busy = true;
                return 0;
        }
        int r = clone_lane(l, lane, tree);
        return r < 0 ? r : 1;
}

int gen_lane_seed(GenLane *l, int store_fd, unsigned max_lanes, unsigned *ret_from, bool *ret_busy) {
        bool busy;
        bool *b = ret_busy ? ret_busy : &busy;
        *b = false;
        for (unsigned k = 0; k < MIN(max_lanes, (unsigned) GEN_STORE_LANES_MAX); k++) {
                if (k == l->number)
                        continue;
                int r = seed_from(l, store_fd, k, b);
                if (r != 0) {
                        if (r > 0)
                                *ret_from = k;
                        return r;
                }
        }
        return 0;
}
