/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "capsule/id.h"
#include "capsule/init-path.h"
#include "capsule/oci-spec.h"
#include "capsule/seccomp-profile.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "common/sha256.h"
#include "exec/exec.h"

/* The artifact parser drops to nobody. */
#define ARTIFACT_PARSER_UID 65534
#define ARTIFACT_PARSER_GID 65534

/* ---- cancellation ------------------------------------------------------------------------ */

void exec_cancel_init(ExecCancel *c) {
        *c = (ExecCancel){0};
        pthread_mutex_init(&c->lock, NULL);
}

void exec_cancel_destroy(ExecCancel *c) {
        pthread_mutex_destroy(&c->lock);
}

void exec_cancel(ExecCancel *c) {
        pthread_mutex_lock(&c->lock);
        c->cancelled = true;
        /* Killing the container makes `runsc run` (or the engine's `run`) return; capsule/job.c
         * then cleans up as after any other ending. */
        if (c->driver && c->cid[0])
                c->driver->ops->cancel(c->driver, c->cid);
        pthread_mutex_unlock(&c->lock);
}

void exec_cancel_reset(ExecCancel *c) {
        pthread_mutex_lock(&c->lock);
        c->cancelled = false;
        c->driver = NULL;
        c->cid[0] = 0;
        pthread_mutex_unlock(&c->lock);
}

bool exec_cancelled(ExecCancel *c) {
        pthread_mutex_lock(&c->lock);
        bool r = c->cancelled;
        pthread_mutex_unlock(&c->lock);
        return r;
}

int exec_cancel_teardown(ExecCancel *c, usec_t lock_bound, TfwError *e) {
        struct timespec ts;
        int r = 0;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t) (lock_bound / USEC_PER_SEC);
        /* The lane's heartbeat may be in the middle of the same teardown: bounded. */
        if (pthread_mutex_timedlock(&c->lock, &ts) != 0)
                return tfw_error(e, ETIMEDOUT, "teardown", "cannot end its capsule: the lane does not answer");
        c->cancelled = true;
        if (c->driver && c->cid[0])
                r = c->driver->ops->teardown(c->driver, c->cid, 0, NULL, e);
        pthread_mutex_unlock(&c->lock);
        return r;
}

/* Register the container about to start; false when the caller cancelled first. */
static bool cancel_register(ExecCancel *c, const CapsuleDriver *d, const char *cid) {
        if (!c)
                return true;
        pthread_mutex_lock(&c->lock);
        bool go = !c->cancelled;
        if (go) {
                c->driver = d;
                snprintf(c->cid, sizeof(c->cid), "%s", cid);
        }
        pthread_mutex_unlock(&c->lock);
        return go;
}

static void cancel_unregister(ExecCancel *c) {
        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        c->driver = NULL;
        c->cid[0] = 0;
        pthread_mutex_unlock(&c->lock);
}

/* ---- the result -------------------------------------------------------------------------- */

static const char *const outcome_names[] = {
        [EXEC_RAN] = "ran",
        [EXEC_EXEC_FAILED] = "exec_failed",
        [EXEC_WORKER_FAULT] = "worker_fault",
        [EXEC_REFUSED] = "refused",
        [EXEC_CANCELLED] = "cancelled",
};

const char *exec_outcome_to_string(ExecOutcome o) {
        return (unsigned) o < ELEMENTSOF(outcome_names) ? outcome_names[o] : NULL;
}

static void set_message(ExecResult *r, const char *fmt, ...) _printf_(2, 3);
static void set_message(ExecResult *r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->message, sizeof(r->message), fmt, ap);
        va_end(ap);
}

static void add_limit(ExecResult *r, const char *name, uint64_t value, const char *text, const char *enforced) {
        if (r->n_limits < EXEC_LIMITS_MAX)
                r->limits[r->n_limits++] = (ExecLimit){name, value, text, enforced};
}

/* Each limit and what holds it (docs/architecture.md has the table with its tests). */
static void record_limits(const ExecPlan *p, ExecResult *r) {
        const ConfigLimits *l = &p->config->limits;
        const char *cg = "cgroup";

        add_limit(r, "timeout_secs", p->timeout_seconds, NULL, "host_timer");
        add_limit(r, "memory", l->memory, NULL, cg);
        add_limit(r, "memory_swap", l->memory_swap, NULL, cg);
        /* The guest's process count is init's RLIMIT_NPROC; the cgroup is a host backstop. */
        add_limit(r, "pids", l->pids, NULL, "rlimit");
        add_limit(r, "cpus", 0, l->cpus, cg);
        add_limit(r, "open_files", l->open_files ? l->open_files : CAPSULE_NOFILE, NULL, "rlimit");
        if (l->file_size)
                add_limit(r, "file_size", l->file_size, NULL, "rlimit");
        /* The host counts the output as it reads it, and the CPU time every
         * CAPSULE_CPU_CHECK_USEC. */
        add_limit(r, "output_bytes", l->max_log_bytes, NULL, "sampled");
        if (p->cpu_seconds)
                add_limit(r, "cpu_secs", p->cpu_seconds, NULL, "sampled");
}

