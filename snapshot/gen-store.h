/* SPDX-License-Identifier: MIT */
/* The generation store (docs/snapshot.md, "Generations"; threat 17): root-private lanes, each
 * holding one generation of the workspace, that a capsule binds at /work.
 *
 *   <store>/lane-<k>/lock    flock'ed by the one process using the lane (a job, or a capsule
 *                            started ahead and then its job); released when it exits
 *   <store>/lane-<k>/tree    the generation: owned by the job's uid and group, changed only by
 *                            snapshot_update() while the lane's lock is held and no capsule
 *                            runs a job on it
 *   <store>/lane-<k>/ro      a read-only bind mount of tree (nosuid, nodev): what the capsule
 *                            binds, so that even a runtime bug that writes through its /work
 *                            meets a read-only mount on the host (the second wall)
 *   <store>/lane-<k>/index   the generation's index (gen-index.h), present only while tree is
 *                            a complete generation: removed before tree is changed, written
 *                            after
 *   <store>/lane-<k>/seal    present only while no process holds the lane and tree is the
 *                            complete generation index describes (gen-check.h): written by
 *                            gen_lane_release(), removed by gen_lane_acquire()
 *   <store>/lane-<k>/mirror  a copy of the generation for a lane that waits for its first
 *                            (gen-mirror.h)
 *   <store>/lane-<k>/wants   flock'ed shared by the lane's holder while it waits for a
 *                            generation to seed from (gen-mirror.h)
 *   <store>/lane-<k>/trash   the copies an update replaced (SnapshotLimits.trash), made
 *                            empty by the update and removed by gen_lane_release(), after
 *                            the job's result: their pages are freed off the request's path
 *
 * The store is a tmpfs of its own at state_dir/store (orchestrator/store-tmpfs.c), sized by
 * limits.max_store_bytes, root's (0700): nothing of it is on the disk, and it outlives the
 * worker's process (not a reboot), so that a restarted worker finds its generations and its
 * build cache; gen_store_check() decides what of it may be used again. A lane whose update
 * fails, and a lane without an index, is emptied and built again from nothing by its next
 * user. The read-only mounts below (ro) are the daemon's namespace's alone. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "snapshot.h"

/* Lanes at most: concurrency jobs plus one capsule started ahead. */
#define GEN_STORE_LANES_MAX 65
#define GEN_LANE_NAME_MAX 32
#define GEN_LANE_TRASH "trash"

/* "lane-<k>" into buf. */
void gen_lane_name(unsigned k, char buf[static GEN_LANE_NAME_MAX]);
/* store_fd's lane-<k> opened (a directory, never followed), or a negative errno. */
int gen_lane_dir_at(int store_fd, unsigned k);

typedef struct GenLane {
        unsigned number;
        int lock_fd;
        int lane_fd;
        int tree_fd;
        char *ro_path;  /* absolute: what the capsule binds at /work */
        int seeded_from; /* its first generation was made from this lane's (gen-seed.h); -1:
                          * it was not */
        bool seeded_mirror; /* ... by taking that lane's mirror (gen-mirror.h) */
        GenIndex *index; /* the generation's index, loaded ahead of the next update
                          * (gen_lane_load_ahead), or NULL */
        int update_fd;   /* the update lock (GEN_LANE_UPDATE_LOCK): held from
                          * gen_lane_lock_update() or a successful gen_lane_update() to
                          * gen_lane_mirror(), the next update or the release */
        int wants_fd;    /* GEN_LANE_WANTS, locked shared while gen_lane_seed_ahead() finds no
                          * source yet (gen-mirror.h), or -EBADF */
        int mirrored_for; /* gen_lane_mirror() copied its generation for this lane, which waits
                           * for its first (gen-mirror.h); -1: it did not */
        uint64_t mirror_usec; /* what the copy took; mirror_error: why it failed (0: it did not) */
        int mirror_error;
        struct IndexSaver *saver; /* the last update's index being written (index-saver.h), or
                                   * NULL: waited for by the next update, a mirror and the
                                   * release */
} GenLane;

/* Take the first lane of store_fd (absolute path store_path) no other process holds, among
 * lanes 0..max_lanes-1: made when missing (directories 0700, the read-only bind mount). The
 * tree's root is made copy_uid:copy_gid SNAPSHOT_GENERATION_ROOT_MODE now, before any capsule
 * binds it: a capsule started ahead sees the root as it was when it booted.
 * -EBUSY (e set) when every lane is held. */
int gen_lane_acquire(int store_fd, const char *store_path, unsigned max_lanes, uint32_t copy_uid, uint32_t copy_gid,
                     GenLane **ret, TfwError *e);
