/* SPDX-License-Identifier: MIT */
/* The index of a lane's kept checkout (validation/checkout.h, checkout_update): for each entry
 * its mode and blob, and the identity its file had when the worker wrote it.
 *
 * The file is one JSON text a line: {"version":2,"repo":…}, then one [path, mode, blob, size,
 * inode, ctime_sec, ctime_nsec] a line, written and read a line at a time. In memory it is a
 * sorted array of records: about 100 bytes and the path for an entry, whatever the number of
 * entries (issue 33: the document parsed whole by jansson cost about 1.3 KiB an entry, and
 * the sets of directories built from it held every prefix of every path, a copy each). The
 * file is root's, written by the worker only; a line that does not parse, a repository other
 * than the one asked for, or more records than the caller allows make it absent (the next
 * checkout downloads everything), never an error. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/error.h"
#include "validation/job.h"

typedef struct CheckoutRecord {
        char *path;
        uint32_t mode;
        uint8_t blob[GIT_OID_SIZE];
        uint64_t size, ino;
        int64_t ctime_sec, ctime_nsec;
        bool wanted; /* the new checkout keeps it */
} CheckoutRecord;

typedef struct CheckoutIndex {
        CheckoutRecord *records; /* sorted by path (strcmp) */
        size_t n;
} CheckoutIndex;

CheckoutIndex *checkout_index_free(CheckoutIndex *x);
static inline void checkout_index_freep(CheckoutIndex **x) {
        checkout_index_free(*x);
}

/* Load dir_fd/name when it is a complete index of repo with at most max_records records.
 * *ret NULL (and 0) when it is absent or not usable; negative only for ENOMEM. */
int checkout_index_load(int dir_fd, const char *name, const char *repo, size_t max_records, CheckoutIndex **ret);

/* The record of path, or NULL. */
CheckoutRecord *checkout_index_find(const CheckoutIndex *x, const char *path);

/* Does the record stand for the entry (mode, blob) with the file st describes (size, inode,
 * ctime)? */
bool checkout_record_matches(const CheckoutRecord *rec, const VManifestEntry *en, const struct stat *st);

/* Write the index of m to dir_fd/name (through a temporary renamed into place), the file
 * identities from stat_entry(i) for each entry i: 0 and *st, or a negative errno that
 * fails the write. */
typedef int (*CheckoutStatFn)(size_t i, struct stat *st, void *userdata);
int checkout_index_save(int dir_fd, const char *name, const char *repo, const VManifest *m, CheckoutStatFn stat_entry,
                        void *userdata);