/* The one classification: how a capsule's ending reads for both planes. */
static void classify(ExecResult *r) {
        const CapsuleResult *c = &r->capsule;

        r->error = c->reason;
        snprintf(r->message, sizeof(r->message), "%s", c->message);
        if (c->status == CAPSULE_ERROR)
                r->outcome = EXEC_WORKER_FAULT;
        else if (c->reason && streq(c->reason, "exec_failed"))
                r->outcome = EXEC_EXEC_FAILED;
        else
                r->outcome = EXEC_RAN;
}

/* The narrowing of the capsule into the digest's isolation: the worker's own seccomp profile
 * (its sha256: a changed list is a changed environment) and the covered devices; or, for the
 * engines, that the engine's spec decides. */
static int add_narrowing(json_t *iso, const CapsuleDriver *d) {
        if (!d->ops->own_seccomp)
                return json_object_set_new(iso, "seccomp", json_string("engine"));
        _cleanup_(json_decrefp) json_t *profile = capsule_seccomp_json();
        _cleanup_free_ char *c = profile ? json_dumps_canonical(profile) : NULL;
        char hex[SHA256_HEX_SIZE], v[8 + SHA256_HEX_SIZE];
        if (!c || sha256_buffer_hex(c, strlen(c), hex) < 0)
                return -ENOMEM;
        snprintf(v, sizeof(v), "sha256:%s", hex);
        if (json_object_set_new(iso, "seccomp", json_string(v)) < 0 ||
            json_object_set_new(iso, "devices_covered", json_pack("[s, s]", CAPSULE_DEV_FUSE_PATH, CAPSULE_DEV_NET_PATH)) < 0)
                return -ENOMEM;
        return 0;
}

int exec_plan_digest(const ExecPlan *p, char out[static ENV_DIGEST_SIZE]) {
        _cleanup_(json_decrefp) json_t *desc =
                env_description(p->config, p->timeout_seconds, p->config->limits.max_log_bytes, p->cpu_seconds,
                                p->extra_env, p->runtime_version, p->driver->ops->cgroup_description);
        if (!desc)
                return -ENOMEM;
        /* The validation plane's constant variables (the check's name is the policy's, so only
         * its presence), and the per-file and open-file rlimits. */
        json_t *vars = json_object_get(desc, "env"), *lim = json_object_get(desc, "limits");
        if (p->check && (json_array_append_new(vars, json_string(CAPSULE_ENV_CI)) < 0 ||
                         json_array_append_new(vars, json_string("TENTAFLAKE_CHECK=<check>")) < 0))
                return -ENOMEM;
        const ConfigLimits *l = &p->config->limits;
        if (json_object_set_new(lim, "open_files", json_integer((json_int_t) (l->open_files ? l->open_files : CAPSULE_NOFILE))) < 0 ||
            json_object_set_new(lim, "file_size", l->file_size ? json_integer((json_int_t) l->file_size) : json_null()) < 0)
                return -ENOMEM;
        if (add_narrowing(json_object_get(desc, "isolation"), p->driver) < 0)
                return -ENOMEM;
        return env_digest(desc, out);
}

static bool plan_is_valid(const ExecPlan *p) {
        return p && p->config && p->driver && p->driver->ops && (!p->workspace != !p->tree_dir) &&
               p->scratch_fd >= 0 && p->scratch_path && p->job_id && capsule_job_id_is_valid(p->job_id) &&
               p->argv && p->argv[0] && p->timeout_seconds > 0;
}

/* ---- the input: the workspace streamed into the capsule ---------------------------------- */

typedef struct StreamInput {
        const char *workspace;
        SnapshotLimits limits;
        SnapshotSummary summary;
        TfwError error;
        int r;
        bool done;
} StreamInput;

/* On capsule/job.c's input thread: the walk writes what it reads straight into the capsule's
 * channel; nothing of the workspace is written to the host's disk. */
static int stream_input(void *userdata, int fd) {
        StreamInput *in = userdata;
        in->r = snapshot_stream(in->workspace, fd, &in->limits, &in->summary, &in->error);
        in->done = true;
        return in->r;
}

static bool snapshot_refusal(const TfwError *se) {
        return se->code && (streq(se->code, "snapshot_too_large") || streq(se->code, "snapshot_special_file"));
}

