/* SPDX-License-Identifier: MIT */
/* One job, end to end, in a disposable runsc capsule (contract section 6 steps 2 to 4):
 * cgroup, bundle, `runsc run`, the log and artifact channels drained concurrently, the
 * wall-clock timeout, the status of contract section 7, and removal of everything after
 * every ending. The snapshot is the caller's (made before, removed after). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "artifacts/import.h"
#include "capsule/cgroup.h"
#include "capsule/channel.h"
#include "capsule/docker.h"
#include "capsule/driver.h"
#include "capsule/egress.h"
#include "capsule/runsc.h"
#include "capsule/teardown.h"
#include "capsule/walls.h"
#include "common/error.h"
#include "common/process.h"
#include "common/time-util.h"
#include "parser/config.h"

typedef enum CapsuleStatus {
        CAPSULE_SUCCEEDED, /* exit 0 */
        CAPSULE_FAILED,    /* non-zero exit */
        CAPSULE_TIMED_OUT, /* the wall clock ran out; the capsule was killed */
        CAPSULE_KILLED,    /* a signal, the memory limit or the pids limit */
        CAPSULE_ERROR,     /* the worker or the runtime could not run it; the job is not blamed */
        _CAPSULE_STATUS_MAX,
} CapsuleStatus;

const char *capsule_status_to_string(CapsuleStatus s); /* the words of contract section 7 */

/* How often the CPU time of a capsule with a cpu_seconds limit is read: the limit can be
 * overrun by this much wall time times the CPUs it may use. */
#define CAPSULE_CPU_CHECK_USEC (200 * USEC_PER_MSEC)
/* How long the CPU time may stay unreadable (an engine's container not running yet) before
 * the capsule is ended as an error rather than left without its limit. */
#define CAPSULE_CPU_UNREADABLE_USEC (10 * USEC_PER_SEC)
/* How often a running job's output so far is written to job.log (kept if the worker dies). */
#define CAPSULE_LOG_FLUSH_USEC (2 * USEC_PER_SEC)
/* The input channel's pipe buffer for a streamed workspace (fs.pipe-max-size's default). */
#define CAPSULE_INPUT_PIPE_SIZE (1024 * 1024)
/* The log channel's pipe: init relays the job's output in writes of up to this size. */
#define CAPSULE_LOG_PIPE_SIZE (1024 * 1024)

