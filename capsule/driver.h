/* SPDX-License-Identifier: MIT */
/* The capsule drivers behind one table of operations (crun's libcrun_cgroup_manager is the
 * model): runsc runs the OCI bundle itself; docker and podman run the same walls through the
 * engine's CLI with its runsc runtime (capsule/docker.h). Nothing outside the drivers asks
 * which one it is: capsule/job.c, the execution core, doctor and serve call these operations.
 *
 * Lifecycle: capsule_driver_init() resolves the binary (runsc, or the engine CLI) for a
 * config; the operations below act on containers named by capsule_container_id(); done
 * frees. A driver value is used by one thread at a time, except kill and remove, which another
 * thread may call to end a running container (they only spawn a bounded CLI command). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "capsule/cgroup.h"
#include "capsule/docker.h"
#include "capsule/oci-spec.h"
#include "capsule/runc.h"
#include "capsule/runsc.h"
#include "capsule/teardown.h"
#include "common/error.h"
#include "parser/config.h"

typedef struct CapsuleDriver CapsuleDriver;

/* What one `run` is made of (the bundle is already written). */
typedef struct CapsuleSpawn {
        const Config *config;     /* the job's effective walls */
        const char *cid;          /* container id */
        const char *job_id;
        char *const *argv;
        char *const *extra_env;
        const char *check;        /* validation plane: CI=true, TENTAFLAKE_CHECK=<check> */
        const char *snapshot_dir;
        const char *work_dir;     /* a generation bound at /work (binds_generations only) */
        const char *init_path;
        const char *bundle_path;  /* the private bundle directory (engines: also its workdir) */
        const char *log_path;     /* runsc --log */
        int in_fd, out_fd, err_fd;
        /* The capsule's ends of the egress streams (capsule/egress.h), given to the sandbox at
         * CAPSULE_EGRESS_FD_BASE..; n_egress_fds 0: no egress. Only the runsc driver passes them
         * (the configuration refuses network with the engines). */
        const int *egress_fds;
        size_t n_egress_fds;
} CapsuleSpawn;

/* The per-run state a driver keeps to read the capsule's CPU time. */
typedef struct CapsuleCpuProbe {
        pid_t sandbox_pid;
        char sandbox_id[ENGINE_ID_MAX + 1];
} CapsuleCpuProbe;

/* One line of a driver's live self-check (doctor): check name, ok, detail. */
typedef void (*CapsuleCheckReport)(void *userdata, const char *check, bool ok, const char *detail);

/* One container a predecessor of the worker left (doctor): its id and its state. */
typedef void (*CapsuleLeftoverReport)(void *userdata, const char *id, const char *state);