int exec_warm_start(const Config *config, const CapsuleDriver *driver, int scratch_fd, const char *scratch_path,
                    const char *warm_id, const char *tree_dir, const GenLane *lane, CapsuleWarm **ret,
                    TfwError *e) {
        char init_path[PATH_MAX];
        int r = capsule_find_init(init_path, sizeof(init_path), e);
        if (r < 0)
                return r;
        CapsuleWarmParams wp = {
                .config = config,
                .driver = driver,
                .scratch_fd = scratch_fd,
                .scratch_path = scratch_path,
                .warm_id = warm_id,
                .init_path = init_path,
                .snapshot_dir = tree_dir,
                .work_dir = lane && driver->ops->binds_generations ? lane->ro_path : NULL,
        };
        return capsule_warm_start(&wp, ret, e);
}

/* ---- the input: the workspace walked into a generation ------------------------------------ */

/* The workspace into the plan's lane (a refusal of the walk is the outcome: 1 with r->outcome
 * set). 0 with *ret_work_dir the generation to bind; 0 with *ret_work_dir NULL when the store
 * could not take it (r->input_note says why: the workspace is streamed instead). */
static int input_generation(const ExecPlan *p, const SnapshotLimits *limits, ExecResult *r, const char **ret_work_dir) {
        TfwError ge = {0};

        *ret_work_dir = NULL;
        if (!p->workspace || !p->lane || !p->driver->ops->binds_generations)
                return 0;
        int k = gen_lane_update(p->lane, p->store_fd, p->store_lanes, p->workspace, p->config->container_uid,
                                limits, &r->snapshot, &ge);
        if (k >= 0) {
                r->have_snapshot = true;
                *ret_work_dir = p->lane->ro_path;
                return 0;
        }
        if (snapshot_refusal(&ge)) {
                r->outcome = EXEC_REFUSED;
                r->error = ge.code;
                set_message(r, "%s", ge.message);
                return 1;
        }
        if (ge.code && streq(ge.code, "snapshot_workspace")) {
                r->outcome = EXEC_WORKER_FAULT;
                r->error = ge.code;
                set_message(r, "%s", ge.message);
                return 1;
        }
        snprintf(r->input_note, sizeof(r->input_note), "the generation store could not take the workspace (%s: %.900s); it was streamed",
                 ge.code ? ge.code : "generation_store", ge.message);
        return 0;
}

/* capsule/job.h's gate: a cancellation that came before the container existed still ends it. */
static int cancel_gate(void *userdata, bool spawned) {
        ExecCancel *c = userdata;
        int r = 0;

        pthread_mutex_lock(&c->lock);
        if (c->cancelled) {
                if (spawned && c->driver && c->cid[0])
                        c->driver->ops->cancel(c->driver, c->cid);
                r = -ECANCELED;
        }
        pthread_mutex_unlock(&c->lock);
        return r;
}

