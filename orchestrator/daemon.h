/* SPDX-License-Identifier: MIT */
/* The inbox daemon (`run`) and its oneshot form (`drain`), contract section 1.
 *
 * One instance per config (an exclusive lock on <state_dir>/daemon.lock). At start: recovery
 * (running -> interrupted), retention, a scan of the inbox. Then it sleeps in epoll on inotify
 * (inbox: IN_CLOSE_WRITE, IN_MOVED_TO; IN_Q_OVERFLOW answered by a full rescan; state_dir: the
 * wake file written by approve, removed by whoever reloads the queue: in path mode the path
 * unit starts `drain` while it exists), a signalfd and one timerfd armed at the next real deadline
 * (a pending request's expiry, a result's retention, the systemd watchdog): no periodic wake-up
 * while idle. Queued requests start in arrival order, `concurrency` at a time, each in a forked
 * child; a child that dies without publishing gets an `error` result.
 * SIGTERM/SIGINT: stop taking new work, let running jobs finish for up to the grace period,
 * then kill them (published `interrupted`); a second signal kills them at once. */
#pragma once

#include <stdbool.h>

#include "common/error.h"
#include "common/time-util.h"
#include "parser/config.h"

typedef struct DaemonOptions {
        bool drain;          /* exit once the inbox and queue are empty and nothing runs */
        usec_t stop_grace;   /* how long running jobs may finish after SIGTERM */
        const char *config_path; /* named in worker.json for the operator's commands; may be NULL */
        WorkerReport report;     /* the daemon's events (NULL: dropped); it logs nothing itself */
        void *report_userdata;
} DaemonOptions;

/* Running jobs may finish for this long after the first SIGTERM (systemd's default stop
 * timeout is 90 s; the unit gives the worker more than this). */
#define DAEMON_STOP_GRACE_DEFAULT (60 * USEC_PER_SEC)

int daemon_run(const Config *c, const DaemonOptions *o, TfwError *e);
