/* SPDX-License-Identifier: MIT */
/* The docker and podman drivers (contract section 6, "Drivers"; threat 5): the same job, init,
 * channels and walls as the runsc driver, through the engine's CLI with the engine's runsc
 * runtime. One `ENGINE run -i` per job, its stdin/stdout/stderr being the capsule's three
 * channels (capsule/protocol.h), so capsule/job.c drains it exactly as it drains `runsc run`.
 *
 * The argument list is built by a pure function (engine_run_args) that
 * tests/unit/test-capsule-docker.c asserts flag by flag: walls present, forbidden flags
 * absent, the entrypoint and the image last before the job's argv. Podman's CLI takes the
 * same flags for everything used here. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/time-util.h"
#include "parser/config.h"

/* The label naming the owning worker: start-up cleanup removes containers whose label has this
 * worker's name and no others. Same key as the runsc driver's annotation. */
#define ENGINE_LABEL_WORKER "org.tentaflake.worker"
#define ENGINE_LABEL_JOB "org.tentaflake.job"
#define ENGINE_DEFAULT_RUNTIME "runsc"
#define ENGINE_APPARMOR_PROFILE "docker-default"
/* Bound on the engine's answers we read (ps, inspect, version). */
#define ENGINE_OUTPUT_MAX (1U << 20)

typedef struct Engine {
        RuntimeDriver driver; /* DRIVER_DOCKER or DRIVER_PODMAN */
        char *binary;         /* absolute path of the CLI */
        char *runtime;        /* --runtime: the engine's name for runsc */
        char *worker_name;
        char *image;          /* config runtime.image: sha256:<hex> or name@sha256:<hex> */
        bool apparmor;        /* the host has AppArmor: select the engine's profile explicitly */
        usec_t command_timeout; /* each housekeeping command (config engine_timeout_seconds) */
} Engine;

/* Resolve the CLI ("docker" or "podman" on PATH; /usr/bin first). runtime NULL:
 * ENGINE_DEFAULT_RUNTIME. Refuses a runsc config (EINVAL). */
int engine_init(Engine *en, const Config *c, const char *runtime, TfwError *e);
void engine_done(Engine *en);

/* Everything one job's `run` is made from. Host paths must be absolute and normalised and
 * contain none of ',' ':' '=' (they are spelled inside --mount values). */
typedef struct EngineRunPlan {
        RuntimeDriver driver;
        const char *runtime;       /* --runtime */
        const char *name;          /* container name "tfw-<worker>-<id>" */
        const char *worker_name;   /* the ownership label */
        const char *job_id;
        const char *image;         /* pinned: sha256:<64 hex> or name@sha256:<64 hex> */
        bool apparmor;
        const ConfigLimits *limits;
        uid_t uid;
        gid_t gid;
        const char *snapshot_dir;  /* bound read-only at /snapshot; NULL: none (streamed input) */
        const char *init_path;     /* bound read-only at CAPSULE_INIT_PATH */
        const char *passwd_path;   /* bound read-only over /etc/passwd, /etc/group */
        const char *group_path;
        char *const *argv;         /* the job's argv, NULL-terminated, non-empty */
        char *const *extra_env;    /* NAME=VALUE after the constant environment; NULL: none */
        const char *check;         /* the validation plane's check: CI=true, TENTAFLAKE_CHECK */
} EngineRunPlan;

/* The arguments after the engine binary ("run", ...), NULL-terminated, caller frees with
 * strv_free. Accepts a plan as described above; refuses (EINVAL) a
 * missing field, an image that is not pinned by digest, a path that is relative, not
 * normalised or holds a separator of --mount's syntax, uid or gid 0. Guarantees: the
 * container is named and labelled for this worker; runs with `--runtime`, `--network none`,
 * the job user with no supplementary group, `--cap-drop ALL`, no-new-privileges (and the
 * engine's default seccomp profile, never `unconfined`), a read-only root, bounded nosuid
 * nodev tmpfs on /work and /tmp, memory = memory+swap limits, cpus, the host pids backstop
 * and the guest process rlimit, `--log-driver none`, `--pull never`, only read-only bind
 * mounts, a constant environment given by value (no credential exists to pass); never
 * --privileged, a host namespace, a device, an added capability or the engine's socket.
 * "--entrypoint CAPSULE_INIT_PATH IMAGE --" come last, then the job's argv, so nothing of
 * the job is ever read as an engine flag. */
