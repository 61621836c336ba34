/* SPDX-License-Identifier: MIT */
/* The workspace's file-system mark (docs/snapshot.md, "The file system's mark"; threat 17;
 * issue 51): which inodes of the workspace's file system anyone opened, wrote, changed the
 * attributes or link count of, moved, or closed after writing, through any name, since a
 * generation was walked. The directories' watches (dirty-set.h) cannot hear a write through
 * another hard link or a change through a shared writable mapping (gen-verify.h); before this
 * mark every file they vouched for was asked by stat on every walk.
 *
 * The daemon holds one fanotify group with file ids (FAN_REPORT_FID) and one mark on the whole
 * file system (FAN_MARK_FILESYSTEM) of the workspace's root, made with the directories' watch
 * and read as its events come, each event stamped with the watch's next sequence number under
 * its inode number (decoded from the file handle: FILEID_INO32_GEN, which ext2/3/4 and f2fs
 * hand out; another file system is not marked, and its files are asked as before). The events:
 *
 *   FAN_OPEN          a writer opens the file first; a write through a mapping raises no event
 *                     at all, and the close after it comes only when the last mapping is gone
 *   FAN_MODIFY        write, truncate, fallocate, copy_file_range, ...
 *   FAN_ATTRIB        mode, owner, times, the link count (a link made or removed anywhere)
 *   FAN_MOVE_SELF     a name of it renamed (its ctime moves)
 *   FAN_CLOSE_WRITE   the last user of a descriptor opened for writing let it go
 *
 * The next walk trusts a kept file on that file system without asking it when its inode has no
 * stamp after the previous walk began and the previous walk proved it: read it (with the read
 * lease's question, snapshot.c open_for_writing), asked it by stat and found nobody had it open
 * for writing (fan_probe), or trusted it on this mark's word in turn. A file with a stamp is
 * asked by stat and then probed; one closed after writing is read (a change that stamps no
 * time, ext4's EXT4_IOC_MOVE_EXT, needs its file open for writing). The chain breaks, and every
 * file is asked and probed again, after a queue overflow (FAN_Q_OVERFLOW, the kernel's bound
 * fs.fanotify.max_queued_events), when the table of stamps is full, when the mounts at or
 * beneath the workspace changed in the mark's mount namespace (a mount over a workspace
 * directory raises no event; a mount elsewhere hides nothing of it and changes nothing), and
 * at a new daemon.
 *
 * The mark hears the whole file system, the walks' own reads and probes too: an open by the
 * daemon or by a process it forked to walk (registered by fan_mark_own) is not stamped, so
 * that a file read or probed once is not probed by every walk after. Only an open alone is
 * dropped so; a write, an attribute, a close after writing never are. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/stamp-table.h"

typedef struct FanMark FanMark;

/* Stamped inodes kept at most; past it the table starts again, as after an overflow. */
#define FAN_MARK_TABLE_MAX (1U << 17)
/* The view's section without a mark (its header alone), and the largest with one. */
#define FAN_VIEW_NONE_SIZE 24
#define FAN_VIEW_SIZE_MAX (FAN_VIEW_NONE_SIZE + (size_t) FAN_MARK_TABLE_MAX * 24)
/* Processes of the daemon's own whose opens are not stamped. */
#define FAN_MARK_OWN_MAX 64

/* A mark on the file system of the directory open at dir_fd (a descriptor open for reading),
 * vouching for nothing before start_seq. Returns 0, or a negative errno with why (a sentence
 * fragment: "fanotify_init: ...", "its file system (0x...) ...") filled. */
int fan_mark_new(int dir_fd, uint64_t start_seq, FanMark **ret, char *why, size_t why_size);
FanMark *fan_mark_free(FanMark *m);
int fan_mark_fd(const FanMark *m);
/* Read and stamp every queued event, numbers from *seq. Returns how many were read. */
int fan_mark_read(FanMark *m, uint64_t *seq);
/* Start (own) or stop stamping opens by pid. The daemon's processes only: a pid is registered
 * after its fork and every event queued before it read (fan_mark_read), and unregistered as
 * soon as it is reaped, before any event is read again. */
void fan_mark_own(FanMark *m, pid_t pid, bool own);
/* The sequence number before which nothing is vouched for (the mark's start, the last
 * overflow). */
uint64_t fan_mark_floor(const FanMark *m);
/* No walk that began before seq is vouched for any more, and the stamps of seq or older are
 * forgotten: a walk that began at seq or later would not count them anyway (a stamp counts only
 * when it is after the walk's start), and one that began before has nothing vouched for (its
 * floor). So the table, the view every job reads and the lookups of every walk hold only what
 * some walk still counts, whatever flood the file system had before (a build reading the whole
 * tree: 75k stamps, 1.8 MB in every view). Nothing changes when seq is not above the floor, or
 * when there is no memory to shrink the table. */
void fan_mark_forget_upto(FanMark *m, uint64_t seq);
/* How many inodes have a stamp. */
size_t fan_mark_stamps(const FanMark *m);
/* The view's section: the device, the floor, the stamps. fan_mark_export_size() bytes. */
size_t fan_mark_export_size(const FanMark *m);
void fan_mark_export(const FanMark *m, uint8_t *out);

/* ---- the job's side --------------------------------------------------------------------- */

/* An inode's stamp (common/stamp-table.h, its key the inode number): its last event (opened,
 * written, attributes, moved: asked by stat, then probed) and its last close after writing (read
 * again), as sequence numbers; 0: none. */
typedef struct FanView {
        uint64_t dev;          /* the marked file system's device (st_dev); 0: no mark */
        uint64_t floor;        /* nothing before it is vouched for */
        StampTable stamps;     /* by inode number */
} FanView;

/* The section at p (size bytes, of which *used are its own), stamps no later than max_seq. */
int fan_view_parse(const uint8_t *p, size_t size, uint64_t max_seq, FanView *v, size_t *used);
void fan_view_done(FanView *v);
/* The stamp of an inode with an event after since, or NULL. */
const Stamp *fan_view_after(const FanView *v, uint64_t ino, uint64_t since);

/* Is the file at dfd/name (st: its fstatat) open for writing by anyone, a writable mapping
 * included? 1 yes (or the question cannot be asked), 0 no, a negative errno when it is not
 * the file st describes any more. Opens it read-only, non-blocking, without following. */
int fan_probe(int dfd, const char *name, const struct stat *st);
