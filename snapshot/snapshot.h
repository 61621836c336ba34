/* SPDX-License-Identifier: MIT */
/* The workspace snapshot (contract section 6 step 1; threats 1 and 2).
 *
 * The root worker copies a directory tree that the agent owns and may change while it is being
 * read. snapshot_take() copies it into a fresh private directory and, in the same pass,
 * computes the git SHA-256 tree id of what it copied. docs/snapshot.md explains the design.
 *
 * Security contract of snapshot_take():
 *   - Accepts only an absolute, normalised workspace path. It is opened with openat2
 *     RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS (no symlink anywhere in it, including the
 *     last component); when openat2 is missing or filtered it is opened one component at a
 *     time from "/" with O_NOFOLLOW|O_DIRECTORY.
 *   - Below the root every entry is opened by one name, relative to its parent's fd, with
 *     openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS and O_NOFOLLOW (or
 *     openat O_NOFOLLOW in the fallback), so no path can leave the tree opened at the start.
 *     Each fd is fstat'ed and handled according to what it is, not what readdir said.
 *   - Never follows or copies a symlink (they are counted as skipped). Never blocks on a FIFO
 *     (regular files are opened O_NONBLOCK) and refuses FIFOs, sockets and devices with
 *     "snapshot_special_file" naming the path. Refuses a multiply-linked file that the
 *     workspace owner does not own and that is not world-readable (a hard link to someone
 *     else's secret). Excludes "<root>/.tentaflake-worker".
 *   - Ceilings: at most max_bytes of file content are read (one byte more is read to detect
 *     the excess), at most max_entries directory entries are looked at, at most
 *     SNAPSHOT_DEPTH_MAX levels; going over fails with "snapshot_too_large".
 *   - The copy is owned by the caller (root in the worker) with group `group`; every file and
 *     directory gets owner rw plus the source owner's x, the source owner's r and x mirrored
 *     onto the group, and nothing else (no other bits, no setuid/setgid/sticky, no ACL).
 *   - The tree id names exactly the bytes that were written into the copy, even when a file
 *     changes size while it is read.
 *   - On failure nothing is left at dest_parent_fd/dest_name (if this call created it), a
 *     negative errno is returned and e->code says why.
 *   - Starts one thread (blob hashing, all signals blocked) and joins it before returning;
 *     snapshot_update() also starts its copiers (copy-pool.h: a thread per CPU, all signals
 *     blocked, none of them resolving a name) once it has copied SNAPSHOT_COPY_POOL_MIN_FILES
 *     files, and joins them before returning.
 * snapshot_stream() is the same walk writing a stream instead of a copy. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/time-util.h"
#include "gen-index.h"
#include "git-object.h"

/* Deepest directory nesting copied (the root is level 0). Each level holds two fds open, and
 * the hashing thread up to 64 more: about 600 fds at worst. */
#define SNAPSHOT_DEPTH_MAX 256
/* The control directory excluded at the root of every workspace. */
#define SNAPSHOT_CONTROL_DIR ".tentaflake-worker"

typedef enum SnapshotCopyMethod {
        SNAPSHOT_COPY_AUTO = 0,      /* the measured-faster method: FILE_RANGE */
        SNAPSHOT_COPY_READ_WRITE,    /* read into a buffer, write it, hash the same buffer */
        SNAPSHOT_COPY_FILE_RANGE,    /* copy_file_range, then the hasher reads the copy;
                                      * read/write where the filesystems cannot */
} SnapshotCopyMethod;