typedef struct CapsuleDriverOps {
        RuntimeDriver kind;
        const char *name;         /* "runsc", "runc", "docker", "podman" */
        /* true: the worker makes, limits and kills the capsule's cgroup (capsule/cgroup.h);
         * false: the engine makes the container's cgroup. */
        bool worker_cgroup;
        bool runs_images;         /* a job may pin its own image (the engines) */
        /* true: the runtime opens the bundle by path in the worker's own mount namespace, so
         * the scratch may be a tmpfs of the worker's namespace (orchestrator/scratch.h);
         * false: an engine's daemon resolves paths in its own. */
        bool local_paths;
        /* true: a capsule may be started ahead of its job (capsule_warm_start: the worker
         * holds its channels and its cgroup); false: every capsule starts with its job. */
        bool boots_ahead;
        /* true: the capsule runs the worker's own seccomp profile and /dev without fuse or tun
         * (capsule/seccomp-profile.h, capsule/oci-spec.c), which doctor proves live; false:
         * the engine's own spec and default profile, which doctor only reports. */
        bool own_seccomp;
        /* true: a generation can be bound at /work under the sandbox's overlay (CapsuleSpawn
         * work_dir; docs/snapshot.md, "Generations"); false: /work is a tmpfs the workspace is
         * streamed into (an engine's daemon cannot see the worker's store). */
        bool binds_generations;
        /* true: the job runs on the host's kernel (runc), behind the walls of the spec's
         * CapsuleKernelWalls (kernel_walls below): the host's pids cgroup counts the job's own
         * processes; false: gVisor's kernel (runsc and the engines' runsc runtime). */
        bool host_kernel;
        /* What a result's isolation names: "gvisor" or "host". */
        const char *kernel;
        /* Resolve the binary for config (see capsule_driver_init). */
        int (*init)(CapsuleDriver *d, const char *runsc_root, const char *engine_runtime, TfwError *e);
        /* What a doctor line names: "platform systrap" or the engine's name. */
        void (*label)(const CapsuleDriver *d, char *buf, size_t size);
        /* The runtime's identity for results and the environment digest. */
        void (*version)(const CapsuleDriver *d, char *buf, size_t size);
        /* What must hold before a job's bundle is made (the engines: the image is local). The
         * error's code is "image_missing", "image_refused" or "runtime_failed". */
        int (*prepare)(const CapsuleDriver *d, const Config *job_config, TfwError *e);
        int (*spawn)(const CapsuleDriver *d, const CapsuleSpawn *s, pid_t *ret_pid);
        /* End a running container. stage 0: the worker's limit was met (spare the front process
         * `front` so it records the end); 1: that did not end it; 2: something still holds a
         * channel after the front process exited. cg is the worker's cgroup or NULL. */
        void (*kill)(const CapsuleDriver *d, const char *cid, pid_t front, const CgroupJob *cg, int stage);
        /* From another thread, while capsule_run_job() runs it: end the container now, so
         * that the run returns and cleans up as after any other ending. */
        void (*cancel)(const CapsuleDriver *d, const char *cid);
        /* From outside, whatever state the container is in (capsule/teardown.h, threat 13):
         * everything of it killed and removed, bounded in time. */
        int (*teardown)(const CapsuleDriver *d, const char *cid, unsigned flags, CapsuleTeardown *ret, TfwError *e);
        /* How long teardown may take at most (the engines: their command bound, twice). */
        usec_t (*teardown_bound)(const CapsuleDriver *d);
        /* Remove the container (force); one that does not exist is success. */
        int (*remove)(const CapsuleDriver *d, const char *cid);
        /* CPU time used so far; -EAGAIN while the container does not run yet. */
        int (*cpu_usage)(const CapsuleDriver *d, const char *cid, const CgroupJob *cg, CapsuleCpuProbe *probe,
                         uint64_t *ret_usec);
        /* Did the kernel's OOM killer end it, as far as the driver can tell beyond the cgroup?
         * 1, 0 or negative. */
        int (*oom_killed)(const CapsuleDriver *d, const char *cid);
        /* Start-up only: remove what a killed predecessor of this worker left. */
        int (*cleanup_stale)(const CapsuleDriver *d, int scratch_fd, unsigned *ret_removed, TfwError *e);
        /* doctor: the runtime answers (and, for the engines, knows the runtime and holds the
         * image); each finding reported as one line. Returns true when all of it holds. */
        bool (*check)(const CapsuleDriver *d, CapsuleCheckReport report, void *userdata);
        /* doctor, when no worker of this config runs: every container of this worker the
         * runtime still keeps, each reported with its state. runsc: those in the worker's own
         * root `worker_root` (runsc_list_own: read from its files, nothing created; the
         * driver's own root is doctor's private one). Returns how many, or a negative errno.
         * NULL: the driver cannot tell without its engine (docker, podman). */
        int (*leftovers)(const CapsuleDriver *d, const char *worker_root, CapsuleLeftoverReport report,
                         void *userdata);
        /* host_kernel drivers: the spec's walls for container cid (its root directory, the
         * kernel's Landlock), before its bundle is made. NULL for the others. */
        int (*kernel_walls)(const CapsuleDriver *d, const char *cid, CapsuleKernelWalls *ret);
        /* The walls a job of this driver runs behind, in the words of result.json's isolation
         * (contract section 7), NULL-terminated; landlock_wall is added when the driver's
         * confines_writes says the kernel has it. */
        const char *const *walls;
        bool (*confines_writes)(const CapsuleDriver *d);
        /* capsule_driver_hold: NULL when the driver starts nothing that could outlive its caller. */
        void (*hold)(CapsuleDriver *d, int fd);
        /* The isolation facts of the environment digest: who makes the cgroup, the image. */
        const char *cgroup_description;
        void (*done)(CapsuleDriver *d);
} CapsuleDriverOps;

struct CapsuleDriver {
        const CapsuleDriverOps *ops;
        const Config *config;
        Runsc runsc;    /* the runsc driver's state */
        Engine engine;  /* docker/podman's */
        Runc runc;      /* the runc driver's */
};

/* For config's runtime.driver. runsc_root: the runsc driver's --root (created 0700);
 * engine_runtime: the engines' --runtime (NULL: ENGINE_DEFAULT_RUNTIME). */
int capsule_driver_init(CapsuleDriver *d, const Config *config, const char *runsc_root, const char *engine_runtime,
                        TfwError *e);
void capsule_driver_done(CapsuleDriver *d);

/* Every runtime process d starts from now on holds fd while it lives and dies with the thread
 * that started it (runsc_hold). The engines' CLIs only ask their daemon, which makes the
 * container whether the CLI lives or not: nothing is held there. */
void capsule_driver_hold(CapsuleDriver *d, int fd);

/* The table of a kind of driver (tests, and what a config names before any init). */
const CapsuleDriverOps *capsule_driver_ops(RuntimeDriver kind);

/* result.json's, the audit record's and the environment digest's "isolation" (contract section
 * 7): {"engine": NAME, "kernel": "gvisor"|"host", "walls": [...]}. NULL on ENOMEM. */
json_t *capsule_driver_isolation(const CapsuleDriver *d);

/* doctor's "runtime" line for a runtime the worker runs itself (runsc, runc): bin present and
 * executable, and `bin --version` answering within timeout; config_key names the setting that
 * chose bin (NULL: found on PATH). Returns what it reported. */
bool capsule_check_runtime_binary(RuntimeDriver kind, const char *bin, const char *config_key, usec_t timeout,
                                  CapsuleCheckReport report, void *userdata);

/* "platform systrap" (runsc) or the engine's name: what a doctor line names. */
void capsule_driver_label(const CapsuleDriver *d, char *buf, size_t size);