/* dir_fd/<ro_name> (an empty directory) a read-only, nosuid, nodev bind mount of the tree open
 * at tree_fd, unless it is one already (another mount there: -EEXIST). For the lanes and the
 * build cache's versions (build-cache.h). */
int gen_store_mount_ro(int dir_fd, const char *ro_name, int tree_fd);

/* Take l's update lock now (l->update_fd), for an update of this process that must not let
 * another process take it first: a child forked after this holds the lane too (it inherited
 * the descriptors), closes its copy of update_fd, and waits on the lock for that update. */
int gen_lane_lock_update(GenLane *l, TfwError *e);

/* This process's descriptors of a lane a child it forked still holds (inherited): closed, no
 * seal written (the lane is the child's). NULL is fine. */
void gen_lane_let_go(GenLane *l);

/* Release it (the generation stays for its next user). NULL is fine. */
void gen_lane_release(GenLane *l);
static inline void gen_lane_releasep(GenLane **l) {
        gen_lane_release(*l);
}

/* Make the lane's generation the workspace's (snapshot_update() from the lane's index, or,
 * when it has none, from another lane's copied, gen-seed.h), owned by copy_uid and
 * limits->group, under the update lock (the one gen_lane_lock_update() took, else taken now).
 * On success the index is being written on a thread (l->saver, index-saver.h: off the job's
 * path) and the update lock is kept (l->update_fd) until gen_lane_mirror() or the release, and
 * past the mirror until the index is written: no other lane copies the generation before the
 * mirror is made, nor before its index is there. On any failure the lane is emptied. store_fd: when the store is full
 * (ENOSPC), the lanes no process holds are emptied and the update is tried once more. */
int gen_lane_update(GenLane *l, int store_fd, unsigned max_lanes, const char *workspace, uint32_t copy_uid,
                    const SnapshotLimits *limits, SnapshotSummary *ret, TfwError *e);

/* The last update's index written (or failed: then the lane has none); 0, or a negative errno
 * (e set) when it could not be. Done by the next update, a mirror and the release anyway. */
int gen_lane_index_wait(GenLane *l, TfwError *e);

/* After an update, once the generation is as the capsule will bind it (the build cache's mount
 * points made): copied for a lane that waits for its first (gen-mirror.h), under the update
 * lock the update kept, which is then let go. l->mirrored_for: that lane, or -1 when none
 * waits; l->mirror_error: why the copy failed (it is lost; the waiting lane copies the
 * generation itself), l->mirror_usec. */
void gen_lane_mirror(GenLane *l, int store_fd, unsigned max_lanes);

/* Give l, when it has no generation, one from another lane's now (gen-seed.h), ahead of the
 * walk of its next update: for a capsule started ahead while it waits for its request. 1: l has
 * a generation (l->seeded_from >= 0: seeded now); 0: none can be had now (*ret_busy: another
 * lane's is being made or changed); negative errno (e set): failed, l emptied. */
int gen_lane_seed_ahead(GenLane *l, int store_fd, unsigned max_lanes, bool *ret_busy, TfwError *e);
/* (While it returns 0, l's `wants` is locked: a lane whose update makes a generation then
 * copies it for l, gen-mirror.h.) */

/* Load l's index now, for its next gen_lane_update() to use rather than read it then (a capsule
 * started ahead, while it waits: 20 to 60 ms for 86k entries off its request's path). Only the
 * holder of l changes its index, and only through that update, so the copy in memory stays the
 * file's. 1: loaded (or already); 0: l has no generation; negative errno (e set). */
int gen_lane_load_ahead(GenLane *l, uint64_t max_entries, TfwError *e);

/* At a worker's start, before any lane is taken: every lane is checked (gen-check.h) and
 * emptied when it fails; lanes past max_lanes are removed. Each is reported (what: the lane's
 * name; why: the reason and what was done). A lane a live process holds is left. A negative
 * errno when a lane that failed could not be emptied or removed: the store must not be used. */
typedef void (*GenStoreReport)(void *userdata, const char *what, const char *why);
int gen_store_check(int store_fd, unsigned max_lanes, uint64_t max_entries, GenStoreReport report, void *userdata);

/* What the store holds, from its filesystem. */
typedef struct GenStoreUsage {
        uint64_t bytes, max_bytes;
        uint64_t inodes, max_inodes;
        unsigned lanes;
} GenStoreUsage;

int gen_store_usage(int store_fd, unsigned max_lanes, GenStoreUsage *ret);