typedef struct CapsuleJobParams {
        const Config *config;
        const CapsuleDriver *driver; /* runsc, docker or podman (capsule/driver.h) */
        int scratch_fd;           /* private directory for the bundle */
        const char *scratch_path; /* its absolute path */
        const char *job_id;
        char *const *argv;        /* NULL-terminated */
        char *const *extra_env;   /* NAME=VALUE after the constant environment (capsule/env.h) */
        const char *check;        /* validation plane: CI=true and TENTAFLAKE_CHECK=<check> */
        const char *cwd;          /* the job starts in /work/<cwd> (relative, no "."/".."
                                   * component, 1..CAPSULE_CWD_MAX bytes); NULL: /work */
        uint64_t timeout_seconds;
        uint64_t cpu_seconds;     /* CPU time of the capsule's cgroup (job and sandbox kernel),
                                   * checked every CAPSULE_CPU_CHECK_USEC; 0: no such limit */
        bool end_on_log_limit;    /* output beyond limits.max_log_bytes ends the job (killed,
                                   * "output_limit"); false: the log is only cut */
        const char *snapshot_dir; /* absolute; mounted read-only at /snapshot; NULL with input */
        /* Or a generation (snapshot/gen-store.h: a host read-only bind mount, absolute) bound at
         * /work under the sandbox's overlay: the job's writes stay in the capsule's memory
         * (drivers with binds_generations). Exactly one of snapshot_dir, work_dir, input. */
        const char *work_dir;
        /* Or the input streamed over the capsule's stdin after the secret (capsule/protocol.h):
         * called on a thread of its own (every signal blocked) once the capsule is started,
         * with the write end of the channel, which it must not close; it returns when it has
         * written everything or the write failed (EPIPE: the capsule stopped reading). The
         * channel is closed after it returns; capsule_run_job() joins it before returning,
         * and once the capsule is gone and 5 s have passed, makes the channel non-blocking and
         * wakes a write sleeping on a full pipe (a reader outlived the capsule): the next
         * write into a full pipe then fails with EAGAIN. */
        int (*input)(void *userdata, int fd);
        void *input_userdata;
        /* The caller's cancellation, asked right before a cold capsule is spawned (spawned
         * false: a negative errno refuses to start it) and right after, or when a warm one is
         * taken over (true: the callee ends it when the caller cancelled meanwhile). Closes the
         * window where a cancellation finds no container yet and the run goes on to start one.
         * With spawned, front_pidfd is the pidfd of the runtime's front process (-1: none): the
         * caller may keep a copy (F_DUPFD_CLOEXEC) to kill it by its pid when it cancels later,
         * before it is runsc and names its container. NULL: none. */
        int (*gate)(void *userdata, bool spawned, int front_pidfd);
        void *gate_userdata;
        /* A capsule started ahead (capsule_warm_start) to run this job in; consumed: it is
         * gone when capsule_run_job() returns, whatever happened. Its limits must be the
         * job's (capsule_warm_fits). NULL: a capsule is started for the job. */
        struct CapsuleWarm *warm;
        /* The engine's record of the ended container (its state and root; every process of it
         * is gone, its cgroup and bundle too) is left for capsule_remove_record(), named in
         * CapsuleResult.record: a caller that publishes first does not wait for `runc delete`
         * (docs/performance.md, "A request's fixed cost"). false: removed here. */
        bool defer_record;
        const char *init_path;    /* absolute path of tentaflake-capsule-init */
        int log_fd;               /* the bounded job.log is written here (rewritten from its
                                   * start every CAPSULE_LOG_FLUSH_USEC while the job runs, and
                                   * at its end); -1: not kept */
        int live_fd;              /* the live log (capsule/log-live.h): job.log's head, appended
                                   * as the job writes it; 0..2: none */
        int staging_fd;           /* empty directory receiving the artifacts; -1: discarded */
        /* With network.allow in config: the proxy's records of the job's connections, checked and
         * written here one JSON object a line when the capsule has ended (capsule/egress.h);
         * -1: only counted (CapsuleResult.egress). */
        int egress_log_fd;
        /* The build cache (docs/cache.md; with work_dir only): cache_paths (relative to /work,
         * normalised, NULL-terminated) are the overlays init mounts over version cache_version
         * of cache_dir (absolute: the store's versions, a read-only bind mount on the host);
         * what the job changed there comes back with the cache profile of the importer into
         * cache_staging_fd (an empty private directory), bounded by cache_max_bytes / _entries.
         * NULL: no cache. */
        char *const *cache_paths;
        const char *cache_dir;
        uint64_t cache_version;
        int cache_staging_fd;
        uint64_t cache_max_bytes, cache_max_entries;
        /* The job's changes under /work (with work_dir only; docs/capsule.md, "Changes"): init
         * reads them from the job's layer and sends them with the changes' list; they come back
         * into changes_staging_fd (an empty directory) with the artifacts' rules, bounded by
         * changes_max_bytes / _entries. Taken only above the standard fds and with entries > 0:
         * a caller that leaves both 0 gets none. */
        int changes_staging_fd;
        uint64_t changes_max_bytes, changes_max_entries;
        uid_t unpriv_uid;         /* the artifact parser drops to this uid/gid */
        gid_t unpriv_gid;
} CapsuleJobParams;

