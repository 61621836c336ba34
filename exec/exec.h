/* SPDX-License-Identifier: MIT */
/* The one execution core of both planes (contract sections 6 and 8): a plan in, a result out.
 *
 *   input tree ──► snapshot (a workspace, fd-relative walk) or a prepared tree (the validation
 *                  plane's verified checkout, doctor's probe directory)
 *              ──► capsule (capsule/job.c through the driver table of capsule/driver.h)
 *              ──► bounded import of log and artifacts
 *              ──► result: the job's outcome, or a worker fault, or a permanent refusal;
 *                  times, peak memory, how each limit was enforced, the environment digest
 *
 * orchestrator/ (the inbox plane), validation/ (serve) and doctor call exec_run(); nothing
 * else starts a capsule. Signing stays with each plane: the statements differ (an inbox
 * result, a validation verdict), the facts they sign come from here. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "capsule/driver.h"
#include "capsule/job.h"
#include "exec/changeset.h"
#include "common/error.h"
#include "exec/envdigest.h"
#include "parser/config.h"
#include "snapshot/build-cache.h"
#include "snapshot/gen-store.h"
#include "snapshot/snapshot.h"

/* The caller's cancellation (a lost lease, a stale candidate, a shutdown): exec_cancel() may
 * be called from any thread at any time; the capsule is then ended at once, or never started
 * when it has not been yet. */
typedef struct ExecCancel {
        pthread_mutex_t lock;
        bool cancelled;
        const CapsuleDriver *driver; /* the running container, while there is one */
        char cid[256];
        int front_pidfd;             /* ... and its runtime's front process (-1: not known) */
} ExecCancel;

void exec_cancel_init(ExecCancel *c);
void exec_cancel_destroy(ExecCancel *c);
/* Idempotent; kills the running container (bounded driver command), and its runtime's front
 * process by its pid (which may not have become the runtime yet, and then names nothing). */
void exec_cancel(ExecCancel *c);
/* Forget an earlier cancellation: the next plan may run. */
void exec_cancel_reset(ExecCancel *c);
bool exec_cancelled(ExecCancel *c);
/* The caller stops waiting for the run (a shutdown's grace is over): the running container, if
 * any, is torn down from here (capsule/teardown.h), the lock taken within lock_bound. */
int exec_cancel_teardown(ExecCancel *c, usec_t lock_bound, TfwError *e);

typedef struct ExecPlan {
        const Config *config;           /* the job's walls: limits already the job's */
        const CapsuleDriver *driver;
        const char *runtime_version;    /* the driver's version, asked once per worker */
        /* The input tree, exactly one of: */
        const char *workspace;          /* a workspace to snapshot (threat 1) */
        const char *tree_dir;           /* a prepared tree (absolute), mounted as it is */
        /* With a workspace: a lane of the generation store (snapshot/gen-store.h) this process
         * holds. The workspace is walked into its generation, which is bound at /work
         * (drivers with binds_generations; docs/snapshot.md, "Generations"); when the store
         * cannot take it, the workspace is streamed as without one (ExecResult.input_note says
         * why). NULL: streamed. A warm capsule must have been started on this lane. */
        GenLane *lane;
        /* With a lane: the workspace's watch (snapshot/dirty-set.h), or NULL: every directory of
         * the workspace is read. */
        struct DirtyView *watch;
        int store_fd;                   /* the store, for collecting unheld lanes when full */
        unsigned store_lanes;
        /* The controller's build cache (snapshot/build-cache.h; docs/cache.md), or NULL when none
         * is configured. With use_cache (an inbox job) and a generation, the job sees it at its
         * paths under /work (the workspace's entries there are not read), and with keep_cache
         * (of class local-reversible) what it leaves there replaces it; without use_cache, the
         * job runs as if there were none. */
        BuildCache *cache;
        bool use_cache;
        bool keep_cache;
        int scratch_fd;                 /* a private directory of this job (it is emptied) */
        const char *scratch_path;       /* its absolute path */
        const char *job_id;             /* capsule_job_id_is_valid() */
        char *const *argv;              /* NULL-terminated, non-empty */
        const char *cwd;                /* the job starts in /work/<cwd> (the request's, checked
                                         * by parser/request.h; init enters it without following
                                         * a link, and one the snapshot lacks is EXEC_REFUSED,
                                         * "cwd_not_found"); NULL: /work */
        char *const *extra_env;         /* the caller's variables (capsule/env.h), or NULL */
        const char *check;              /* the validation plane's check: CI=true and
                                         * TENTAFLAKE_CHECK=<check> join the constant
                                         * environment; NULL: the inbox plane */
        uint64_t timeout_seconds;
        uint64_t cpu_seconds;           /* 0: no CPU-time limit */
        bool end_on_log_limit;          /* output past the cap ends the job (validation plane) */
        int log_fd;                     /* job.log; -1: not kept */
        int live_fd;                    /* the live log (capsule/log-live.h); 0..2: none */
        /* With network.allow in config: the job's connections, one checked JSON object a line
         * (capsule/egress.h), written here when the capsule has ended; 0..2: not kept (the
         * counts are in ExecResult.capsule.egress either way). */
        int egress_log_fd;
        int artifacts_fd;               /* empty directory for /work/artifacts; -1: not wanted */
        /* The job's changeset (exec/changeset.h; a generation only): an empty directory that
         * receives the files the job wrote, and its bounds; 0 entries or a standard fd: none. */
        int changes_fd;
        uint64_t changes_max_bytes, changes_max_entries;
        ExecCancel *cancel;             /* NULL: not cancellable */
        /* A capsule started ahead (exec_warm_start) by this process; consumed by exec_run
         * whatever happens. Used when its walls are the plan's (the same limits, the runsc
         * driver), otherwise torn down and the job starts cold. NULL: cold. */
        CapsuleWarm *warm;
        /* The engine's record of the ended capsule left for exec_release_record(), which the
         * caller calls once its result is published (CapsuleJobParams.defer_record). */
        bool defer_record;
} ExecPlan;