int exec_run(const ExecPlan *p, ExecResult *ret, TfwError *e) {
        /* Declared before the first goto: the cleanup must never see an uninitialised value. */
        _cleanup_free_ char *cid = NULL;
        char init_path[PATH_MAX];
        StreamInput in = { .r = -EINPROGRESS };
        /* Ours from here: used below, or torn down on the way out. */
        _cleanup_(capsule_warm_freep) CapsuleWarm *warm = p ? p->warm : NULL;
        ExecResult r = {0};
        TfwError se = {0};
        int k;

        if (!plan_is_valid(p))
                return tfw_error(e, EINVAL, "bad_capsule_spec", "invalid execution plan");
        r.started_at = now_realtime();
        record_limits(p, &r);
        if (exec_plan_digest(p, r.environment_digest) < 0)
                r.environment_digest[0] = 0;

        /* 1. The input: a workspace is walked while the capsule boots, its stream read by
         * the capsule's init into /work (docs/snapshot.md); a refusal of the walk is the
         * outcome whatever the capsule did, and the job never starts on an incomplete
         * stream. A prepared tree is mounted. */
        const char *tree = p->tree_dir;
        if (p->workspace)
                in = (StreamInput) {
                        .workspace = p->workspace,
                        .limits = {
                                .max_bytes = p->config->limits.max_snapshot_bytes,
                                .max_entries = p->config->limits.max_snapshot_entries,
                                .group = p->config->container_gid,
                        },
                        .r = -EINPROGRESS,
                };

        const char *work_dir = NULL;
        if (input_generation(p, &in.limits, &r, &work_dir) > 0)
                goto done;
        r.input = work_dir ? "generation" : p->workspace ? "stream" : "tree";

        if (capsule_find_init(init_path, sizeof(init_path), &se) < 0) {
                r.outcome = EXEC_WORKER_FAULT;
                r.error = se.code ? se.code : "capsule_setup";
                set_message(&r, "%s", se.message);
                goto done;
        }

        /* 2-4. The capsule: run, drain log and artifacts, clean up. A warm one only when its
         * walls are the job's and the input can come over its channel. */
        const char *warm_tree = capsule_warm_snapshot_dir(warm);
        bool warm_input_ok = (p->tree_dir ? warm_tree && streq(warm_tree, p->tree_dir) : !warm_tree) &&
                             streq_ptr(capsule_warm_work_dir(warm), work_dir);
        if (warm && (!capsule_warm_fits(warm, p->config) || !warm_input_ok || !p->driver->ops->boots_ahead ||
                     !capsule_warm_alive(warm)))
                warm = (capsule_warm_free(warm), NULL);
        if (warm)
                cid = strdup(capsule_warm_container(warm));
        else if (capsule_container_id(p->config->name, p->job_id, &cid) < 0)
                cid = NULL;
        if (!cid || !cancel_register(p->cancel, p->driver, cid)) {
                r.outcome = EXEC_CANCELLED;
                r.error = "cancelled";
                set_message(&r, "cancelled before the capsule started");
                goto done;
        }
        CapsuleJobParams cp = {
                .config = p->config,
                .driver = p->driver,
                .scratch_fd = p->scratch_fd,
                .scratch_path = p->scratch_path,
                .job_id = p->job_id,
                .argv = p->argv,
                .extra_env = p->extra_env,
                .check = p->check,
                .timeout_seconds = p->timeout_seconds,
                .cpu_seconds = p->cpu_seconds,
                .end_on_log_limit = p->end_on_log_limit,
                .snapshot_dir = tree,
                .work_dir = work_dir,
                .input = p->workspace && !work_dir ? stream_input : NULL,
                .input_userdata = &in,
                .gate = p->cancel ? cancel_gate : NULL,
                .gate_userdata = p->cancel,
                .warm = TAKE_PTR(warm),
                .init_path = init_path,
                .log_fd = p->log_fd,
                .staging_fd = p->artifacts_fd,
                .unpriv_uid = ARTIFACT_PARSER_UID,
                .unpriv_gid = ARTIFACT_PARSER_GID,
        };
        k = capsule_run_job(&cp, &r.capsule, &se);
        cancel_unregister(p->cancel);
        if (k >= 0 && r.capsule.warm_lost) {
                /* The capsule started ahead died before it took the job: nothing of the job ran
                 * and the input was not read, so it runs once in a capsule of its own. */
                snprintf(r.warm_lost, sizeof(r.warm_lost), "%s", r.capsule.message);
                free(cid);
                cid = NULL;
                if (capsule_container_id(p->config->name, p->job_id, &cid) < 0 || !cid ||
                    !cancel_register(p->cancel, p->driver, cid)) {
                        r.outcome = EXEC_CANCELLED;
                        r.error = "cancelled";
                        set_message(&r, "cancelled before the capsule started");
                        goto done;
                }
                cp.warm = NULL;
                r.capsule = (CapsuleResult) {0};
                k = capsule_run_job(&cp, &r.capsule, &se);
                cancel_unregister(p->cancel);
        }
        if (p->workspace && in.done && in.r >= 0) {
                r.have_snapshot = true;
                r.snapshot = in.summary;
        }
        if (p->workspace && in.done && in.r < 0 && snapshot_refusal(&in.error)) {
                /* Never runnable as given; init ran nothing (the stream ended with 'A'). */
                r.outcome = EXEC_REFUSED;
                r.error = in.error.code;
                set_message(&r, "%s", in.error.message);
                goto done;
        }
        if (p->workspace && in.done && in.r < 0 &&
            !(in.error.code && streq(in.error.code, "snapshot_stream"))) {
                /* The walk failed on the host (the workspace could not be opened, a read
                 * error): the job did not run, and it is not the job's fault. */
                r.outcome = EXEC_WORKER_FAULT;
                r.error = in.error.code ? in.error.code : "snapshot_io";
                set_message(&r, "%s", in.error.message);
                goto done;
        }
        if (k < 0) {
                r.outcome = EXEC_WORKER_FAULT;
                r.error = se.code ? se.code : "capsule_setup";
                set_message(&r, "%s", se.message);
                goto done;
        }
        r.ran = true;
        r.started_at = r.capsule.started_at;
        r.finished_at = r.capsule.finished_at;
        r.duration_ms = r.capsule.duration_ms;
        r.have_peak_memory = r.capsule.have_peak_memory;
        r.peak_memory_bytes = r.capsule.peak_memory_bytes;
        classify(&r);
        if (p->cancel && exec_cancelled(p->cancel)) {
                r.outcome = EXEC_CANCELLED;
                r.error = "cancelled";
                set_message(&r, "cancelled while it ran");
        }

done:
        if (!r.finished_at)
                r.finished_at = now_realtime();
        *ret = r;
        return 0;
}
