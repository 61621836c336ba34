/* SPDX-License-Identifier: MIT */
/* What a directory's watch cannot see (docs/snapshot.md, "What the watch cannot see"; threat
 * 17; issue 33 items 1 and 2).
 *
 * A watch on a directory hears of what happens to its entries through their names in it: a file
 * created, removed, renamed, or written through that name. It hears nothing of a file changed
 * through another name (a hard link made after the walk, in the control directory or anywhere
 * else on the mount: making the link changes the file's link count, which the kernel reports to
 * the file alone) or without any system call on a name at all (a shared writable mapping). What
 * every one of those ways changes is the file's ctime: a write, a truncation, fallocate,
 * copy_file_range, a page first dirtied through a mapping, a link made or removed, a rename.
 *
 * So before a walk takes a directory on its watch's word (GenDir.clean, dirty_view_mark), every
 * file the previous generation holds in it is asked, by name, with fstatat(AT_SYMLINK_NOFOLLOW)
 * relative to the directory opened by descriptor (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS,
 * O_PATH, as every name of the walk): a file whose identity (gen-index.h: device, inode, size,
 * mtime, ctime, mode) differs, that is gone or no longer a regular file, that sits on another
 * device than its directory, or that is another owner's file linked in (the walk refuses those)
 * makes its directory read by the walk after all (clean and subtree_clean cleared, up to the
 * root). A directory below that is not the one the index names (device and inode) makes its
 * parent read. Nothing is read from a file here and nothing is kept on this pass's word alone:
 * the walk still takes only what the index holds.
 *
 * The cost is one fstatat per file of every directory the watch vouches for, about 3 us each
 * on this machine (tests/bench/generations.sh); the watch still saves listing those directories
 * and hashing their trees. With the file system's mark (fan-mark.h) only the files it reported
 * are asked, unless it cannot vouch for the previous walk. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "fan-mark.h"
#include "gen-index.h"

typedef struct GenVerify {
        bool use_openat2;   /* in: how names are resolved (common/resolve.h) */
        uint32_t owner_uid; /* in: the workspace root's owner (another owner's linked file) */
        /* in: the file system's mark (fan-mark.h), or NULL; with it a file on the marked file
         * system is trusted unasked when fan_trusted (the mark vouches for the previous walk)
         * and its inode has no stamp after since (the previous walk's start); any other is
         * asked by stat, then probed for a writer (fan_probe: one found, or a close after
         * writing reported, makes the entry racy: read), so that the walk proves it for the next */
        const FanView *fan;
        bool fan_trusted;
        uint64_t since;
        uint64_t files;     /* out: files asked */
        uint64_t trusted;   /* out: files the mark vouched for, not asked */
        uint64_t reported;  /* out: files asked because the mark reported them */
        uint64_t probed;    /* out: files probed for a writer */
        uint64_t dirs;      /* out: directories opened */
        uint64_t changed;   /* out: directories the watch vouched for that are read after all */
} GenVerify;

/* Check every directory below root (root's own files are read by the walk anyway) whose clean
 * mark is set, and clear the marks of every one that changed after all. With many files the
 * work is shared by a thread per CPU (at most four, all signals blocked, joined before it
 * returns): each takes the next of the subtrees, largest first, and writes only their marks. Returns 0, or a negative
 * errno for what is not the workspace's doing (ENOMEM, EMFILE): the caller then trusts nothing. */
int gen_verify_clean(int root_fd, GenDir *root, GenVerify *v);

/* Tests only: from how many files on the question is shared between threads (one per CPU, at
 * most four; 4096 otherwise). */
extern uint64_t gen_verify_test_threaded_min_files;
