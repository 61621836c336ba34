/* SPDX-License-Identifier: MIT */
/* Taking requests out of <workspace>/.tentaflake-worker/inbox/ (contract sections 3-5;
 * threats 2 and 9).
 *
 * inbox_capture() security contract, for one inbox entry name:
 *  - names starting with '.' are ignored (a controller's write in progress);
 *  - the entry is classified with fstatat(AT_SYMLINK_NOFOLLOW) first: a FIFO, socket, device,
 *    directory or symlink is rejected and removed without ever being opened for reading;
 *  - a regular file is opened O_RDONLY|O_NONBLOCK|O_NOFOLLOW (a FIFO or symlink swapped in
 *    after the check cannot block or redirect the read) and checked again on the fd: it must
 *    be a regular file with exactly one link (a hard link to a file outside the inbox is
 *    refused) and at most max_request_bytes long; at most max_request_bytes + 1 bytes are read;
 *  - the bytes are parsed strictly; the private copy of exactly those bytes is written into the
 *    store (fsync, rename, fsync) before the inbox entry is unlinked, and the entry is unlinked
 *    only if it is still the file that was read (same device and inode);
 *  - every entry ends exactly once: captured (queued, pending or rejected as forbidden), or
 *    rejected with a result owned by its id, or rejected into .rejected/ when it cannot own an
 *    id (a name that is not <id>.json, or an id already used). An entry whose bytes were
 *    already captured under its id (a crash between capture and unlink) is just unlinked. */
#pragma once

#include "orchestrator/worker.h"

typedef enum CaptureOutcome {
        CAPTURE_IGNORED,        /* dot-file, or gone before it could be looked at */
        CAPTURE_QUEUED,
        CAPTURE_PENDING,
        CAPTURE_REJECTED,       /* a result (status rejected) published under its id */
        CAPTURE_REJECTED_ANON,  /* a .rejected/ record */
        CAPTURE_REPLAYED,       /* already captured before a crash: unlinked only */
} CaptureOutcome;

/* Open (creating when missing, owned by container_uid:container_gid, 0700) the workspace's
 * .tentaflake-worker/inbox without following any symlink; sets w->inbox_fd. */
int inbox_open(Worker *w, TfwError *e);

/* The inbox as it is, for the operator's verbs: opened without following a symlink and
 * without creating anything; a negative errno (-ENOENT: not made yet) on failure. */
int inbox_open_existing(const Worker *w);

/* Is <id>.json waiting in the inbox, not taken yet? */
bool inbox_holds(const Worker *w, const char *id);

int inbox_capture(Worker *w, const char *name, CaptureOutcome *ret, TfwError *e);

/* Capture every entry present now. Returns the number of entries handled (not ignored), or
 * the first entry's error after trying all the others; a failed entry stays in the inbox. */
int inbox_scan(Worker *w, TfwError *e);
