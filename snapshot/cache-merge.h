/* SPDX-License-Identifier: MIT */
/* The next version of the build cache (build-cache.h, docs/cache.md): what a job changed under
 * the cache paths, over the version it was handed.
 *
 * The take-in's data (the importer's staging directory) holds one directory per cache path,
 * named by its index, with every directory, file and symbolic link the job wrote or whose mode
 * or times it changed, and BUILD_CACHE_DELETED: the entries of the version it removed or
 * replaced by another type, "<i>/PATH" a line (PATH escaped as path_unescape() reads it; a
 * directory once, for everything below it). cache_merge() reads and removes that list, then
 * links into the data every entry of the version that the job neither changed nor removed:
 * files and symbolic links as hard links (the same inodes: never changed in place), directories
 * made again (owned uid:gid, with the version's mode and times). A directory of the job's keeps
 * its own mode and times. Nothing is followed: every name is opened relative to its directory. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct CacheMerge {
        bool changed;            /* anything at all: an entry, a deletion, a root's mode or times */
        uint64_t files_linked;   /* regular files taken from the version handed out */
        uint64_t deleted;        /* lines of the list */
} CacheMerge;

/* The list of deletions read: each line "<i>/PATH" with i < n_paths (decimal, no leading zero)
 * and PATH, once decoded, relative and normalised; sorted. Anything else: -EBADMSG, code
 * "cache_rejected", naming the line. */
typedef struct CacheDeleted {
        char **v;
        size_t n, cap;
} CacheDeleted;
int cache_deleted_parse(const char *buf, size_t len, size_t n_paths, CacheDeleted *ret, TfwError *e);
void cache_deleted_done(CacheDeleted *d);

/* base_fd: the version's data; take_in_fd: the take-in's. n_paths: the cache paths; entries
 * past max_entries (plus the roots) stop the merge with -E2BIG ("cache_too_large"). A list or
 * a top level that breaks the rules: -EBADMSG ("cache_rejected"). When nothing changed, the
 * take-in is left as it was and *ret says so. */
int cache_merge(int base_fd, int take_in_fd, size_t n_paths, uid_t uid, gid_t gid, uint64_t max_entries, CacheMerge *ret,
                TfwError *e);
