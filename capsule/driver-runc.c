/* SPDX-License-Identifier: MIT */
/* The runc driver: the job on the host's kernel behind the walls of its spec (a user namespace
 * whose ids own nothing on the host, every namespace, no capability, the seccomp allowlist,
 * masked /proc and /sys, Landlock; capsule/oci-spec.h, CapsuleKernelWalls). The worker makes
 * and limits the capsule's cgroup as for runsc; `runc run` joins it (linux.cgroupsPath). crun
 * runs through the same code (runtime.runc). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/driver.h"
#include "capsule/id.h"
#include "capsule/job.h"
#include "common/fd-util.h"
#include "common/macro.h"

#define RUNC_VERSION_TIMEOUT_USEC (10 * USEC_PER_SEC)

static int runc_drv_init(CapsuleDriver *d, const char *root, const char *engine_runtime, TfwError *e) {
        (void) engine_runtime;
        return runc_init(&d->runc, d->config, root, e);
}

static void runc_drv_label(const CapsuleDriver *d, char *buf, size_t size) {
        snprintf(buf, size, "runc on the host kernel%s", d->runc.landlock_abi > 0 ? " with Landlock" : "");
}

static void runc_drv_version(const CapsuleDriver *d, char *buf, size_t size) {
        runsc_version(&d->runc.rt, buf, size);
}

static int runc_drv_prepare(const CapsuleDriver *d, const Config *c, TfwError *e) {
        (void) d;
        (void) c;
        (void) e;
        return 0;
}

static int runc_drv_kernel_walls(const CapsuleDriver *d, const char *cid, CapsuleKernelWalls *ret) {
        *ret = (CapsuleKernelWalls) {.landlock = d->runc.landlock_abi > 0};
        int r = runc_root_path(&d->runc, cid, ret->root_dir, sizeof(ret->root_dir));
        if (r >= 0)
                r = runc_listener_path(&d->runc, ret->listener_path, sizeof(ret->listener_path));
        return r;
}

/* The capsule's root directory afresh (the bundle's etc in it), then `runc run`, which joins the cgroup named in the
 * spec (the worker made and limited it) before anything of the container runs. */
static int runc_drv_spawn(const CapsuleDriver *d, const CapsuleSpawn *s, pid_t *ret_pid) {
        _cleanup_free_ char *etc = NULL;
        if (asprintf(&etc, "%s/root/etc", s->bundle_path) < 0)
                return -ENOMEM;
        int r = runc_root_make(&d->runc, s->cid, etc);
        if (r < 0)
                return r;
        return runc_spawn_run(&d->runc, s->bundle_path, s->cid, s->log_path, s->in_fd, s->out_fd, s->err_fd,
                              s->egress_fds, s->n_egress_fds, ret_pid);
}

static void runc_drv_kill(const CapsuleDriver *d, const char *cid, pid_t front, const CgroupJob *cg, int stage) {
        (void) d;
        (void) cid;
        if (stage == 1 && front > 0)
                (void) kill(front, SIGKILL);
        if (cg)
                (void) cgroup_job_kill(cg, stage == 0 ? front : 0);
}

/* As runsc's: the front, any runc command on the container, everything in its cgroup, then
 * runc's record (capsule/teardown.h); the cgroup stays for capsule_run_job. */
static void runc_drv_cancel(const CapsuleDriver *d, const char *cid) {
        TfwError e = {0};
        (void) capsule_teardown(&d->runc.rt, NULL, cid, CAPSULE_TEARDOWN_KEEP_CGROUP, NULL, &e);
}

static int runc_drv_teardown(const CapsuleDriver *d, const char *cid, unsigned flags, CapsuleTeardown *ret,
                             TfwError *e) {
        int r = capsule_teardown(&d->runc.rt, NULL, cid, flags, ret, e);
        int k = runc_root_remove(&d->runc, cid);
        if (r >= 0 && k < 0)
                r = tfw_error(e, -k, "capsule_teardown", "container '%s': cannot remove its root in '%s': %s", cid,
                              d->runc.roots, strerror(-k));
        return r;
}

static usec_t runc_drv_teardown_bound(const CapsuleDriver *d) {
        (void) d;
        return CAPSULE_TEARDOWN_MAX_USEC;
}

static int runc_drv_remove(const CapsuleDriver *d, const char *cid) {
        int r = 0;
        if (runsc_state_exists(&d->runc.rt, cid) > 0)
                r = runsc_delete_force(&d->runc.rt, cid);
        int k = runc_root_remove(&d->runc, cid);
        return r < 0 ? r : k;
}

