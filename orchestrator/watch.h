/* SPDX-License-Identifier: MIT */
/* The workspace's watch in the daemon (snapshot/dirty-set.h; docs/snapshot.md, "The watch"):
 * started with the generation store, read as its events come, and handed to each job when it is
 * taken, through fork or, to a capsule started ahead, beside the request's id on its socket. */
#pragma once

#include <sys/types.h>

#include "orchestrator/worker.h"
#include "snapshot/dirty-set.h"

/* A watch for w's workspace (w->watch_fd set), or NULL: none (said in the log). Only with a
 * generation store: without one every job streams the whole workspace anyway. */
DirtySet *watch_start(Worker *w);
/* The view for a job taken now: every event queued so far read first (those of every change
 * made before the request). A sealed memfd, or a negative errno (the job then reads every
 * directory). */
int watch_view(DirtySet *s);

/* The request id to a capsule started ahead, and with it view_fd when it is one (>= 0):
 * returns what send() returned. */
ssize_t watch_send_id(int sock, const char *id, size_t len, int view_fd);
/* Its other end: the id (not terminated) into buf, the view, if one came, in *ret_view_fd
 * (-EBADF otherwise). Returns what recvmsg() returned. */
ssize_t watch_recv_id(int sock, char *buf, size_t size, int *ret_view_fd);
