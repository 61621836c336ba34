/* SPDX-License-Identifier: MIT */
/* The index of one snapshot generation (docs/snapshot.md, "Generations"; threat 17): for every
 * entry the walk copied into the generation, the identity its source had when it was read
 * (device, inode, size, mtime, ctime, mode) and, for a file, its git blob id. The next walk
 * reads a file again unless its identity equals the one recorded here and the entry is not
 * racy (its ctime was less than GEN_RACY_WINDOW_NSEC before the walk that read it began, so a
 * change in the same clock tick as the read cannot hide behind an unchanged ctime).
 *
 * The index lives in the worker's root-private store, beside the generation; it is written
 * after a complete walk only (gen_index_save: a temporary file renamed over) and removed before
 * a generation is changed, so an index always describes a complete generation. The file is
 * parsed with every length bounded all the same. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/error.h"
#include "git-object.h"

/* An entry whose ctime is this close to (or after) the start of the walk that read it is read
 * again by the next walk. */
#define GEN_RACY_WINDOW_NSEC (1000LL * 1000 * 1000)

typedef struct GenIdentity {
        uint64_t dev, ino, size;
        int64_t mtime_sec, ctime_sec;
        uint32_t mtime_nsec, ctime_nsec;
        uint32_t mode; /* st_mode: the type and every permission bit */
} GenIdentity;

typedef struct GenDir GenDir;

typedef struct GenEntry {
        const char *name; /* not NUL-terminated: len bytes */
        uint16_t len;
        bool is_dir;
        bool racy;        /* read again next time whatever its identity */
        bool seen;        /* during a walk: the source still has it */
        GenIdentity id;
        uint8_t oid[GIT_OID_SIZE]; /* a file's blob id */
        size_t tb_index;  /* during a walk: its entry in the directory's tree builder (a blob
                           * id still being hashed), SIZE_MAX when none */
        GenDir *dir;      /* is_dir: its entries */
} GenEntry;

struct GenDir {
        GenEntry *v;
        size_t n, allocated;
        uint32_t *slots;  /* open addressing over v (index + 1; 0 free), for gen_dir_find */
        size_t n_slots;
        /* The watch (dirty-set.h): */
        int32_t wd;       /* the directory's inotify watch (positive); 0: none */
        bool always;      /* read again by every walk whatever its watch says: it holds a racy
                           * entry, its filesystem's times vouch for nothing, or it has no watch
                           * (a file with other links needs no more than any file: gen-verify.h
                           * asks every file the watch vouches for) */
        bool has_tree;    /* tree: its git tree id (none for a directory git does not record) */
        uint8_t tree[GIT_OID_SIZE];
        uint32_t symlinks; /* symlinks the walk skipped in it (they are counted as entries) */
        /* During a walk (dirty_view_mark, then gen_verify_clean): no event since the index's
         * walk and no file changed where the watch cannot see; the same for every directory
         * below; it or some directory below it is clean. */
        bool clean, subtree_clean, any_clean;
        /* During gen_verify_clean with the file system's mark vouching: something below it
         * needs asking (a file it reported, a file or directory on another device). */
        bool visit;
};

typedef struct GenNameChunk GenNameChunk;

typedef struct GenIndex {
        uint32_t owner_uid;  /* the workspace root's owner when it was read */
        uint32_t copy_uid, copy_gid; /* owner and group of the generation's entries */
        uint64_t entries;    /* entries below the root */
        /* The watch its walk added (dirty-set.h): the instance's id and the sequence when the
         * walk began; 0: walked without one. */
        uint64_t watch_instance, watch_seq;
        GenDir root;
        GenNameChunk *chunks; /* the names */
} GenIndex;

int gen_index_new(uint32_t owner_uid, uint32_t copy_uid, uint32_t copy_gid, GenIndex **ret);
GenIndex *gen_index_free(GenIndex *x);
static inline void gen_index_freep(GenIndex **x) {
        gen_index_free(*x);
}

/* Append an entry to d (its name copied into x's chunks); returns it (stable until the next
 * append to d), NULL on ENOMEM. */
GenEntry *gen_dir_append(GenIndex *x, GenDir *d, const char *name, size_t len);
/* A new, empty directory for e (e->is_dir set). */
int gen_entry_make_dir(GenEntry *e);
/* Build d's lookup table (after its last append). */
int gen_dir_seal(GenDir *d);
/* The entry named name in a sealed d, or NULL. */
GenEntry *gen_dir_find(const GenDir *d, const char *name, size_t len);

/* The hash of a name both the walk's sets of names and gen_dir_find() use (64-bit FNV-1a). */
static inline uint64_t gen_name_hash(const char *name, size_t len) {
        uint64_t h = 1469598103934665603ULL;
        for (size_t i = 0; i < len; i++)
                h = (h ^ (uint8_t) name[i]) * 1099511628211ULL;
        return h;
}

/* What a directory of an index holds below it, itself excluded. */
typedef struct GenTotals {
        uint64_t entries; /* files, directories and skipped symlinks */
        uint64_t files, dirs, symlinks, bytes;
} GenTotals;

/* Adds what d holds below it to *totals. */
void gen_dir_totals(const GenDir *d, GenTotals *totals);

/* e's directory (e of another index, from) moved, with everything below it, into the empty to
 * of index x, which counts its entries; adds what it holds to *totals. No entry is copied (a
 * carried directory of 86k entries cost 6 to 18 ms to copy). e keeps its name and identity but
 * has no directory after (e->dir NULL): from's tree is spent, and only freed after. The names
 * stay in from's chunks, which x takes (gen_index_take_names) before from is freed. */
void gen_dir_move(GenIndex *x, GenDir *to, GenEntry *e, GenTotals *totals);
/* x takes from's names (what gen_dir_move left there): from keeps none, and may be freed
 * while x lives. */
void gen_index_take_names(GenIndex *x, GenIndex *from);

void gen_identity_of(const struct stat *st, GenIdentity *ret);
bool gen_identity_equal(const GenIdentity *a, const GenIdentity *b);

/* Write x to dir_fd/name atomically (mode 0600, root's): into an unnamed file (O_TMPFILE) where
 * the file system has them, named once whole, so that a process killed while it writes leaves
 * nothing behind. */
int gen_index_save(const GenIndex *x, int dir_fd, const char *name, TfwError *e);
/* Tests only: called once every byte is written, before the file is named. */
extern void (*gen_index_test_saving)(void);
/* from_dir/name copied byte for byte to to_dir/name (atomically, mode 0600, root's): a file of
 * gen_index_save's, loaded and checked by whoever reads the copy. */
int gen_index_copy(int from_dir, int to_dir, const char *name);
/* Read dir_fd/name; every directory sealed. -ENOENT when there is none; -EBADMSG (e set) for a
 * file that is not a well-formed index. At most max_entries entries. */
int gen_index_load(int dir_fd, const char *name, uint64_t max_entries, GenIndex **ret, TfwError *e);