typedef struct SnapshotLimits {
        uint64_t max_bytes;   /* file content bytes */
        uint64_t max_entries; /* directory entries looked at: files, directories, symlinks */
        gid_t group;          /* group of every copied entry; (gid_t) -1 keeps the creator's */
        SnapshotCopyMethod copy;
        /* The build cache's paths (docs/cache.md): relative, normalised, NULL-terminated; NULL:
         * none. With exclude_cache the walk neither reads nor counts the workspace's entries
         * at those paths (the cache owns them: the capsule mounts it there). In a generation,
         * an entry at one of them or at one of their parents that the previous generation's
         * index does not name is one the worker made (a mount point) and is removed before the
         * workspace's entry of that name is written. */
        char *const *cache_paths;
        bool exclude_cache;
        /* snapshot_update() only: the workspace's watch (dirty-set.h), or NULL. With it the walk
         * watches every directory it reads, and a directory whose watch vouches that nothing in
         * it (or below) changed since the previous generation's walk is taken from that index
         * without being read again. */
        struct DirtyView *watch;
        /* snapshot_update() only: the threads that copy files (copy-pool.h, docs/snapshot.md,
         * "Copied on every CPU") once the walk has copied SNAPSHOT_COPY_POOL_MIN_FILES files;
         * 0: one per online CPU (at most COPY_POOL_THREADS_MAX); 1: none, every file copied on
         * the walk's thread and hashed on the hasher's. Either way the same generation. */
        unsigned copiers;
        /* snapshot_update() only, with trash set: a directory on the generation's own file
         * system, outside the tree, that no capsule reaches (a lane's, gen-store.h), where the
         * walk moves the previous generation's copy of a file it writes again, up to
         * SNAPSHOT_TRASH_MAX_BYTES of them, instead of removing it: its pages are freed when the
         * store empties it, off the request's path. The tree is the same either way. */
        bool trash;
        int trash_fd;
} SnapshotLimits;

/* Bytes of replaced copies a walk moves to the trash at most; past them it removes them (the
 * store holds both copies until the trash is emptied). */
#define SNAPSHOT_TRASH_MAX_BYTES (64ULL << 20)
/* Tests: that number (SNAPSHOT_TRASH_MAX_BYTES unless changed). */
extern uint64_t snapshot_test_trash_max_bytes;

/* Files a generation's walk copies on its own thread before its copiers start. */
#define SNAPSHOT_COPY_POOL_MIN_FILES 64
/* Tests: that number (SNAPSHOT_COPY_POOL_MIN_FILES unless changed). */
extern uint64_t snapshot_test_copy_pool_min_files;

typedef enum SnapshotResolver {
        SNAPSHOT_RESOLVER_OPENAT2,
        SNAPSHOT_RESOLVER_OPENAT_FALLBACK,
} SnapshotResolver;

typedef enum SnapshotWatch {
        SNAPSHOT_WATCH_NONE,  /* no watch: every directory read */
        SNAPSHOT_WATCH_FULL,  /* a watch, but no index it vouches for (the first walk, an
                               * overflow, another owner): every directory read and watched */
        SNAPSHOT_WATCH_DIRTY, /* only the directories the watch saw change read */
} SnapshotWatch;

typedef enum SnapshotMark {
        SNAPSHOT_MARK_NONE,   /* no file system mark (fan-mark.h): every file asked as before */
        SNAPSHOT_MARK_FLOOR,  /* a mark that cannot vouch for the previous walk (its events
                               * overflowed since, or it began after): every kept file asked
                               * and probed for a writer */
        SNAPSHOT_MARK_USED,   /* only the files the mark reported asked */
} SnapshotMark;

typedef struct SnapshotSummary {
        uint64_t bytes;            /* file content bytes copied */
        uint64_t entries;          /* directory entries looked at (files + dirs + symlinks) */
        uint64_t files, dirs;      /* copied (dirs excludes the root) */
        uint64_t skipped_symlinks;
        uint64_t files_reused;     /* snapshot_update(): files kept from the previous generation */
        uint64_t bytes_reused;     /* and their bytes (included in bytes) */
        uint64_t entries_unread;   /* snapshot_update() with a watch: entries taken from the
                                    * previous generation on the watch's word, neither listed
                                    * nor stat'ed (included in entries) */
        SnapshotWatch watch;       /* how the watch served this walk */
        uint64_t dirs_unwatched;   /* with a watch: directories the host gave no watch (none
                                    * left: fs.inotify.max_user_watches), read by every walk */
        uint64_t dirs_over_budget; /* with a watch: directories past its budget (DirtyBudget),
                                    * read by every walk */
        uint64_t files_checked;    /* with a watch: files of the directories it vouched for,
                                    * asked by stat all the same (gen-verify.h; included in
                                    * entries_unread) */
        uint64_t files_trusted;    /* with the file system's mark: files trusted unasked */
        uint64_t files_reported;   /* ... asked because it reported them */
        uint64_t files_probed;     /* ... probed for a writer (fan_probe) */
        SnapshotMark mark;         /* how the mark served this walk */
        bool lease_unusable;       /* snapshot_update(): no read lease could be asked for (no
                                    * CAP_LEASE): no file copied now will be kept next time */
        char tree[GIT_OID_HEX_SIZE]; /* git SHA-256 tree id of the copy, lowercase hex */
        usec_t duration;
        SnapshotResolver resolver; /* which way paths were resolved */
} SnapshotSummary;

