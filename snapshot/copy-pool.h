/* SPDX-License-Identifier: MIT */
/* The files of a generation copied on a thread per CPU while the walk goes on (docs/snapshot.md,
 * "Copied on every CPU"). The walk keeps everything that resolves a name or decides what an
 * entry is: it lists, opens each file by one name with every rule of snapshot.h, fstat's the
 * descriptor, refuses what it must, creates the copy (O_CREAT|O_EXCL), records the tree and
 * index entries, and takes the file's size from the byte budget; then it hands the two open
 * descriptors to the pool. A copier (a thread, every signal blocked) does only what needs no
 * name: the copy's owner and mode (fchown, fchmod), its bytes (copy_file_range, or read and
 * write), its times, its blob id (hashed from the bytes written, or from the copy when the
 * file's size changed), and, in a generation, whether the file was open for writing (the read
 * lease, snapshot.c). Nothing a copier does resolves a path.
 *
 * Results (the blob id, the size copied when it is not the size announced, a file open for
 * writing) go into the tree builder's and the index's entries only on the walk's thread, when a
 * job's slot is taken again or at copy_pool_sync(), so those are never touched concurrently.
 * The first copier that fails keeps its error (naming the entry's path); the others then only
 * close what they were given, copy_pool_job() and copy_pool_sync() return it, and the walk
 * fails with it.
 *
 * The byte budget is one counter the walk and the copiers share (CopyBudget): the walk takes a
 * file's size before it hands it over (copy_budget_take), and a copier gives back what a file
 * that shrank did not use. A read asks for what is left of the file's size and one byte more,
 * to see the end in the same read; what a file that grew gives past its size is taken once it
 * was read, the walk failing when it does not fit, and such a read never asks for more than a
 * chunk (BLOB_CHUNK_SIZE), nor for more than one byte past what is left of the budget when it
 * asks. So at most max_bytes plus a chunk for each copier are read in all. A file that shrinks
 * gives its share back only once copied: a workspace at the very limit whose files shrink while
 * they are read may fail where one thread would not. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "common/error.h"
#include "gen-index.h"
#include "git-object.h"

/* Copiers at most (one per online CPU up to this). */
#define COPY_POOL_THREADS_MAX 4

typedef struct CopyBudget {
        _Atomic uint64_t used; /* bytes taken: copied, or announced by a file being copied */
        uint64_t max;
} CopyBudget;

/* Take n bytes from the budget: true when they fit (used + n <= max), false (nothing taken)
 * otherwise. n == 0 always fits. */
bool copy_budget_take(CopyBudget *b, uint64_t n);

typedef struct CopyJob {
        /* Set by the walk; the pool closes both descriptors. */
        int src, dst;
        uint64_t expected;         /* the size fstat gave, taken from the budget */
        struct timespec times[2];  /* the source's atime and mtime, for the copy */
        uint32_t uid, gid;         /* the copy's owner (fchown); (uint32_t) -1: left */
        mode_t mode;
        bool fix_mode;             /* fchmod the copy to mode (the umask may have cut bits) */
        bool ask_writers;          /* afterwards, unless its size changed: open for writing? */
        GitTreeBuilder *tb;        /* the blob id goes to tb->entries[tb_index] */
        size_t tb_index;
        GenDir *dir;               /* its index entry, dir->v[entry] (NULL: none) */
        size_t entry;
        /* The entry's path, for messages (copy_pool_job_path). */
        char *path;
        size_t path_size;
        /* Results, the copier's. */
        uint64_t total;
        bool writers, lease_unusable, has_oid;
        uint8_t oid[GIT_OID_SIZE];
} CopyJob;

typedef struct CopyPool CopyPool;

/* A pool of `threads` copiers (0: one per online CPU, at most COPY_POOL_THREADS_MAX) copying
 * against budget. file_range: try copy_file_range first (read and write for the rest of the
 * pool's life once it is refused). -EAGAIN when no thread could be started: the caller copies
 * on its own thread. */
int copy_pool_new(unsigned threads, bool file_range, CopyBudget *budget, CopyPool **ret);
/* Stops the copiers and closes what they were not given yet; stores no result. */
void copy_pool_free(CopyPool *p);
static inline void copy_pool_freep(CopyPool **p) {
        copy_pool_free(*p);
}

/* A free job, the results of finished ones stored first; waits while every job is in flight.
 * NULL when a copier failed: e then holds its error (a negative errno in *ret_error). */
CopyJob *copy_pool_job(CopyPool *p, int *ret_error, TfwError *e);
/* The job's path set to path (len bytes); -ENOMEM. */
int copy_pool_job_path(CopyJob *j, const char *path, size_t len);
/* Hand j (from copy_pool_job, every field set) to the copiers. */
void copy_pool_submit(CopyPool *p, CopyJob *j);
/* Wait for every job, store every result; the first copier's error (e set), or 0. */
int copy_pool_sync(CopyPool *p, TfwError *e);
/* Did a copier fail to ask for a read lease (no CAP_LEASE)? After copy_pool_sync(). */
bool copy_pool_lease_unusable(const CopyPool *p);

/* Tests: called by each copier with a job's path before it copies it (NULL: none). */
extern void (*copy_pool_test_before_copy)(const char *path);
