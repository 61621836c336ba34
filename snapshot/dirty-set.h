/* SPDX-License-Identifier: MIT */
/* The workspace's dirty set (docs/snapshot.md, "The watch"; threat 17): which of the workspace's
 * directories changed since a generation was walked, so that the next walk reads only those.
 *
 * The daemon owns one inotify instance for the workspace (DirtySet). The walk that makes a
 * generation adds a watch to every directory it reads, through that instance, before it reads it
 * (dirty_view_watch), and records the watch in the generation's index (GenDir.wd). The daemon
 * reads the instance's events as they come (dirty_set_read) and counts them: every event on a
 * watched directory stamps it with the next number of a sequence. When a job is taken, the
 * daemon first reads every event queued so far (all those of changes made before the request,
 * whose inbox event came after them), then hands the job its view (dirty_set_export): the stamps,
 * the sequence number now, and the last overflow. The walk records that number in the new index
 * (GenIndex.watch_seq); the next walk from that index trusts a directory as unchanged only if
 * its watch has no stamp after it.
 *
 * Events that say a directory changed: an entry created, deleted, renamed in or out, written,
 * its attributes changed (mode, owner, times, links), a file in it closed after writing, and the
 * directory itself deleted or moved. Opens are not asked for: the walk's own reads would stamp
 * every directory it copied from, and what an open can lead to without a later event on the
 * directory (a write through a shared mapping) is what gen-verify.h looks for in every file the
 * watch vouches for, with a write through another name. A queue overflow, an unmounted
 * filesystem and a table past its bound make every index older than them untrusted: the next
 * walk is a full one. A directory the walk cannot watch is read by every walk.
 *
 * The budget (issue 33 item 3): inotify watches are a budget every process of root shares
 * (fs.inotify.max_user_watches). The instance holds at most DirtyBudget.max of them, a count in
 * a page every process forked from the daemon shares: a walk adds a new watch only while the
 * count is below it (IN_MASK_CREATE tells a new watch from one the directory has already), and
 * the daemon counts one off for each watch the kernel drops (IN_IGNORED: the directory deleted).
 * A directory past the budget has no watch and is read by every walk; so is one the host has no
 * watch left for. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "fan-mark.h"
#include "gen-index.h"

/* What a watch is asked for (IN_ONLYDIR: only a directory is ever watched). */
#define DIRTY_SET_EVENTS                                                                                  \
        (IN_CREATE | IN_DELETE | IN_MODIFY | IN_ATTRIB | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE |  \
         IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
/* Stamped watches kept at most; past it the table starts again empty, as after an overflow. */
#define DIRTY_SET_TABLE_MAX (1U << 20)

typedef struct DirtySet DirtySet;

/* The watches the instance holds, shared by the daemon and every process forked from it after
 * dirty_set_new (a MAP_SHARED page). */
typedef struct DirtyBudget {
        uint32_t max;            /* at most this many watches */
        _Atomic uint32_t held;   /* held now: added by walks, counted off on IN_IGNORED */
        _Atomic uint64_t over;   /* directories the last walk past the budget left unwatched */
        _Atomic uint32_t dirs;   /* directories the last walk held (unwatched ones included) */
        _Atomic uint32_t said;   /* the daemon said the budget is too small (once) */
} DirtyBudget;

/* What dirty_view_watch() returns for a directory past the budget. */
#define DIRTY_WATCH_OVER_BUDGET (-1)

/* A new instance (its fd close-on-exec and non-blocking) with a random id, holding at most
 * max_watches watches (0: none at all). */
int dirty_set_new(uint32_t max_watches, DirtySet **ret);
DirtySet *dirty_set_free(DirtySet *s);
static inline void dirty_set_freep(DirtySet **s) {
        dirty_set_free(*s);
}
/* The inotify fd: the daemon polls it; the walk adds its watches to it. */
int dirty_set_fd(const DirtySet *s);
/* Place the file system's mark (fan-mark.h) on the file system of the directory open at dir_fd
 * (the workspace's root, open for reading): its events read with the watch's, stamped with the
 * same sequence, and handed to each job in the same view. A negative errno with why filled:
 * no mark (every file the watch vouches for is then asked by stat, as before). */
int dirty_set_mark(DirtySet *s, int dir_fd, char *why, size_t why_size);
/* The mark's fanotify fd (the daemon polls it), or -EBADF: none. */
int dirty_set_mark_fd(const DirtySet *s);
/* The mark does not stamp opens by pid (own) or does again (see fan_mark_own). s may be NULL. */
void dirty_set_own(DirtySet *s, pid_t pid, bool own);
/* Read and stamp every queued event (the watch's and the mark's). Returns how many were read, or
 * a negative errno. */
int dirty_set_read(DirtySet *s);
/* The view a job walks with, as a sealed memfd (close-on-exec) in *ret_fd. With
 * dirty_set_keep_views, the mark forgets first what no walk from the last n views counts. */
int dirty_set_export(DirtySet *s, int *ret_fd);
/* A walk starts from its lane's previous walk, which began at the sequence number of the view
 * it was handed: with n lanes taken in turn, one of the last n views. From now on, whenever the
 * file system's mark holds more than `stamps` stamps, it keeps only those after the oldest of
 * the last `views` views made (at most DIRTY_SET_VIEWS_MAX; 0, the default: every stamp is kept
 * until an overflow), and vouches for no walk that began before it (fan_mark_forget_upto): such
 * a walk (a lane left unused while those views were made) asks and probes every file, as after
 * an overflow. The daemon passes twice its lanes and DIRTY_SET_KEEP_STAMPS. */
#define DIRTY_SET_VIEWS_MAX 64
#define DIRTY_SET_KEEP_STAMPS 1024
void dirty_set_keep_views(DirtySet *s, unsigned views, size_t stamps);
/* The budget's shared page (its count of watches held). */
DirtyBudget *dirty_set_budget(const DirtySet *s);
/* Count again the watches the instance holds (its /proc/self/fdinfo): after an overflow, when
 * IN_IGNORED events may have been lost. */
int dirty_set_recount(DirtySet *s);

/* ---- the job's side --------------------------------------------------------------------- */

typedef struct DirtyStamp {
        int32_t wd;
        uint64_t seq;
} DirtyStamp;

typedef struct DirtyView {
        int watch_fd;          /* the daemon's instance, inherited: watches are added to it */
        DirtyBudget *budget;   /* its budget (NULL: none: tests) */
        struct HeldWatch *held; /* past the budget: the watches the instance holds (read once) */
        size_t n_held;
        bool held_read;
        uint64_t instance;     /* the instance's random id: an index of another has no use */
        uint64_t seq;          /* the sequence when the view was made */
        uint64_t overflow_seq; /* the last overflow (0: none) */
        size_t n;
        DirtyStamp *v;         /* sorted by wd */
        FanView fan;           /* the file system's mark (fan.dev 0: none) */
} DirtyView;

/* Read a view made by dirty_set_export (bounded, checked); budget: dirty_set_budget() of the
 * instance watch_fd is, or NULL for none. */
int dirty_view_load(int view_fd, int watch_fd, DirtyBudget *budget, DirtyView **ret);
DirtyView *dirty_view_free(DirtyView *v);
static inline void dirty_view_freep(DirtyView **v) {
        dirty_view_free(*v);
}
/* Has the directory watched by wd had an event after since? */
bool dirty_view_changed(const DirtyView *v, int32_t wd, uint64_t since);
/* Watch the directory open at dir_fd (before it is read): its wd; DIRTY_WATCH_OVER_BUDGET when
 * the budget is spent and the directory has no watch yet; 0 when the host gives none (ENOSPC:
 * fs.inotify.max_user_watches) or it cannot be watched. */
int32_t dirty_view_watch(DirtyView *v, int dir_fd);
/* The file system's mark the view carries, or NULL when it has none. */
const FanView *dirty_view_fan(const DirtyView *v);
/* Can the walk from index prev trust prev's watches? Then every directory of prev gets its
 * clean and subtree_clean marks (gen-index.h) and true is returned; false: a full walk. */
bool dirty_view_mark(const DirtyView *v, GenIndex *prev);
