/* SPDX-License-Identifier: MIT */
/* One job's lifecycle, run in a child process of the daemon: snapshot -> capsule -> bounded
 * import -> publish (contract section 6). The record is already marked running by the daemon;
 * job_execute publishes exactly one final result and marks the record final, or returns an
 * error and leaves that to the daemon (which publishes `error`). */
#pragma once

#include "capsule/driver.h"
#include "capsule/job.h"
#include "orchestrator/store.h"
#include "snapshot/dirty-set.h"
#include "snapshot/gen-store.h"
#include "orchestrator/worker.h"

/* Ask the runtime for its version once (a `runsc --version` costs a Go program's start-up)
 * and keep it in w, so the jobs forked afterwards record it without asking again. */
void job_cache_runtime_version(Worker *w);

/* warm: a capsule this process started ahead (job_warm_start), consumed; NULL: cold. lane: the
 * generation store's lane it was started on, consumed (NULL: the job takes one itself when
 * there is a store; docs/snapshot.md, "Generations"). */
/* cancel_fd: the job's end of its cancel channel (orchestrator/cancel-listen.h), or -1: the
 * controller's cancel then ends the job cancelled, its capsule torn down as at a timeout. */
/* At a worker's start, once the workspace's watch is there (issue 36 item 2): the store's first
 * free lane, when it holds a generation kept from before the start, is walked against the
 * workspace now, with the new watch, so that the first request's walk is on the watch's word
 * rather than a full one. job_lane_ahead() takes that lane and its update lock (NULL: none, or
 * none with a generation: the first job makes it); the capsule started ahead at once may take
 * it over, forked before the walk (it boots while the daemon walks, and waits on the update
 * lock for the walk to end); job_walk_ahead() then walks it, from view_fd (the watch's view the
 * caller made: orchestrator/watch.h watch_view; taken), in a process the daemon forked for it,
 * which lets the lane go once its index is written. The caller releases the lane (sealed again) or
 * lets it go to that capsule (gen_lane_let_go). Failures are said and change nothing else (the
 * lane is emptied, as after any failed update: the capsule's job then seeds or copies it). A
 * lane with a generation means the worker was in use before this start, whether or not the walk
 * succeeds: the capsule is started either way. */
GenLane *job_lane_ahead(Worker *w);
void job_walk_ahead(Worker *w, int view_fd, GenLane *lane);
int job_execute(Worker *w, RequestRecord *rec, CapsuleWarm *warm, GenLane *lane, int cancel_fd, TfwError *e);

/* Start a capsule ahead of the next request (runtime.warm_seconds): its bundle in
 * <scratch>/<warm_id>, its container tfw-<name>-<warm_id>; drv must stay open while it lives.
 * given: a lane this process already holds (consumed), or NULL: it takes the first free one.
 * -EOPNOTSUPP for a driver that cannot (the engines). */
int job_warm_start(Worker *w, const char *warm_id, CapsuleDriver *drv, GenLane *given, CapsuleWarm **ret,
                   GenLane **ret_lane, TfwError *e);

/* This worker's capsule driver (capsule/driver.h), its runsc root worker_runsc_root_open(). */
int job_driver_open(Worker *w, CapsuleDriver *d, TfwError *e);


/* Remove everything a job of this worker may have left: scratch (snapshot, bundle) and, through
 * the capsule driver, the container. Used at start-up (id NULL: every job) and after a job
 * process that was killed or died (the capsule torn down first, orchestrator/teardown.h). */
void job_cleanup(Worker *w, const char *id);

/* Empty the controller's build cache (`cache clear`, read from WORKER_CACHE_CLEAR_FILE): logged,
 * audited ("cache-cleared", approver the operator), state_dir/cache.json rewritten. Nothing when
 * no cache is configured. */
void job_cache_clear(Worker *w, const char *operator_name);
