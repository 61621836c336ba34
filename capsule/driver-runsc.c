/* SPDX-License-Identifier: MIT */
/* The runsc driver: the worker makes the capsule's cgroup and runs the OCI bundle with
 * `runsc run` (capsule/runsc.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/driver.h"
#include "capsule/job.h"
#include "common/macro.h"

#define RUNSC_VERSION_TIMEOUT_USEC (10 * USEC_PER_SEC)

static int runsc_drv_init(CapsuleDriver *d, const char *runsc_root, const char *engine_runtime, TfwError *e) {
        (void) engine_runtime;
        return runsc_init(&d->runsc, d->config, runsc_root, e);
}

static void runsc_drv_label(const CapsuleDriver *d, char *buf, size_t size) {
        snprintf(buf, size, "platform %s", d->runsc.platform);
}

static void runsc_drv_version(const CapsuleDriver *d, char *buf, size_t size) {
        runsc_version(&d->runsc, buf, size);
}

static int runsc_drv_prepare(const CapsuleDriver *d, const Config *c, TfwError *e) {
        (void) d;
        (void) c;
        (void) e;
        return 0;
}

static int runsc_drv_spawn(const CapsuleDriver *d, const CapsuleSpawn *s, pid_t *ret_pid) {
        /* runsc joins the cgroup named in the spec before it starts the sandbox and the gofer
         * (they inherit it) and then leaves it; entering it here as well would cost one more
         * cgroup migration, an RCU grace period under v1 (4 to 16 ms measured). */
        return runsc_spawn_run(&d->runsc, s->bundle_path, s->cid, s->log_path, s->in_fd,
                               s->out_fd, s->err_fd, s->egress_fds, s->n_egress_fds, NULL, ret_pid);
}

static void runsc_drv_kill(const CapsuleDriver *d, const char *cid, pid_t front, const CgroupJob *cg, int stage) {
        (void) d;
        (void) cid;
        if (stage == 1 && front > 0)
                (void) kill(front, SIGKILL);
        if (cg)
                (void) cgroup_job_kill(cg, stage == 0 ? front : 0);
}

/* A hung sandbox holds runsc's lock through the front process, so `runsc delete` alone would
 * wait on it: the bounded teardown (threat 13). The cgroup stays, emptied: it is
 * capsule_run_job's, which removes it when it returns (runsc would make it again without its
 * limits). */
static void runsc_drv_cancel(const CapsuleDriver *d, const char *cid) {
        TfwError e = {0};
        (void) capsule_teardown(&d->runsc, NULL, cid, CAPSULE_TEARDOWN_KEEP_CGROUP, NULL, &e);
}

static int runsc_drv_teardown(const CapsuleDriver *d, const char *cid, unsigned flags, CapsuleTeardown *ret,
                              TfwError *e) {
        return capsule_teardown(&d->runsc, NULL, cid, flags, ret, e);
}

static usec_t runsc_drv_teardown_bound(const CapsuleDriver *d) {
        (void) d;
        return CAPSULE_TEARDOWN_MAX_USEC;
}

static int runsc_drv_remove(const CapsuleDriver *d, const char *cid) {
        if (runsc_state_exists(&d->runsc, cid) <= 0)
                return 0;
        int r = runsc_delete_force(&d->runsc, cid);
        if (r != -EBUSY)
                return r;
        /* Still there: a state file runsc was killed while writing (a front ended at the wrong
         * moment), on which its delete fails for good. The teardown removes it once nothing of
         * the container runs; the cgroup is the caller's. */
        TfwError e = {0};
        return capsule_teardown(&d->runsc, NULL, cid, CAPSULE_TEARDOWN_KEEP_CGROUP, NULL, &e);
}

static int runsc_drv_cpu_usage(const CapsuleDriver *d, const char *cid, const CgroupJob *cg, CapsuleCpuProbe *probe,
                               uint64_t *ret_usec) {
        (void) d;
        (void) cid;
        (void) probe;
        if (!cg)
                return -ENOENT;
        return cgroup_job_cpu_usage(cg, ret_usec);
}

static int runsc_drv_oom_killed(const CapsuleDriver *d, const char *cid) {
        (void) d;
        (void) cid;
        return 0; /* the job cgroup's own record is read instead */
}

static int runsc_drv_cleanup_stale(const CapsuleDriver *d, int scratch_fd, unsigned *ret_removed, TfwError *e) {
        return capsule_cleanup_stale(&d->runsc, scratch_fd, ret_removed, e);
}

/* The runsc binary: present, executable, and `runsc --version` answers (bounded). */
static bool runsc_drv_check(const CapsuleDriver *d, CapsuleCheckReport report, void *userdata) {
        return capsule_check_runtime_binary(DRIVER_RUNSC, d->runsc.binary, d->config->runsc ? "runtime.runsc" : NULL, RUNSC_VERSION_TIMEOUT_USEC, report, userdata);
}

static int runsc_drv_leftovers(const CapsuleDriver *d, const char *worker_root, CapsuleLeftoverReport report,
                               void *userdata) {
        _cleanup_free_ RunscOwnContainer *own = NULL;
        size_t n = 0;
        int r = runsc_list_own(&d->runsc, worker_root, &own, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                report(userdata, own[i].id, own[i].state);
        return (int) n;
}

static void runsc_drv_hold(CapsuleDriver *d, int fd) {
        runsc_hold(&d->runsc, fd);
}

static void runsc_drv_done(CapsuleDriver *d) {
        runsc_done(&d->runsc);
}

/* gVisor's own kernel, then the walls around it (capsule/oci-spec.h). */
static const char *const runsc_walls[] = {
        "gvisor", "namespaces", "seccomp", "no_capabilities", "no_new_privileges", "readonly_root", "cgroup", NULL,
};

const CapsuleDriverOps capsule_driver_runsc = {
        .kind = DRIVER_RUNSC,
        .name = "runsc",
        .worker_cgroup = true,
        .local_paths = true,
        .boots_ahead = true,
        .own_seccomp = true,
        .binds_generations = true,
        .kernel = "gvisor",
        .init = runsc_drv_init,
        .label = runsc_drv_label,
        .version = runsc_drv_version,
        .prepare = runsc_drv_prepare,
        .spawn = runsc_drv_spawn,
        .kill = runsc_drv_kill,
        .cancel = runsc_drv_cancel,
        .teardown = runsc_drv_teardown,
        .teardown_bound = runsc_drv_teardown_bound,
        .remove = runsc_drv_remove,
        .cpu_usage = runsc_drv_cpu_usage,
        .oom_killed = runsc_drv_oom_killed,
        .cleanup_stale = runsc_drv_cleanup_stale,
        .check = runsc_drv_check,
        .leftovers = runsc_drv_leftovers,
        .hold = runsc_drv_hold,
        .walls = runsc_walls,
        .cgroup_description = "worker-owned job cgroup (memory, memory+swap, pids, cpu quota)",
        .done = runsc_drv_done,
};
