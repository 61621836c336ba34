/* SPDX-License-Identifier: MIT */
/* The build cache of one controller (contract section 6, docs/cache.md; threat 15): what its
 * local-reversible jobs left under the configured cache paths, shown to the next such job at
 * those paths under /work, below its own writes.
 *
 *   <store>/cache/lock       flock: shared while a job pins the current version, exclusive
 *                            while current changes (a take-in, a clear)
 *   <store>/cache/epoch      bumped by build_cache_clear(): a take-in begun before is not kept
 *   <store>/cache/current    the current version's number; none: version 0, the empty cache
 *   <store>/cache/v/<n>/     version n, never changed once made: meta (tree id, bytes,
 *                            entries), oids, pin (flock'ed shared by every job handed it) and
 *                            data/<i>/, the contents of cache path i
 *   <store>/cache/ro         a read-only bind mount of v (nosuid, nodev): what a capsule binds
 *   <store>/cache/in-<job>/  one job's take-in: data/ is the importer's staging directory (the
 *                            job's changes), then the next version, made from them and the
 *                            version the job was handed
 *
 * It lives in the generation store (gen-store.h: a tmpfs of its own, root's alone, that outlives
 * the daemon; build_cache_check() at its start). A job is handed the current version by number, bound read-only below the overlay
 * that keeps the job's writes in the sandbox (nothing copied: a hand-out costs the same for any
 * size); what the job changed comes back alone (read from the overlay's upper directory), and
 * the next version is that over the one it was handed: its other files hard links to them. A
 * version no job pins and that is not current is removed. The cache's inodes are owned by the
 * job's uid and group (the overlay keeps the lower layer's owners: the job must be able to
 * change what it built) and nothing of it is ever written in place. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "gen-store.h"
#include "git-object.h"

/* The cache paths: relative, normalised, NULL-terminated (parser/config.c checks them). */
#define BUILD_CACHE_PATHS_MAX 16
/* The take-in's list of what the job removed (capsule/protocol.h, CAPSULE_CACHE_DELETED), and
 * its largest size (CAPSULE_CHANGES_LIST_MAX). */
#define BUILD_CACHE_DELETED "deleted"
#define BUILD_CACHE_DELETED_MAX (64u << 20)

typedef struct BuildCacheParams {
        char *const *paths;
        const char *store_path; /* absolute: the store's path in the daemon's namespace */
        uint64_t max_bytes, max_entries;
        uint32_t uid, gid; /* the job's: owner of what is taken in */
} BuildCacheParams;

typedef struct BuildCache BuildCache;

/* Open (make when missing) store_fd/cache, its empty version and its read-only mount. The
 * params' paths are borrowed. */
int build_cache_open(int store_fd, const BuildCacheParams *p, BuildCache **ret, TfwError *e);
/* Unpins what was handed out. */
void build_cache_free(BuildCache *c);
static inline void build_cache_freep(BuildCache **c) {
        build_cache_free(*c);
}
size_t build_cache_n_paths(const BuildCache *c);
char *const *build_cache_paths(const BuildCache *c);
/* Absolute: the read-only mount of the versions, which a capsule binds. */
const char *build_cache_versions_path(const BuildCache *c);

typedef struct BuildCacheState {
        char tree[GIT_OID_HEX_SIZE]; /* git SHA-256 tree id of the cache as /work shows it; ""
                                      * when there is none yet */
        uint64_t bytes, entries, files;
        uint64_t epoch;              /* of the clears, when this was read */
        uint64_t version;            /* its number in the store (0: the empty cache) */
        uint64_t hashed;             /* a take-in's files read to compute the tree id (the rest were
                                      * known by inode) */
        uint64_t files_sent, files_unchanged; /* a take-in's: files the job changed, and those
                                               * linked from the version it was handed */
        bool changed;                /* a take-in made a new version */
} BuildCacheState;

/* The current cache's tree id and size (tree "" when there is none). */
int build_cache_state(BuildCache *c, BuildCacheState *ret, TfwError *e);

/* The lane ready for a capsule that mounts the cache: every cache path is a directory in the
 * lane's generation (made where missing, parents included, the job's: the overlay is mounted
 * onto it and cannot make it in a read-only tree). *ret_made: a mount point had to be made now
 * (a capsule booted before has none there). A component of a cache path that is not a
 * directory in the generation: -ENOTDIR, code "cache_path_blocked", the message naming it. */
int build_cache_prepare_lane(BuildCache *c, GenLane *lane, bool *ret_made, TfwError *e);

/* Pin the current version for this job (until build_cache_free): no take-in or clear removes
 * it while the job runs. *ret is what was handed out, ret->version its number. */
int build_cache_hand_out(BuildCache *c, BuildCacheState *ret, TfwError *e);

/* A take-in: in-<job_id>/data made empty; *ret_fd is it (the importer's staging directory). */
int build_cache_take_in_begin(BuildCache *c, const char *job_id, int *ret_fd, TfwError *e);
/* What the job changed (the take-in's data: one directory per cache path, named by its index,
 * and BUILD_CACHE_DELETED), over the version handed out: nothing (no entry, no deletion, the
 * roots' modes and times as handed out) leaves the cache as it is (ret->changed false, ret the
 * version handed out); else the next version, made current atomically under the exclusive lock
 * unless the cache was cleared since `since_epoch`. *ret: the new state. -ESTALE (code
 * "cache_cleared") when it was cleared meanwhile; -E2BIG ("cache_too_large") over the bounds;
 * -EBADMSG ("cache_rejected") for a take-in that breaks the rules; the take-in is removed
 * either way. */
int build_cache_take_in_commit(BuildCache *c, const char *job_id, uint64_t since_epoch, BuildCacheState *ret,
                               TfwError *e);
void build_cache_take_in_discard(BuildCache *c, const char *job_id);

int build_cache_clear(BuildCache *c, TfwError *e);

/* At a worker's start, on a store that outlived the last (gen-store.h): what a process that is
 * gone left (take-ins, half-made versions, retired versions, versions nobody pins) is removed,
 * and the current version is checked whole (meta, oids, pin, data; data's tree id, computed
 * again, the meta's): one that is not is dropped, and the next job starts from the empty cache.
 * Each drop is reported. */
int build_cache_check(int store_fd, const BuildCacheParams *p, GenStoreReport report, void *userdata, TfwError *e);

/* Blob ids of a cache's files by inode (snapshot/cache-tree.c): the store's files never change
 * in place, so a new version (links to the one handed out: the same inodes) hashes only what
 * the job changed. */
typedef struct BuildCacheOids BuildCacheOids;
int build_cache_oids_load(int dir_fd, const char *name, uint64_t max_records, BuildCacheOids **ret);
int build_cache_oids_save(int dir_fd, const char *name, const BuildCacheOids *o);
void build_cache_oids_free(BuildCacheOids *o);
static inline void build_cache_oids_freep(BuildCacheOids **o) {
        build_cache_oids_free(*o);
}

/* The tree id of a directory holding <i> trees for paths (a take-in's data, a version's),
 * taking the blob ids prev knows (NULL: none); *ret_oids (NULL: not wanted) gets this tree's. */
int build_cache_tree_id(int data_fd, char *const *paths, uint64_t max_entries, const BuildCacheOids *prev,
                        BuildCacheOids **ret_oids, BuildCacheState *ret, TfwError *e);
