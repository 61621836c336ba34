/* SPDX-License-Identifier: MIT */
/* The workspace's watch in the daemon (snapshot/dirty-set.h; docs/snapshot.md, "The watch"):
 * started with the generation store, read as its events come, and handed to each job when it is
 * taken, through fork or, to a capsule started ahead, beside the request's id on its socket. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "orchestrator/worker.h"
#include "parser/config.h"
#include "snapshot/dirty-set.h"
#include "snapshot/snapshot.h"

/* The host's fs.inotify.max_user_watches (a budget all of root's processes share), or 0 when it
 * cannot be read. */
uint64_t watch_host_max(void);
/* How many watches the workspace's watch may hold: limits.max_watches, and never more than a
 * quarter of host_max (the host's figure; 0: unknown, then limits.max_watches alone). */
uint32_t watch_budget(const Config *c, uint64_t host_max);

/* A watch for w's workspace (w->watch_fd and w->watch_budget set), or NULL: none (said in the
 * log, with the budget's figures when there is one). Only with a generation store: without one
 * every job streams the whole workspace anyway. */
DirtySet *watch_start(Worker *w);
/* After a job's walk, in the job's process: say once (for the whole daemon) when the workspace
 * has more directories than the budget, with the figures; say each time when the host had no
 * watch left; state_dir/watch.json for doctor. */
void watch_after_job(Worker *w, const char *id, const SnapshotSummary *s);

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
