/* SPDX-License-Identifier: MIT */
/* A lane's generation copied for a lane that waits for its first (docs/snapshot.md, "A mirror
 * for a lane that waits"; threat 22).
 *
 * A fresh store's second request lands on the lane of the capsule started ahead during the
 * first job, which has no generation. That capsule seeds its lane from the first lane's as soon
 * as the first job's walk has made it (gen-seed.h, orchestrator/seed-ahead.c), but the copy
 * then competes for the CPUs with the first job's capsule, which boots at that moment, and took
 * 0.4 to 0.6 s where it takes 0.15 to 0.19 s alone. So the lane whose update made a generation
 * copies it at once, before its capsule boots, when another lane waits for one: a lane without
 * an index whose holder says it waits for a source (its `wants` locked shared while
 * gen_lane_seed_ahead finds none; a lane without an index for another reason, a streamed job's,
 * asks for no copy). The copy is the lane's mirror, which the waiting lane's seed then takes by
 * renaming its entries: a few system calls rather than a copy.
 *
 *   <store>/lane-<k>/mirror.new  the copy being made (gen_clone_tree, then the index copied):
 *                                removed when it fails
 *   <store>/lane-<k>/mirror      a complete copy of lane k's generation as its update left it:
 *                                tree/ (its directories its own, its files hard links to lane
 *                                k's) and index (lane k's, byte for byte), renamed from
 *                                mirror.new once both are there
 *   <store>/lane-<j>/adopted     a mirror taken by lane j's holder (renamed there: only one
 *                                process ever takes it), being emptied into lane j's tree
 *
 * Why it is the generation its index describes, as a seed's copy is (gen-seed.h): it is made by
 * lane k's holder under its update lock, right after the update wrote the index; nothing ever
 * changes a generation's file in place, so lane k's later updates leave the inodes it links as
 * they were; its directories are its own. It is dropped by lane k's next update (before the
 * tree is changed), when the lane is emptied, and at a worker's start: a mirror is never older
 * than the generation lane k held last, nor kept across a restart. A drop renames it away
 * first (mirror.drop), so a drop and a take never share one. */
#pragma once

#include "gen-store.h"

#define GEN_LANE_MIRROR "mirror"

/* The lane, other than except, that waits for a first generation: with no index, its `wants`
 * locked by its holder. -1: none (or /proc/locks cannot be read). */
int gen_mirror_wanted(int store_fd, unsigned max_lanes, unsigned except);

/* l's mirror made (l's update lock held; its index written by the update just done). 0, or a
 * negative errno: no mirror is left. */
int gen_mirror_make(GenLane *l);

/* Lane from_lane's mirror taken into l (its tree empty, no index): its entries renamed into
 * l's tree, its index into l's lane last. 1: l holds the generation; 0: from_lane has no
 * mirror; negative errno: l's tree may hold a part (the caller empties it). */
int gen_mirror_take(int from_lane, GenLane *l);

/* The mirror of the lane open at lane_fd dropped, with what is left of one being made or
 * taken. 1: something was there; 0: nothing was; a negative errno. */
int gen_mirror_drop(int lane_fd);
