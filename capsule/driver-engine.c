/* SPDX-License-Identifier: MIT */
/* The docker and podman drivers: the engine makes the container's cgroup; the worker runs
 * `ENGINE run -i` with the same walls (capsule/docker.h). One implementation, two tables. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/driver.h"
#include "common/macro.h"

static int engine_drv_init(CapsuleDriver *d, const char *runsc_root, const char *engine_runtime, TfwError *e) {
        (void) runsc_root;
        return engine_init(&d->engine, d->config, engine_runtime, e);
}

static void engine_drv_label(const CapsuleDriver *d, char *buf, size_t size) {
        snprintf(buf, size, "%s", d->ops->name);
}

/* The engine's server version and the runtime it is asked for, with the engine's
 * registration of it (docker: path and runtimeArgs): another --engine-runtime, or another
 * registration, is another environment. */
static void engine_drv_version(const CapsuleDriver *d, char *buf, size_t size) {
        _cleanup_free_ char *v = NULL, *entry = NULL;
        TfwError e = {0};

        (void) engine_server_version(&d->engine, &v, &e);
        (void) engine_runtime_entry(&d->engine, &entry);
        snprintf(buf, size, "%s, runtime %s%s%s", v ? v : "unknown", d->engine.runtime, entry ? " " : "",
                 entry ? entry : "");
}

/* The job's image (a policy may pin its own) must be in the local store: never a pull. */
static int engine_drv_prepare(const CapsuleDriver *d, const Config *c, TfwError *e) {
        Engine en = d->engine;
        if (c && c->image)
                en.image = c->image;
        return engine_image_check(&en, e);
}

static int engine_drv_spawn(const CapsuleDriver *d, const CapsuleSpawn *s, pid_t *ret_pid) {
        /* The engine's daemon cannot see the worker's store (binds_generations is false). */
        if (s->work_dir)
                return -EOPNOTSUPP;
        _cleanup_free_ char *pw = NULL, *gr = NULL;

        if (asprintf(&pw, "%s/passwd", s->bundle_path) < 0 || asprintf(&gr, "%s/group", s->bundle_path) < 0)
                return -ENOMEM;
        return engine_spawn_run(&d->engine, s->config, s->cid, s->job_id, s->argv, s->extra_env, s->check, s->snapshot_dir,
                                s->init_path, pw, gr, s->bundle_path, s->in_fd, s->out_fd, s->err_fd, ret_pid);
}

/* The engine kills its container; the front process (`ENGINE run`) only when that failed. */
static void engine_drv_kill(const CapsuleDriver *d, const char *cid, pid_t front, const CgroupJob *cg, int stage) {
        (void) cg;
        (void) engine_kill(&d->engine, cid);
        if (stage == 1 && front > 0)
                (void) kill(front, SIGKILL);
}

/* `podman rm -f` would wait on the attached run: kill, and let the run return. */
static void engine_drv_cancel(const CapsuleDriver *d, const char *cid) {
        (void) engine_kill(&d->engine, cid);
}

static int engine_drv_teardown(const CapsuleDriver *d, const char *cid, unsigned flags, CapsuleTeardown *ret,
                               TfwError *e) {
        return capsule_teardown(NULL, &d->engine, cid, flags, ret, e);
}

/* `rm -f` and the `ps` that checks it, each bounded by the engine command timeout (serve's
 * --engine-timeout-secs). */
static usec_t engine_drv_teardown_bound(const CapsuleDriver *d) {
        return 2 * d->engine.command_timeout + CAPSULE_TEARDOWN_KILL_USEC;
}

static int engine_drv_remove(const CapsuleDriver *d, const char *cid) {
        return engine_remove(&d->engine, cid);
}

/* The cgroup the engine made for the container, found through its sandbox's pid (asked once
 * it runs) and accepted only when its path names the container's full id. */
