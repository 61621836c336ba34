/* SPDX-License-Identifier: MIT */
/* The runsc driver: starting `runsc run` with exactly the intended descriptors, stopping and
 * deleting containers, and the start-up removal of a killed predecessor's containers.
 * Flags are those of runsc 0.0~20221219 (Debian 12): --root, --network=none, --platform,
 * --cpu-num-from-quota, --oci-seccomp, --log. The cgroup is the worker's (capsule/cgroup.h), named in the
 * spec's linux.cgroupsPath. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "capsule/cgroup.h"
#include "capsule/id.h"
#include "common/error.h"
#include "common/time-util.h"
#include "parser/config.h"

typedef struct Runsc {
        char *binary;      /* absolute path */
        char *root;        /* --root: the worker's private runsc state directory */
        char *platform;    /* --platform */
        char *worker_name; /* the ownership annotation of its containers */
        /* hold: every runsc this process starts keeps hold_fd open, as its last descriptor,
         * for as long as it lives (runsc_hold). */
        bool hold;
        int hold_fd;
} Runsc;

/* Resolve the binary (config runtime.runsc, else "runsc" on PATH), remember root (created
 * 0700 when missing). */
int runsc_init(Runsc *rt, const Config *c, const char *root, TfwError *e);
void runsc_done(Runsc *rt);

/* From now on every runsc started through rt also holds fd (an open file description whose
 * lock says "a runtime process of mine may still be running": orchestrator/daemon.c's
 * jobs.lock), and each one is killed when the thread that started it ends (PR_SET_PDEATHSIG,
 * as every runsc is): a runtime front never outlives its caller, and whoever waits for that
 * lock waits for the last front too. The sandbox and the gofer do not get it (runsc hands
 * its children only the descriptors it names). fd < 0: none. */
void runsc_hold(Runsc *rt, int fd);

/* The first line of `runsc --version` into buf ("unknown" when it cannot be had): the
 * runtime's identity in results and in the environment digest. */
void runsc_version(const Runsc *rt, char *buf, size_t size);


/* Start `runsc run --bundle B ID` in a new session. Security contract: the child holds
 * exactly in_fd, out_fd and err_fd as its fds 0, 1 and 2 (and the pass_fds below) and nothing else (every other fd is
 * closed with close_range before exec), has default signal dispositions and an empty signal
 * mask, an environment of PATH only (nothing of the worker's), and has entered cg before exec
 * when cg is not NULL (NULL: runsc joins the spec's linux.cgroupsPath itself). */
/* pass_fds[0..n_pass): the capsule's ends of the egress streams (capsule/protocol.h), which
 * the child also holds (as its fds 3..) and hands to the sandbox with --pass-fd at
 * CAPSULE_EGRESS_FD_BASE..; NULL, 0: none. */
#define RUNSC_PASS_FDS_MAX 128
int runsc_spawn_run(const Runsc *rt, const char *bundle, const char *id, const char *log_path,
                    int in_fd, int out_fd, int err_fd, const int *pass_fds, size_t n_pass, const CgroupJob *cg,
                    pid_t *ret_pid);

/* The runtime started as runsc_spawn_run starts runsc, with argv as it is (argv[0]: rt->binary):
 * the runc driver's front (capsule/runc.h) shares its contract. fds: the child's 0, 1, 2 and
 * then its 3.. (at most 3 + RUNSC_PASS_FDS_MAX). */
int runsc_spawn_argv(const Runsc *rt, char *const *argv, const int *fds, size_t n_fds, const CgroupJob *cg,
                     pid_t *ret_pid);

/* The first executable regular file NAME in an absolute directory of $PATH (or the default
 * PATH), into *ret. -ENOENT when none. */
int runsc_find_on_path(const char *name, char **ret);

/* Run `runsc --root R ARGS...` to its end with stdio on /dev/null, killed after timeout.
 * Returns its wait status in *ret_status. */
int runsc_command(const Runsc *rt, const char *const *args, usec_t timeout, int *ret_status);

/* `runsc delete --force ID`; a container that does not exist is success. */
int runsc_delete_force(const Runsc *rt, const char *id);

/* Does runsc still keep state for this container id in its root? Reads the root directory
 * (runsc names its files "<id>_sandbox:<sandbox id>.*"); no exec. */
int runsc_state_exists(const Runsc *rt, const char *id);

/* Start-up cleanup: every container in the root whose owner annotation
 * (CAPSULE_ANNOTATION_WORKER, read from its bundle's config.json or runsc's state file)
 * equals this worker's name is force-deleted and its cgroup removed; any other container is
 * left alone. */
int runsc_cleanup_stale(const Runsc *rt, unsigned *ret_removed, TfwError *e);

/* A container of this worker found in a runsc root (runsc_list_own). */
typedef struct RunscOwnContainer {
        char id[CAPSULE_JOB_ID_MAX + 64];
        /* The status in runsc's state file ("created", "running", …), "stopped" when it says
         * created or running but its sandbox process is gone, "creating" when runsc left only
         * its lock file or control socket (its creation never finished). */
        char state[16];
} RunscOwnContainer;

/* Every container of rt's worker in the runsc root `root` (NULL: rt->root), read from the
 * root's files only: no runsc command, which would wait on the lock a hung `runsc run`
 * holds, and nothing is created or changed. A container is this worker's when runsc's state
 * file for it carries the owner annotation CAPSULE_ANNOTATION_WORKER = rt->worker_name, or,
 * with no state file (runsc was stopped or killed while creating it), when its id is
 * capsule_container_id(worker_name, a valid job id). At most RUNSC_OWN_MAX are returned.
 * Returns the number in *ret (freed by the caller, NULL when none); a root that does not exist
 * holds none. */
#define RUNSC_OWN_MAX 1024
int runsc_list_own(const Runsc *rt, const char *root, RunscOwnContainer **ret, size_t *ret_n);
