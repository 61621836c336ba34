/* SPDX-License-Identifier: MIT */
/* Git blob ids computed on a second thread while the snapshot walk copies.
 *
 * Two kinds of jobs, hashed strictly in submission order:
 *   - a file the walk has just copied with copy_file_range: the hasher reads the copy (which
 *     only the walk could write) and hashes exactly its len bytes (blob_hasher_submit_fd);
 *   - chunks of a file copied with read/write: the walk reads each chunk into a buffer it gets
 *     from the hasher, writes the chunk to the copy, then submits the same buffer, so the bytes
 *     hashed are exactly the bytes written (blob_hasher_submit). A blob starts with a chunk
 *     marked `first`, carrying the length for the "blob <len>\0" header, and ends with one
 *     marked `last`.
 * Either way the id names what is in the copy, and hashing (about 0.25 s of CPU per 360 MB
 * here) overlaps the walk's system calls instead of adding to them when a core is free.
 *
 * The job that ends a blob names the tree-builder entry that receives the id. Ids are stored
 * into their entries only by blob_hasher_sync() (or when a slot is reused), on the walk's
 * thread, so the builders are never touched concurrently; the walk syncs once, before it
 * builds the trees. When no thread can be started, everything is hashed inline on submission: same
 * results, no overlap. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "git-object.h"

#define BLOB_CHUNK_SIZE (128U * 1024U)

typedef struct BlobHasher BlobHasher;

/* threaded: hash on a second thread (false, or no thread available: hash inline). */
int blob_hasher_new(bool threaded, BlobHasher **ret);
/* Stops the thread (dropping unsynced work) and frees everything. */
void blob_hasher_free(BlobHasher *h);
static inline void blob_hasher_freep(BlobHasher **h) {
        blob_hasher_free(*h);
}

/* The buffer (BLOB_CHUNK_SIZE bytes) for the next chunk; waits until one is free. NULL when
 * out of memory. */
uint8_t *blob_hasher_buffer(BlobHasher *h);

/* Submit len bytes of the buffer last returned. tb may be NULL (with last): the id is
 * dropped, as for a blob the caller rehashes itself. */
int blob_hasher_submit(BlobHasher *h, size_t len, bool first, uint64_t header_len, bool last,
                       GitTreeBuilder *tb, size_t index);

/* Hash the first len bytes of the file open at fd, which the caller has just written and no
 * one else can change (the copy itself): the id goes to tb->entries[index]. Takes ownership of
 * fd, which is closed once hashed (at most 64 jobs, so fds, are in flight). Between the chunks of one
 * blob nothing else may be submitted. */
int blob_hasher_submit_fd(BlobHasher *h, int fd, uint64_t len, GitTreeBuilder *tb, size_t index);

/* Wait for every submitted chunk, then store each finished blob id into tb->entries[index].
 * Returns the first hashing error, if any. */
int blob_hasher_sync(BlobHasher *h);