typedef struct CapsuleResult {
        CapsuleStatus status;
        int exit_code;       /* -1 when there is none (killed, timed out, error) */
        int signal;          /* 0 when none */
        const char *reason;  /* stable word: NULL, "signal", "memory_limit", "pids_limit",
                              * "timeout", "runtime_failed", "snapshot_copy", "init_failed",
                              * "capsule_setup", "image_missing", "image_refused",
                              * "output_limit",
                              * "cpu_limit" */
        char message[1024];  /* one line; empty for succeeded/failed */

        usec_t started_at;   /* realtime */
        usec_t finished_at;
        uint64_t duration_ms;
        /* Where capsule_run_job's time went (monotonic): the capsule booted or taken over and
         * the job given; the job run until the capsule's streams and its front process ended;
         * the teardown, the importers' verdicts and job.log. */
        usec_t setup_usec, run_usec, end_usec;

        uint64_t log_bytes;  /* bytes the job wrote (before the cap) */
        uint64_t log_file_bytes;
        bool log_truncated;

        bool artifacts_ok;   /* false: no artifacts were kept; see artifacts_error */
        ArtifactSummary artifacts;
        const char *artifacts_error_code;
        char artifacts_error[1024];
        uint64_t artifact_junk_bytes; /* what the job wrote onto the artifact channel */

        bool cache_whole;    /* the cache came back whole, init vouched for it and the job ended
                              * by itself (succeeded or failed): the take-in may be kept */
        ArtifactSummary cache;
        const char *cache_error_code; /* why not (with CapsuleJobParams.cache_paths) */
        char cache_error[1024];

        /* With CapsuleJobParams.changes_staging_fd: whether the changes' stream was imported
         * whole (the list inside says whether it holds every change), or why not. */
        bool changes_imported;
        ArtifactSummary changes;
        const char *changes_error_code;
        char changes_error[1024];

        EgressSummary egress;  /* the job's connections through its proxy (enabled: it had one) */
        Walls walls;           /* every wall the job met (capsule/walls.h), from the worker's own
                                * sources only (capsule_walls_collect) */
        Walls seccomp_walls;   /* what the seccomp listener counted (capsule/seccomp-listen.h):
                                * the syscall and network walls of a driver on the host kernel */

        CgroupEvents events;
        uint64_t peak_memory_bytes; /* the job cgroup's high-water mark (runsc driver) */
        bool have_peak_memory;
        int runsc_status;    /* wait status of `runsc run`, -1 when it did not run */
        bool warm_lost;      /* CapsuleJobParams.warm had died before its init took the job
                              * (reason "warm_lost"): no job process ever existed, the input
                              * was not read, and the job may be run again cold */
        char record[256];    /* with CapsuleJobParams.defer_record: the container whose
                              * engine's record is left for capsule_remove_record(); "": none */
} CapsuleResult;

/* Run the job. Returns 0 with *ret filled whatever the job did (its status says how it
 * ended, including runtime failures as CAPSULE_ERROR); a negative errno only for invalid
 * parameters. Security contract: the capsule gets only the walls of capsule/oci-spec.h; runsc
 * gets only its three pipes; nothing from the artifact channel before init's token reaches
 * the importer, and only a trailer carrying the log token decides the status; the container's
 * processes, its cgroup and its bundle are gone when this returns, and the engine's record of
 * it too unless p->defer_record. Blocks SIGPIPE in the calling thread
 * while it runs. */
int capsule_run_job(const CapsuleJobParams *p, CapsuleResult *ret, TfwError *e);

/* The engine's record of a container that ended (CapsuleResult.record), removed; cid emptied.
 * What cannot be removed is left for the next start's cleanup, as at the end of any job. */
void capsule_remove_record(const CapsuleDriver *d, char *cid);

/* ---- capsules started ahead of their job (runtime.warm_seconds; threat 12) -------------- */

typedef struct CapsuleWarm CapsuleWarm;

typedef struct CapsuleWarmParams {
        const Config *config;     /* the walls: the default limits of this worker */
        const CapsuleDriver *driver; /* runsc only (a driver that makes its own cgroup) */
        int scratch_fd;           /* private directory for the bundle */
        const char *scratch_path;
        const char *warm_id;      /* capsule_job_id_is_valid(): the container is tfw-<name>-<warm_id> */
        const char *init_path;
        const char *snapshot_dir; /* for a prepared tree: this (private, still empty) directory
                                   * is bound read-only at /snapshot now and filled before the
                                   * job is given (the job's snapshot_dir must be it); NULL:
                                   * the job's input is streamed */
        const char *work_dir;     /* or a generation's lane, bound at /work now and changed into
                                   * the job's generation before the job is given (the job's
                                   * work_dir must be it) */
        /* With work_dir: the build cache's versions, bound now (the job's must be the same, or
         * NULL for both). */
        char *const *cache_paths;
        const char *cache_dir;
} CapsuleWarmParams;

/* Boot a capsule with every wall of config in place (cgroup, spec, mounts, channels, the
 * secret), whose init then waits for its job record (capsule/protocol.h). The calling process
 * must be the one that later runs its job (runsc is its child). */