/* Copy the workspace at workspace_path into a new directory dest_parent_fd/dest_name, which
 * must not exist yet. dest_parent_fd should be a directory only root can write to. See the
 * contract above. Error codes in e->code:
 *   snapshot_too_large     (-E2BIG)   a ceiling on bytes, entries or depth was exceeded
 *   snapshot_special_file  (-ENOTSUP) FIFO, socket, device, or foreign hard link; message
 *                                     names the path relative to the workspace
 *   snapshot_workspace     (errno)    the workspace root cannot be opened safely (relative
 *                                     path, a symlink in it: ELOOP, not a directory...)
 *   snapshot_destination   (errno)    dest_name cannot be created
 *   snapshot_io            (errno)    anything else (read or write errors, EMFILE...) */
int snapshot_take(const char *workspace_path, int dest_parent_fd, const char *dest_name,
                  const SnapshotLimits *limits, SnapshotSummary *ret, TfwError *e);

/* The same walk, with the same defences, ceilings, refusals and tree id, but nothing is
 * written to disk: what it reads is written to out_fd as the workspace stream (stream.h),
 * which the capsule's init reads into /work. Each regular file is sent with exactly the size
 * fstat gave when it was opened (cut if it grows, padded with zeros if it shrinks while it is
 * read), so the tree id names exactly the bytes sent. Ends the stream with 'E' after a
 * complete walk, or tries to end it with 'A' on any failure. Error codes as snapshot_take()
 * (no snapshot_destination), plus:
 *   snapshot_stream        (errno)    out_fd could not be written (EPIPE: the reader is gone)
 * Blocks while out_fd is full; SIGPIPE must be blocked or ignored by the caller. */
int snapshot_stream(const char *workspace_path, int out_fd, const SnapshotLimits *limits,
                    SnapshotSummary *ret, TfwError *e);

/* The same walk, with the same defences, ceilings, refusals and tree id, into a generation
 * (docs/snapshot.md, "Generations"; threat 17): tree_fd is the previous generation's root
 * directory, whose entries prev describes (NULL: tree_fd is empty), and is changed in place into
 * the new generation. A regular file whose identity (gen-index.h) equals prev's and was not
 * racy keeps its copy and blob id without being opened; anything else is read and copied as
 * snapshot_take() does; what the workspace no longer has is removed. Every entry made is owned
 * by copy_uid and limits->group (both required); the root's mode is SNAPSHOT_GENERATION_ROOT_MODE. prev is spent, whatever the
 * result: its `seen` marks are used up, the directories carried unread are moved out of it into
 * the new index (gen_dir_move), and on success the new index takes its names; only
 * gen_index_free() may be called on it after. On success *ret_next describes the new generation. On failure tree_fd holds a mix of both: the caller
 * must not use it as either (it empties it). Error codes as snapshot_take(). */
/* The mode of a generation's root, always (its owner is copy_uid, its group limits->group). */
#define SNAPSHOT_GENERATION_ROOT_MODE 0700
int snapshot_update(const char *workspace_path, int tree_fd, GenIndex *prev, uint32_t copy_uid,
                    const SnapshotLimits *limits, GenIndex **ret_next, SnapshotSummary *ret, TfwError *e);

/* Tests only (no configuration reaches it): the racy window, GEN_RACY_WINDOW_NSEC. */
extern int64_t snapshot_test_racy_window_nsec;

/* Does openat2 work in this process? false when the kernel lacks it (ENOSYS) or a seccomp
 * filter refuses it (ENOSYS or EPERM). Asked again on every call: a filter can appear at any
 * time. Exposed for `doctor` and the tests. */
bool snapshot_openat2_usable(void);
