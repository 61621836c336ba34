/* SPDX-License-Identifier: MIT */
/* A lane's first generation from another lane's (docs/snapshot.md, "A lane's first
 * generation"): when a lane has none (a fresh store, or one just emptied), it is made a copy of
 * a complete generation of a lane no process holds, its index copied too, and the walk then
 * changes only what differs from the workspace. The copy's directories are its own (made with
 * the source's owner, mode and times); its files are hard links to the source's.
 *
 * Why links are safe: nothing ever changes a generation's file in place. snapshot_update()
 * keeps a file as it is, or removes it and writes a new one (O_CREAT|O_EXCL, gen_clear_slot);
 * the capsule reaches a lane through a read-only mount; the cache's mount points are
 * directories. So a lane's update replaces what it changes and leaves the inode the other lane
 * still names as it was: content, mode, times and owner (tests/unit/test-gen-store.c). The
 * source is a lane no process holds (locked while it is read, sealed again after: a link moves
 * its files' ctimes, gen-check.h), or one a capsule started ahead holds while it waits, whose
 * update lock is taken shared while it is read (its job's walk waits for the copy). */
#pragma once

#include <stdbool.h>

#include "gen-store.h"

/* Seed l (its tree empty, no index) from the first lane of store_fd other than it that holds a
 * complete generation not being changed. 1: seeded (*ret_from its number); 0: no lane to seed
 * from (*ret_busy, unless NULL: a lane another process holds is being made or changed, and may
 * be one later); negative errno: failed (l's tree holds a part: the caller empties it). */
int gen_lane_seed(GenLane *l, int store_fd, unsigned max_lanes, unsigned *ret_from, bool *ret_busy);
