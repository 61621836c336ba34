/* SPDX-License-Identifier: MIT */
/* A lane found in a store that outlived the worker that filled it (docs/snapshot.md, "After a
 * restart"; threat 22): is its generation still the one its index describes?
 *
 * A lane a process released with a complete generation has a seal (gen_lane_release: written
 * after everything that changed the tree, removed by gen_lane_acquire before anything does):
 * the index's identity (inode, size, ctime) and the tree root's inode. The lane is kept when
 * the index is well formed and is the one the seal names, and every entry of the tree is the
 * index's (same name and type, a file of the size the index recorded) with a ctime no later
 * than the store's newest seal: a change to the tree after it (a write, a chmod, a rename, an
 * entry made or removed) moves a ctime past it, which no process can set back. The store's
 * newest seal, not the lane's own: lanes share files (hard links, gen-seed.h), and a link made
 * or removed by another lane's update moves the shared inode's ctime, always before that
 * lane's own seal. The one thing a generation may hold that the index does not: directories
 * without files (the build cache's mount points, build-cache.h). A check costs one stat per
 * entry; no file is read. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define GEN_LANE_SEAL "seal"
#define GEN_LANE_INDEX "index"
/* flock'ed exclusive by the lane's holder while it changes the tree or makes its mirror, and
 * from a start's walk ahead to that walk's end (gen-store.h, gen_lane_lock_update); shared by a
 * lane seeded from it while it copies it (gen-seed.h). */
#define GEN_LANE_UPDATE_LOCK "update.lock"
/* flock'ed shared by a lane's holder while it waits for a generation to seed from (gen-mirror.h). */
#define GEN_LANE_WANTS "wants"

/* Check lane_fd (its lock held by the caller) against bound, the store's newest seal. 0: kept.
 * 1: not a generation to use, *why (size why_size) says why; the caller empties it. Negative
 * errno: the check itself failed. */
int gen_lane_check(int lane_fd, uint64_t max_entries, const struct timespec *bound, char *why, size_t why_size);
/* The time of lane_fd's seal: 1 (*ret set), 0 none. */
int gen_lane_seal_time(int lane_fd, struct timespec *ret);
/* The seal of lane_fd's generation (its index present), or none. */
int gen_lane_seal(int lane_fd, int tree_fd);