/* The one fault classification of both planes. */
typedef enum ExecOutcome {
        EXEC_RAN,          /* the job ran and ended: its own outcome (capsule.status) */
        EXEC_EXEC_FAILED,  /* the capsule could not execute argv[0] (ENOENT, EACCES, ENOEXEC):
                            * inbox: failed, 127/126, error exec_failed; validation: a worker
                            * fault (this worker lacks the toolchain), nothing signed */
        EXEC_WORKER_FAULT, /* the worker or the runtime could not run it; the job is not blamed */
        EXEC_REFUSED,      /* never runnable as given (a snapshot over a ceiling or holding a
                            * special file): inbox: rejected; validation: fail, permanent */
        EXEC_CANCELLED,    /* the caller cancelled it */
} ExecOutcome;

const char *exec_outcome_to_string(ExecOutcome o);

/* How a limit was enforced (contract section 8's words). */
typedef struct ExecLimit {
        const char *name;      /* "timeout_secs", "memory", "memory_swap", "pids", "cpus", ... */
        uint64_t value;        /* 0 with text: see text */
        const char *text;      /* a value that is not a number ("2.0" cpus), or NULL */
        const char *enforced;  /* "cgroup", "rlimit", "host_timer", "sampled" */
} ExecLimit;

#define EXEC_LIMITS_MAX 10

/* The build cache around one job (ExecPlan.cache). */
typedef struct ExecCache {
        bool used;                     /* the job ran with the cache handed out */
        char from[GIT_OID_HEX_SIZE];   /* the cache's tree id it started from ("": none yet) */
        char left[GIT_OID_HEX_SIZE];   /* the cache's tree id after it: the take-in's when kept */
        bool kept;                     /* what the job left replaced the cache */
        uint64_t bytes, entries;       /* of the take-in (kept) */
        uint64_t files_sent, files_unchanged; /* the take-in's files: sent by the capsule, and
                                               * linked from the copy it was handed */
        const char *error;             /* why it was not used or nothing was kept; NULL */
        char message[1024];
        uint64_t hand_out_ms, take_in_ms;
        uint64_t epoch;                /* the cache's clears when it was handed out */
} ExecCache;

/* The job's changeset (ExecPlan.changes_fd). */
typedef struct ExecChanges {
        bool wanted;                   /* asked for, and the job ran on a generation */
        json_t *manifest;              /* changes.json's object when taken (owned: the caller's
                                        * to json_decref); NULL: none */
        ChangesetSummary sum;
        const char *error;             /* why there is none (wanted), or NULL */
        char message[1024];
} ExecChanges;

