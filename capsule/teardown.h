/* SPDX-License-Identifier: MIT */
/* Ending a capsule from outside, whatever state it is in (threat 13: "every ending ends the
 * capsule"). capsule_run_job ends its own capsule when it returns; this is for the endings where
 * the process that ran it is gone or must not be waited for: the inbox daemon's second signal
 * and grace timeout (the job process is SIGKILLed, its `runsc run` lives in a session of its
 * own and outlives it), a job process that died, serve's second signal and its shutdown grace.
 * A sandbox that hangs (seen at boot with --platform=kvm; a stopped one in the tests) answers
 * no runsc command and holds runsc's lock on the container through its front process, so
 * asking runsc to delete it is not enough: everything is killed first.
 *
 * Security contract: only processes of the caller's euid whose argv names both this worker's
 * runsc root (--root, private to the worker) and the container id, and the processes in the
 * container's own job cgroup, are ever signalled; nothing else. Every step is bounded in time
 * (at most CAPSULE_TEARDOWN_MAX_USEC in all, whatever the runtime does); none waits on the
 * sandbox. Safe to call when nothing of the container exists (it then does nothing) and more
 * than once, from any thread. */
#pragma once

#include "capsule/docker.h"
#include "capsule/runsc.h"
#include "common/error.h"
#include "common/macro.h"
#include "common/time-util.h"

/* Killing: until no process of the container is left, at most this long. */
#define CAPSULE_TEARDOWN_KILL_USEC (5 * USEC_PER_SEC)
/* `runsc delete --force` once nothing of the container runs. */
#define CAPSULE_TEARDOWN_DELETE_USEC (10 * USEC_PER_SEC)
/* capsule/cgroup.c's bound on removing a job cgroup: 10 s for it to empty, then up to 1 s in
 * each other v1 hierarchy runsc made the path in (at most 8 here). */
#define CAPSULE_TEARDOWN_CGROUP_USEC (20 * USEC_PER_SEC)
/* The bound on the whole for runsc (the engines' is their driver's teardown_bound): the kill
 * passes, the cgroup's removal twice at worst, the delete; an engine, its `rm -f` (the engine command bound, CONFIG_DEFAULT_ENGINE_TIMEOUT_SECONDS unless
 * serve's --engine-timeout-secs says otherwise). */
#define CAPSULE_TEARDOWN_MAX_USEC                                                                        \
        MAX(CAPSULE_TEARDOWN_KILL_USEC + CAPSULE_TEARDOWN_DELETE_USEC + 2 * CAPSULE_TEARDOWN_CGROUP_USEC, \
            CONFIG_DEFAULT_ENGINE_TIMEOUT_SECONDS * USEC_PER_SEC)

typedef enum CapsuleTeardownFlags {
        /* The job still runs in this process and owns the cgroup (serve's lanes: capsule_run_job
         * removes it when it returns): the cgroup is emptied but not removed under it, where
         * runsc would make it again without its limits. */
        CAPSULE_TEARDOWN_KEEP_CGROUP = 1 << 0,
} CapsuleTeardownFlags;

typedef struct CapsuleTeardown {
        unsigned killed;      /* processes of the container found alive (and killed) */
        bool found;           /* runsc: a process of it or runsc's record of it was there (its
                               * processes may have died with their caller: the record stays) */
        bool deleted;         /* runsc state removed / engine container removed */
        bool cgroup_removed;  /* the job cgroup is gone (or never existed) */
} CapsuleTeardown;

/* End container `id` of the runsc driver rt, or of the engine en (exactly one non-NULL):
 *  runsc: SIGKILL every process of the container (the front `runsc run`, the gofer, the
 *         sandbox, a `runsc` command stuck on the container's lock) and everything in its job
 *         cgroup <tentaflake-worker-NAME>/<id>, until none is left; remove the cgroup in every
 *         hierarchy (not with CAPSULE_TEARDOWN_KEEP_CGROUP); `runsc delete --force`; remove
 *         what runsc leaves of a container it never finished creating (its lock file and
 *         control socket, and, once nothing of it runs, a state file runsc was killed while
 *         writing, which runsc itself cannot read or delete);
 *  engine: `ENGINE rm -f -v` (the engine kills and removes; its cgroup is the engine's).
 * Returns 0 when nothing of it is left, else a negative errno (-EBUSY: something is still
 * there, named in e) after the bound; *ret (may be NULL) says what was done either way. */
int capsule_teardown(const Runsc *rt, const Engine *en, const char *id, unsigned flags, CapsuleTeardown *ret,
                     TfwError *e);

/* SIGKILL every process of the caller's euid whose argv holds "--root ROOT" (or "--root=ROOT")
 * and the argument `id`, except `except` (0: none). Returns how many were signalled. Reads
 * /proc only. */
int capsule_kill_runtime_processes(const char *root, const char *id, pid_t except);
