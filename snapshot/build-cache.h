/* SPDX-License-Identifier: MIT */
/* The build cache of one controller (contract section 6, docs/cache.md; threat 15): what its
 * local-reversible jobs left under the configured cache paths, shown to the next such job at
 * those paths under /work, below its own writes.
 *
 *   <store>/cache/lock       flock: shared while a lane's slots are linked from current,
 *                            exclusive while current is replaced or cleared
 *   <store>/cache/epoch      bumped by build_cache_clear(): a take-in begun before is not kept
 *   <store>/cache/current/   the cache: meta (tree id, bytes, entries) and data/<i>/, the
 *                            contents of cache path i; replaced whole, never changed in place
 *   <store>/cache/in-<job>/  one job's take-in: data/ is the importer's staging directory
 *
 * It lives in the generation store (gen-store.h: a tmpfs of the daemon's own namespace, root's
 * alone), so the lanes' slots can share its inodes: a job's lane gets hard links to the current
 * cache (cheap, and immune to a replacement meanwhile), bound read-only into the capsule where
 * the overlay keeps the job's writes in the sandbox. The cache's inodes are owned by the job's
 * uid and group (the overlay keeps the lower layer's owners: the job must be able to change what
 * it built) and nothing of it is ever written in place: a take-in makes a new tree. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "gen-store.h"
#include "git-object.h"

/* The cache paths: relative, normalised, NULL-terminated (parser/config.c checks them). */
#define BUILD_CACHE_PATHS_MAX 16

typedef struct BuildCacheParams {
        char *const *paths;
        uint64_t max_bytes, max_entries;
        uint32_t uid, gid; /* the job's: owner of the slots and of what is taken in */
} BuildCacheParams;

typedef struct BuildCache BuildCache;

/* Open (make when missing) store_fd/cache. The params' paths are borrowed. */
int build_cache_open(int store_fd, const BuildCacheParams *p, BuildCache **ret, TfwError *e);
void build_cache_free(BuildCache *c);
static inline void build_cache_freep(BuildCache **c) {
        build_cache_free(*c);
}
size_t build_cache_n_paths(const BuildCache *c);
char *const *build_cache_paths(const BuildCache *c);

typedef struct BuildCacheState {
        char tree[GIT_OID_HEX_SIZE]; /* git SHA-256 tree id of the cache as /work shows it; ""
                                      * when there is none yet */
        uint64_t bytes, entries;
        uint64_t epoch;              /* of the clears, when this was read */
        uint64_t hashed;             /* a take-in's files read to compute the tree id (the rest were
                                      * known by inode) */
} BuildCacheState;

/* The current cache's tree id and size (tree "" when there is none). */
int build_cache_state(BuildCache *c, BuildCacheState *ret, TfwError *e);

/* The lane ready for a capsule that mounts the cache: the slots lane/cache/<i> exist (the job's
 * uid and group, 0750), and every cache path is a directory in the lane's generation (made where
 * missing, parents included: the runtime mounts onto it and cannot make it in a read-only tree).
 * *ret_made: a mount point had to be made now (a capsule booted before has none there).
 * A component of a cache path that is not a directory in the generation: -ENOTDIR, code
 * "cache_path_blocked", the message naming it. */
int build_cache_prepare_lane(BuildCache *c, GenLane *lane, bool *ret_made, TfwError *e);

/* Fill the lane's slots with the current cache: hard links to its files and symbolic links,
 * its directories made again with their modes and times. *ret is what was handed out. */
int build_cache_hand_out(BuildCache *c, GenLane *lane, BuildCacheState *ret, TfwError *e);

/* Empty the lane's slots (after the job). */
int build_cache_lane_empty(GenLane *lane);

/* A take-in: in-<job_id>/data made empty; *ret_fd is it (the importer's staging directory). */
int build_cache_take_in_begin(BuildCache *c, const char *job_id, int *ret_fd, TfwError *e);
/* The take-in becomes the cache, atomically (rename exchange under the exclusive lock), unless
 * the cache was cleared since `since_epoch`; the data must hold exactly one directory per cache
 * path, named by its index. *ret: the new state. -ESTALE (code "cache_cleared") when it was
 * cleared meanwhile; the take-in is removed either way. */
int build_cache_take_in_commit(BuildCache *c, const char *job_id, uint64_t since_epoch, BuildCacheState *ret,
                               TfwError *e);
void build_cache_take_in_discard(BuildCache *c, const char *job_id);

/* Remove the cache (and bump the epoch): the next job starts from none. */
int build_cache_clear(BuildCache *c, TfwError *e);

/* Blob ids of a cache's files by inode (snapshot/cache-tree.c): the store's files never change
 * in place, so a take-in that kept files (the same inodes) hashes only what was sent. */
typedef struct BuildCacheOids BuildCacheOids;
int build_cache_oids_load(int dir_fd, const char *name, uint64_t max_records, BuildCacheOids **ret);
int build_cache_oids_save(int dir_fd, const char *name, const BuildCacheOids *o);
void build_cache_oids_free(BuildCacheOids *o);
static inline void build_cache_oids_freep(BuildCacheOids **o) {
        build_cache_oids_free(*o);
}

/* The tree id of a directory holding <i> trees for paths (a take-in's data, a lane's slots),
 * taking the blob ids prev knows (NULL: none); *ret_oids (NULL: not wanted) gets this tree's. */
int build_cache_tree_id(int data_fd, char *const *paths, uint64_t max_entries, const BuildCacheOids *prev,
                        BuildCacheOids **ret_oids, BuildCacheState *ret, TfwError *e);