static int engine_drv_cpu_usage(const CapsuleDriver *d, const char *cid, const CgroupJob *cg, CapsuleCpuProbe *probe,
                                uint64_t *ret_usec) {
        (void) cg;
        if (probe->sandbox_pid <= 0) {
                int r = engine_container_pid(&d->engine, cid, &probe->sandbox_pid, probe->sandbox_id);
                if (r == -ESRCH || r == -ENOENT)
                        return -EAGAIN;
                if (r < 0)
                        return r;
        }
        return cgroup_cpu_usage_of_pid(probe->sandbox_pid, probe->sandbox_id, ret_usec);
}

static int engine_drv_oom_killed(const CapsuleDriver *d, const char *cid) {
        return engine_oom_killed(&d->engine, cid);
}

static int engine_drv_cleanup_stale(const CapsuleDriver *d, int scratch_fd, unsigned *ret_removed, TfwError *e) {
        (void) scratch_fd;
        return engine_cleanup_stale(&d->engine, ret_removed, e);
}

/* The engine answers, knows the runtime, holds the image locally. */
static bool engine_drv_check(const CapsuleDriver *d, CapsuleCheckReport report, void *userdata) {
        const Engine *en = &d->engine;
        const char *name = d->ops->name;
        _cleanup_free_ char *version = NULL;
        char detail[1400];
        TfwError e = {0};
        bool ok = true;

        if (engine_server_version(en, &version, &e) < 0) {
                report(userdata, "runtime", false, e.message);
                return false;
        }
        snprintf(detail, sizeof(detail), "%s %s answers (server version %s)", name, en->binary, version);
        report(userdata, "runtime", true, detail);

        int k = engine_runtime_known(en);
        if (k > 0)
                snprintf(detail, sizeof(detail), "runtime '%s' is registered with %s%s", en->runtime, name,
                         en->driver == DRIVER_PODMAN ? " (resolved at run time; the probe job proves it)" : "");
        else
                snprintf(detail, sizeof(detail), "%s does not know the runtime '%s'%s%s", name, en->runtime,
                         k < 0 ? ": " : "", k < 0 ? strerror(-k) : "");
        report(userdata, "engine_runtime", k > 0, detail);
        ok = k > 0;

        e = (TfwError){0};
        if (engine_image_check(en, &e) < 0) {
                report(userdata, "image", false, e.message);
                ok = false;
        } else {
                snprintf(detail, sizeof(detail), "'%s' is in the local %s store", en->image, name);
                report(userdata, "image", true, detail);
        }
        return ok;
}

static void engine_drv_done(CapsuleDriver *d) {
        engine_done(&d->engine);
}

/* The engine's spec with its runsc runtime: gVisor's kernel inside the engine's walls. */
static const char *const engine_walls[] = { "gvisor", "engine", NULL };

#define ENGINE_OPS(k, n)                                                                                    \
        {                                                                                                   \
                .kind = (k), .name = (n), .worker_cgroup = false, .runs_images = true, .kernel = "gvisor",  \
                .init = engine_drv_init,                                                                    \
                .label = engine_drv_label, .version = engine_drv_version,                                  \
                .prepare = engine_drv_prepare, .spawn = engine_drv_spawn, .kill = engine_drv_kill,          \
                .cancel = engine_drv_cancel, .teardown = engine_drv_teardown,                               \
                .teardown_bound = engine_drv_teardown_bound,                               \
                .remove = engine_drv_remove, .cpu_usage = engine_drv_cpu_usage,                            \
                .oom_killed = engine_drv_oom_killed, .cleanup_stale = engine_drv_cleanup_stale,            \
                .check = engine_drv_check, .walls = engine_walls,                                           \
                .cgroup_description = "engine-made container cgroup (memory, memory+swap, pids, cpus)",    \
                .done = engine_drv_done,                                                                    \
        }

const CapsuleDriverOps capsule_driver_docker = ENGINE_OPS(DRIVER_DOCKER, "docker");
const CapsuleDriverOps capsule_driver_podman = ENGINE_OPS(DRIVER_PODMAN, "podman");