static int runc_drv_cpu_usage(const CapsuleDriver *d, const char *cid, const CgroupJob *cg, CapsuleCpuProbe *probe,
                              uint64_t *ret_usec) {
        (void) d;
        (void) cid;
        (void) probe;
        if (!cg)
                return -ENOENT;
        return cgroup_job_cpu_usage(cg, ret_usec);
}

static int runc_drv_oom_killed(const CapsuleDriver *d, const char *cid) {
        (void) d;
        (void) cid;
        return 0; /* the job cgroup's own record is read instead */
}

/* What runc's root holds of ours, each ended whole; then what capsule_cleanup_stale finds (the
 * bundles, the cgroups); then the roots of this worker's containers. */
static int runc_drv_cleanup_stale(const CapsuleDriver *d, int scratch_fd, unsigned *ret_removed, TfwError *e) {
        _cleanup_free_ RunscOwnContainer *own = NULL;
        size_t n = 0;
        int r = runc_list_own(&d->runc, NULL, &own, &n);
        if (r < 0)
                return tfw_error(e, -r, "runtime_unavailable", "cannot read the runc root '%s': %s", d->runc.rt.root,
                                 strerror(-r));
        for (size_t i = 0; i < n; i++) {
                r = runc_drv_teardown(d, own[i].id, 0, NULL, e);
                if (r < 0)
                        return r;
        }
        r = capsule_cleanup_stale(&d->runc.rt, scratch_fd, ret_removed, e);
        if (r < 0)
                return r;
        if (ret_removed)
                *ret_removed += (unsigned) n;
        _cleanup_close_ int fd = open(d->runc.roots, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_closedir_ DIR *dir = fd >= 0 ? opendir_fd(fd) : NULL;
        struct dirent *de;
        while (dir && (de = readdir(dir)))
                if (capsule_container_id_is_workers(d->runc.rt.worker_name, de->d_name))
                        (void) rm_rf_at(fd, de->d_name);
        runc_listeners_clear(&d->runc);
        return 0;
}

/* The binary: present, executable, and `runc --version` answers (bounded). */
static bool runc_drv_check(const CapsuleDriver *d, CapsuleCheckReport report, void *userdata) {
        return capsule_check_runtime_binary(DRIVER_RUNC, d->runc.rt.binary, d->config->runc ? "runtime.runc" : NULL, RUNC_VERSION_TIMEOUT_USEC, report, userdata);
}

static int runc_drv_leftovers(const CapsuleDriver *d, const char *worker_root, CapsuleLeftoverReport report,
                              void *userdata) {
        _cleanup_free_ RunscOwnContainer *own = NULL;
        size_t n = 0;
        int r = runc_list_own(&d->runc, worker_root, &own, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                report(userdata, own[i].id, own[i].state);
        return (int) n;
}

static void runc_drv_hold(CapsuleDriver *d, int fd) {
        runsc_hold(&d->runc.rt, fd);
}

static void runc_drv_done(CapsuleDriver *d) {
        runc_done(&d->runc);
}

static bool runc_drv_confines_writes(const CapsuleDriver *d) {
        return d->runc.landlock_abi > 0;
}

/* The host kernel's walls (capsule/oci-spec.h, CapsuleKernelWalls); "landlock" after them where
 * the kernel has it. */
static const char *const runc_walls[] = {
        "user_namespace", "namespaces", "seccomp_allowlist", "no_capabilities", "no_new_privileges",
        "readonly_root", "masked_proc_sys", "devices", "cgroup", NULL,
};

const CapsuleDriverOps capsule_driver_runc = {
        .kind = DRIVER_RUNC,
        .name = "runc",
        .worker_cgroup = true,
        .local_paths = true,
        .boots_ahead = true,
        .own_seccomp = true,
        .binds_generations = true,
        .host_kernel = true,
        .kernel = "host",
        .init = runc_drv_init,
        .label = runc_drv_label,
        .version = runc_drv_version,
        .prepare = runc_drv_prepare,
        .spawn = runc_drv_spawn,
        .kill = runc_drv_kill,
        .cancel = runc_drv_cancel,
        .teardown = runc_drv_teardown,
        .teardown_bound = runc_drv_teardown_bound,
        .remove = runc_drv_remove,
        .cpu_usage = runc_drv_cpu_usage,
        .oom_killed = runc_drv_oom_killed,
        .cleanup_stale = runc_drv_cleanup_stale,
        .check = runc_drv_check,
        .leftovers = runc_drv_leftovers,
        .kernel_walls = runc_drv_kernel_walls,
        .hold = runc_drv_hold,
        .walls = runc_walls,
        .confines_writes = runc_drv_confines_writes,
        .cgroup_description = "worker-owned job cgroup (memory, memory+swap, pids, cpu quota) in a cgroup namespace",
        .done = runc_drv_done,
};