int capsule_warm_start(const CapsuleWarmParams *p, CapsuleWarm **ret, TfwError *e);
/* Teardowns of an unused capsule started ahead: a failed one is tried once more. */
#define CAPSULE_WARM_TEARDOWN_TRIES 2
/* The bound on ending one (capsule_warm_end): its front process reaped after SIGKILL, the
 * teardowns, its cgroup emptied and removed, `runsc delete` (runsc_delete_force's 30 s), its
 * egress proxy reaped after SIGKILL. */
#define CAPSULE_WARM_END_MAX_USEC                                                                  \
        (2 * PROCESS_REAP_AFTER_KILL_USEC + CAPSULE_WARM_TEARDOWN_TRIES * CAPSULE_TEARDOWN_MAX_USEC + \
         CAPSULE_TEARDOWN_CGROUP_USEC + 30 * USEC_PER_SEC)
/* End an unused one and free it, every step bounded in time (threat 13; at most
 * CAPSULE_WARM_END_MAX_USEC): its front process killed by its pid and reaped, the container torn
 * down (capsule/teardown.h; a failed teardown is tried once more), its cgroup, runsc's record and
 * its bundle removed. Returns 0, or a negative errno with e naming the container and what could
 * not be ended or removed: that is left for the start-up cleanup (capsule_cleanup_stale), never
 * waited for. NULL is fine. */
int capsule_warm_end(CapsuleWarm *w, TfwError *e);
/* The same, for a caller with nobody to tell (a cleanup path). */
void capsule_warm_free(CapsuleWarm *w);
static inline void capsule_warm_freep(CapsuleWarm **w) {
        capsule_warm_free(*w);
}
const char *capsule_warm_container(const CapsuleWarm *w); /* its container id */
const char *capsule_warm_id(const CapsuleWarm *w);
const char *capsule_warm_snapshot_dir(const CapsuleWarm *w); /* NULL: streamed input */
const char *capsule_warm_work_dir(const CapsuleWarm *w);     /* NULL: no generation */
bool capsule_warm_binds_cache(const CapsuleWarm *w);       /* booted with the cache's versions */
/* Is its runtime still running (not ended while it waited)? */
bool capsule_warm_alive(CapsuleWarm *w);
/* Were its walls made from the same limits as config's, and with egress exactly when config
 * has network? */
bool capsule_warm_fits(const CapsuleWarm *w, const Config *config);

/* Tests only (no configuration reaches it): replaces the reading of the capsule's CPU time,
 * to show that a limit that cannot be checked ends the job. */
extern int (*capsule_test_cpu_usage_hook)(uint64_t *ret_usec);

/* Start-up only (no job of this worker may be running): remove what a killed predecessor
 * left, that is containers of this worker in the runsc root, bundle directories
 * "tfw-<name>-<id>" in scratch and every cgroup of the worker's group. */
int capsule_cleanup_stale(const Runsc *rt, int scratch_fd, unsigned *ret_removed, TfwError *e);

/* ---- the status decision, separate so it is unit-tested ------------------------------- */

typedef struct CapsuleEnding {
        bool started;               /* runsc was spawned */
        int runsc_status;           /* its wait status */
        bool timed_out;
        bool output_exceeded;       /* ended for end_on_log_limit */
        bool cpu_exceeded;          /* ended for cpu_seconds */
        bool cpu_unreadable;        /* ended: the CPU time could not be read */
        int cpu_error;              /* why (errno) */
        bool have_trailer;
        CapsuleTrailer trailer;
        CgroupEvents events;
        const char *runsc_error;    /* last message of runsc's log, may be "" */
        const char *runtime;        /* the engine's process, named in a failure (the driver's
                                     * name); NULL: "runsc" */
        uint64_t timeout_seconds;
        uint64_t output_bytes;      /* limits.max_log_bytes */
        uint64_t cpu_seconds;
        uint64_t memory;
        uint64_t pids;
        const char *argv0;
        const char *cwd;            /* the job's, relative to /work; NULL: /work */
} CapsuleEnding;

void capsule_classify(const CapsuleEnding *end, CapsuleResult *r);

/* The walls the job met (capsule/walls.h), into r->walls, once r holds the job's log, artifacts
 * and egress: each from a source of the worker's own (capsule/job-walls.c), one function a
 * source; nothing the job wrote is read. end is NULL when no capsule ran the job. */
void capsule_walls_collect(const CapsuleJobParams *p, const CapsuleEnding *end, CapsuleResult *r);