int engine_run_args(const EngineRunPlan *plan, char ***ret);

/* Is the image pinned by digest (the two forms of contract section 2)? */
bool engine_image_is_pinned(const char *image);

/* Spawn `ENGINE run ...` (args from engine_run_args). Security contract: the child holds
 * exactly in_fd, out_fd, err_fd as 0, 1, 2 and nothing else, default signal state, its own
 * session, and an environment of PATH only: no credential of the worker reaches the CLI. It
 * runs in workdir (a private directory of the job: podman's conmon writes files there), or
 * the caller's directory when NULL. */
int engine_spawn(const Engine *en, char *const *args, int in_fd, int out_fd, int err_fd,
                 const char *workdir, pid_t *ret_pid);

/* Run `ENGINE ARGS...` to its end (killed after timeout), stdout captured into *ret_out
 * (bounded by ENGINE_OUTPUT_MAX; NULL: discarded), stderr discarded. Returns the wait status
 * in *ret_status. */
int engine_command(const Engine *en, const char *const *args, usec_t timeout, int *ret_status,
                   char **ret_out);

/* The engine answers: its server version into *ret (caller frees). */
int engine_server_version(const Engine *en, char **ret, TfwError *e);
/* The configured image is in the local store (never pulled). Error code "image_missing"
 * naming the image when it is not. */
int engine_image_check(const Engine *en, TfwError *e);
/* docker: the engine's registration of the runtime (its entry of `docker info .Runtimes`:
 * path and runtimeArgs) as compact JSON into *ret (caller frees), 1; -ENOENT when it has none.
 * podman: 0 and *ret NULL (podman does not list it). */
int engine_runtime_entry(const Engine *en, char **ret);
/* Does the engine know the runtime (docker info .Runtimes)? 1 yes, 0 no. */
int engine_runtime_known(const Engine *en);
/* `ENGINE kill NAME` (bounded). */
int engine_kill(const Engine *en, const char *name);
/* `ENGINE rm -f -v NAME`; a container that does not exist is success. */
int engine_remove(const Engine *en, const char *name);
/* The host pid of the container's sandbox (State.Pid) and the container's full id (lowercase
 * hex): -ESRCH while it is not running, -ENOENT while it does not exist. Bounded by
 * ENGINE_INSPECT_PID_TIMEOUT_USEC (asked from a job's event loop). */
#define ENGINE_ID_MAX 128
#define ENGINE_INSPECT_PID_TIMEOUT_USEC (2 * USEC_PER_SEC)
int engine_container_pid(const Engine *en, const char *name, pid_t *ret_pid, char ret_id[static ENGINE_ID_MAX + 1]);
/* Did the kernel's OOM killer end the container (State.OOMKilled)? 1, 0, or negative. */
int engine_oom_killed(const Engine *en, const char *name);
/* Start-up cleanup: every container labelled ENGINE_LABEL_WORKER=<this worker> is removed,
 * running or not; containers of other workers or without the label are never touched. */
int engine_cleanup_stale(const Engine *en, unsigned *ret_removed, TfwError *e);
/* The ids of this worker's containers, one per line (for tests and doctor). Caller frees. */
int engine_list_owned(const Engine *en, char **ret);

/* Build the run arguments for one job (engine_run_args with this engine's runtime, image,
 * AppArmor choice and the config's limits and identity) and spawn them (engine_spawn). */
int engine_spawn_run(const Engine *en, const Config *c, const char *name, const char *job_id,
                     char *const *argv, char *const *extra_env, const char *check, const char *snapshot_dir,
                     const char *init_path,
                     const char *passwd_path, const char *group_path, const char *workdir, int in_fd,
                     int out_fd, int err_fd, pid_t *ret_pid);