/* Where exec_run's time went, step by step (monotonic µs; the daemon's "timing" line,
 * docs/performance.md, "A request's fixed cost"). */
typedef struct ExecTiming {
        usec_t digest;        /* the environment digest */
        usec_t input;         /* the walk into the lane, the cache's hand-out */
        usec_t changes;       /* the changeset taken from what the capsule sent */
        usec_t cache_take_in; /* the cache's take-in */
} ExecTiming;

typedef struct ExecResult {
        ExecOutcome outcome;
        const char *error;             /* stable code: the refusal's, the fault's, or the
                                        * capsule's reason (NULL when none) */
        char message[1200];            /* one line; empty when the job simply ended */
        CapsuleResult capsule;         /* valid for EXEC_RAN, EXEC_EXEC_FAILED and the faults
                                        * that came from the capsule */
        bool ran;                      /* a capsule was started */
        usec_t started_at, finished_at;
        uint64_t duration_ms;
        bool have_snapshot;
        SnapshotSummary snapshot;      /* the workspace's snapshot (workspace input) */
        bool have_peak_memory;
        uint64_t peak_memory_bytes;
        ExecLimit limits[EXEC_LIMITS_MAX];
        size_t n_limits;
        char environment_digest[ENV_DIGEST_SIZE];
        char warm_lost[1024];          /* non-empty: ExecPlan.warm died before it took the
                                        * job, or was not used and could not be ended whole
                                        * (capsule_warm_end); the job then ran in a capsule of
                                        * its own (why) */
        const char *input;             /* how the job got its tree: "generation", "stream",
                                        * "tree" (a prepared tree) */
        char input_note[1024];         /* non-empty: ExecPlan.lane could not be used (why) */
        ExecCache cache;
        ExecChanges changes;
        ExecTiming timing;             /* the capsule's own steps: capsule.setup_usec ... */
} ExecResult;

/* Run a plan to its end. Returns 0 with *ret filled whatever happened (its outcome says
 * what); a negative errno only for a plan that is not valid. Guarantees: the snapshot, the
 * container's processes, its cgroup and its bundle are gone when this returns (and the engine's
 * record of it, unless plan->defer_record); the job saw only what the walk read (workspace input)
 * or the prepared tree. */
/* The bounds of a walk of config's workspace: the configuration's, the cache's paths named (left
 * to the cache when exclude_cache), with the workspace's watch or NULL. For a job's walk and the
 * walk made at a worker's start, so that both make the same generation. */
SnapshotLimits exec_walk_limits(const Config *config, BuildCache *cache, bool exclude_cache, struct DirtyView *watch);

int exec_run(const ExecPlan *plan, ExecResult *ret, TfwError *e);

/* With plan->defer_record: the engine's record of the capsule that ran r's job removed (a no-op
 * when there is none). Call it after exec_run whatever happened, once the result is out. */
void exec_release_record(const ExecPlan *plan, ExecResult *r);

/* Start a capsule ahead of its job (runtime.warm_seconds, contract section 6 step 2): every
 * wall of config in place, its init waiting for the job on the authenticated channel. Its
 * bundle goes into scratch (a private directory of its own), its container is
 * tfw-<name>-<warm_id>. tree_dir: for a prepared tree, the (empty, private) directory that
 * is bound at /snapshot now and must hold the tree when the plan runs (ExecPlan.tree_dir is
 * it); NULL: for a workspace. lane: for a workspace walked into that lane's generation (bound at
 * /work now, changed into the job's generation before the job is given); NULL: streamed. cache: with a lane, the build
 * cache's slots are bound too (only a job with use_cache can then use it). Give it to exactly one exec_run() (ExecPlan.warm), or discard
 * it with capsule_warm_free(). */
int exec_warm_start(const Config *config, const CapsuleDriver *driver, int scratch_fd, const char *scratch_path,
                    const char *warm_id, const char *tree_dir, GenLane *lane, BuildCache *cache, CapsuleWarm **ret,
                    TfwError *e);

/* The environment digest the plan would run in (contract section 8): the same function
 * exec_run uses, so a pinned digest can be compared before anything is downloaded. */
int exec_plan_digest(const ExecPlan *plan, char out[static ENV_DIGEST_SIZE]);
