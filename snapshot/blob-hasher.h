/* SPDX-License-Identifier: MIT */
/* Git blob ids computed on a second thread while the snapshot walk copies.
 *
 * The walk reads each chunk of a file into a buffer it gets from the hasher, writes the chunk
 * to the copy, then submits the same buffer: the bytes hashed are exactly the bytes written,
 * and each byte is read from the workspace once. Hashing (about 0.2 s per 360 MB here) then
 * overlaps the walk's system calls instead of adding to them.
 *
 * Chunks are hashed in submission order. A blob starts with a chunk marked `first` (which
 * carries the length for the "blob <len>\0" header) and ends with one marked `last`, which
 * names the tree-builder entry that receives the id. Ids are stored into their entries only by
 * blob_hasher_sync(), on the walk's thread, so the builders are never touched concurrently;
 * the walk syncs before it finishes each tree. When no thread can be started, everything is
 * hashed inline on submission: same results, no overlap. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "git-object.h"

#define BLOB_CHUNK_SIZE (256U * 1024U)

typedef struct BlobHasher BlobHasher;

/* threaded: hash on a second thread (false, or no thread available: hash inline). */
int blob_hasher_new(bool threaded, BlobHasher **ret);
/* Stops the thread (dropping unsynced work) and frees everything. */
void blob_hasher_free(BlobHasher *h);
static inline void blob_hasher_freep(BlobHasher **h) {
        blob_hasher_free(*h);
}

/* The buffer (BLOB_CHUNK_SIZE bytes) for the next chunk; waits until one is free. */
uint8_t *blob_hasher_buffer(BlobHasher *h);

/* Submit len bytes of the buffer last returned. tb may be NULL (with last): the id is
 * dropped, as for a blob the caller rehashes itself. */
int blob_hasher_submit(BlobHasher *h, size_t len, bool first, uint64_t header_len, bool last,
                       GitTreeBuilder *tb, size_t index);

/* Wait for every submitted chunk, then store each finished blob id into tb->entries[index].
 * Returns the first hashing error, if any. */
int blob_hasher_sync(BlobHasher *h);
