/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "capsule/id.h"
#include "capsule/init-path.h"
#include "capsule/oci-spec.h"
#include "capsule/seccomp-allowlist.h"
#include "capsule/seccomp-profile.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "common/process.h"
#include "common/sha256.h"
#include "common/size.h"
#include "exec/exec.h"

/* The artifact parser drops to nobody. */
#define ARTIFACT_PARSER_UID 65534
#define ARTIFACT_PARSER_GID 65534

/* ---- cancellation ------------------------------------------------------------------------ */

void exec_cancel_init(ExecCancel *c) {
        *c = (ExecCancel){.front_pidfd = -EBADF};
        pthread_mutex_init(&c->lock, NULL);
}

void exec_cancel_destroy(ExecCancel *c) {
        c->front_pidfd = safe_close(c->front_pidfd);
        pthread_mutex_destroy(&c->lock);
}

/* Under c->lock. The front process by its pidfd (a process that ended meanwhile is not
 * signalled, and no other one can be), then the container. */
static void cancel_kill(ExecCancel *c) {
        if (c->front_pidfd >= 0)
                (void) pidfd_signal(c->front_pidfd, SIGKILL);
        /* Killing the container makes `runsc run` (or the engine's `run`) return; capsule/job.c
         * then cleans up as after any other ending. */
        if (c->driver && c->cid[0])
                c->driver->ops->cancel(c->driver, c->cid);
}

void exec_cancel(ExecCancel *c) {
        pthread_mutex_lock(&c->lock);
        c->cancelled = true;
        cancel_kill(c);
        pthread_mutex_unlock(&c->lock);
}

void exec_cancel_reset(ExecCancel *c) {
        pthread_mutex_lock(&c->lock);
        c->cancelled = false;
        c->driver = NULL;
        c->cid[0] = 0;
        c->front_pidfd = safe_close(c->front_pidfd);
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
        if (c->front_pidfd >= 0)
                (void) pidfd_signal(c->front_pidfd, SIGKILL);
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
        c->front_pidfd = safe_close(c->front_pidfd);
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
        if (c->reason && streq(c->reason, "cwd_not_found"))
                r->outcome = EXEC_REFUSED; /* the request's own doing, checked by init */
        else if (c->status == CAPSULE_ERROR)
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
        /* The engine, the kernel the job sees and the walls (contract section 7). */
        _cleanup_(json_decrefp) json_t *named = capsule_driver_isolation(d);
        if (!named || json_object_update(iso, named) < 0)
                return -ENOMEM;
        if (!d->ops->own_seccomp)
                return json_object_set_new(iso, "seccomp", json_string("engine"));
        /* The job's refusals: with the layer, init refuses again what the spec leaves it. On
         * the host's kernel the allowlist (capsule/seccomp-allowlist.h), and runc's /dev. */
        _cleanup_(json_decrefp) json_t *profile =
                d->ops->host_kernel ? capsule_seccomp_allowlist_json(false, true) : capsule_seccomp_json(false);
        _cleanup_free_ char *c = profile ? json_dumps_canonical(profile) : NULL;
        char hex[SHA256_HEX_SIZE], v[8 + SHA256_HEX_SIZE];
        if (!c || sha256_buffer_hex(c, strlen(c), hex) < 0)
                return -ENOMEM;
        snprintf(v, sizeof(v), "sha256:%s", hex);
        if (json_object_set_new(iso, "seccomp", json_string(v)) < 0)
                return -ENOMEM;
        if (d->ops->host_kernel)
                return json_object_set_new(iso, "devices", json_pack("[s, s, s, s, s, s]", "null", "zero", "full",
                                                                     "random", "urandom", "tty")) < 0 ? -ENOMEM : 0;
        if (json_object_set_new(iso, "devices_covered", json_pack("[s, s]", CAPSULE_DEV_FUSE_PATH, CAPSULE_DEV_NET_PATH)) < 0)
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
                    const char *warm_id, const char *tree_dir, GenLane *lane, BuildCache *cache, CapsuleWarm **ret,
                    TfwError *e) {
        char init_path[PATH_MAX];
        int r = capsule_find_init(init_path, sizeof(init_path), e);
        if (r < 0)
                return r;
        bool bound = lane && driver->ops->binds_generations;
        if (bound && cache) {
                /* Init mounts the cache's overlays onto their paths in the generation: they must
                 * be there now. A job whose walk removes one finds this capsule unusable. */
                bool made;
                r = build_cache_prepare_lane(cache, lane, &made, e);
                if (r < 0)
                        return r;
        }
        CapsuleWarmParams wp = {
                .config = config,
                .driver = driver,
                .scratch_fd = scratch_fd,
                .scratch_path = scratch_path,
                .warm_id = warm_id,
                .init_path = init_path,
                .snapshot_dir = tree_dir,
                .work_dir = bound ? lane->ro_path : NULL,
                .cache_paths = bound && cache ? build_cache_paths(cache) : NULL,
                .cache_dir = bound && cache ? build_cache_versions_path(cache) : NULL,
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

/* ---- the build cache -------------------------------------------------------------------- */

static void cache_note(ExecResult *r, const char *code, const char *fmt, ...) _printf_(3, 4);
static void cache_note(ExecResult *r, const char *code, const char *fmt, ...) {
        va_list ap;
        if (r->cache.error)
                return;
        r->cache.error = code;
        va_start(ap, fmt);
        vsnprintf(r->cache.message, sizeof(r->cache.message), fmt, ap);
        va_end(ap);
}

/* Before the capsule: the lane's mount points, the current version pinned, the take-in's
 * staging directory. 1 with r's outcome set when the job cannot run (a cache path blocked by the
 * workspace: refused; the store failing: a worker fault); 0 otherwise, with *ret_made when a
 * mount point had to be made now. */
static int cache_hand_out(const ExecPlan *p, ExecResult *r, int *ret_staging, bool *ret_made, uint64_t *ret_version) {
        BuildCacheState from;
        TfwError ce = {0};
        usec_t t0 = now_monotonic();

        int k = build_cache_prepare_lane(p->cache, p->lane, ret_made, &ce);
        /* The generation as the capsule binds it (its mount points made), copied for a lane
         * that waits for its first, before the hand-out (which may wait for another job's
         * take-in) lets the update lock go. */
        if (k >= 0)
                gen_lane_mirror(p->lane, p->store_fd, p->store_lanes);
        if (k >= 0)
                k = build_cache_hand_out(p->cache, &from, &ce);
        if (k >= 0)
                k = build_cache_take_in_begin(p->cache, p->job_id, ret_staging, &ce);
        if (k < 0) {
                r->outcome = ce.code && streq(ce.code, "cache_path_blocked") ? EXEC_REFUSED : EXEC_WORKER_FAULT;
                r->error = ce.code ? ce.code : "build_cache";
                set_message(r, "%s", ce.message);
                cache_note(r, r->error, "%s", ce.message);
                build_cache_take_in_discard(p->cache, p->job_id);
                return 1;
        }
        *ret_version = from.version;
        r->cache.used = true;
        memcpy(r->cache.from, from.tree, sizeof(from.tree));
        memcpy(r->cache.left, from.tree, sizeof(from.tree));
        r->cache.hand_out_ms = (now_monotonic() - t0) / USEC_PER_MSEC;
        r->cache.epoch = from.epoch;
        return 0;
}

/* The cache's stream names cache path i "<i>/..." (capsule/protocol.h): a message of the
 * importer's says "'<i>/x'"; the reader knows it as "'build/x'". */
static void cache_message_paths(char *msg, size_t size, char *const *paths) {
        char out[sizeof(((ExecCache *) 0)->message)];
        size_t o = 0;
        for (const char *p = msg; *p && o + 1 < sizeof(out);) {
                char *end;
                if (p[0] == '\'' && p[1] >= '0' && p[1] <= '9') {
                        unsigned long i = strtoul(p + 1, &end, 10);
                        size_t n = 0;
                        while (paths[n])
                                n++;
                        if (i < n && (*end == '/' || *end == '\'')) {
                                int k = snprintf(out + o, sizeof(out) - o, "'%s", paths[i]);
                                o = k > 0 ? MIN(o + (size_t) k, sizeof(out) - 1) : o;
                                p = end;
                                continue;
                        }
                }
                out[o++] = *p++;
        }
        out[o] = 0;
        snprintf(msg, size, "%s", out);
}

/* After the capsule: what it left replaces the cache when the capsule vouched for it whole
 * and the job ran to its own end; otherwise the cache stays as it was and the result says why. */
static void cache_take_in(const ExecPlan *p, ExecResult *r) {
        TfwError ce = {0};
        usec_t t0 = now_monotonic();

        if (!p->keep_cache)
                cache_note(r, "cache_read_only", "a job of this class starts from the build cache and keeps nothing of it");
        else if (r->outcome != EXEC_RAN && r->outcome != EXEC_EXEC_FAILED)
                cache_note(r, "cache_job_ended", "the job %s: nothing of the cache is kept",
                           r->outcome == EXEC_CANCELLED ? "was cancelled" : "did not run to its end");
        else if (!r->capsule.cache_whole)
                cache_note(r, r->capsule.cache_error_code ? r->capsule.cache_error_code : "cache_rejected", "%s",
                           r->capsule.cache_error[0] ? r->capsule.cache_error : "the cache did not come back whole");
        if (r->cache.error) {
                cache_message_paths(r->cache.message, sizeof(r->cache.message), build_cache_paths(p->cache));
                build_cache_take_in_discard(p->cache, p->job_id);
        } else {
                BuildCacheState left;
                if (build_cache_take_in_commit(p->cache, p->job_id, r->cache.epoch, &left, &ce) < 0)
                        cache_note(r, ce.code ? ce.code : "build_cache", "%s", ce.message);
                else {
                        r->cache.kept = true;
                        memcpy(r->cache.left, left.tree, sizeof(left.tree));
                        r->cache.bytes = left.bytes;
                        r->cache.entries = left.entries;
                        r->cache.files_unchanged = left.files_unchanged;
                        /* The list of deletions is a file of the stream too. */
                        r->cache.files_sent = r->capsule.cache.files > 0 ? r->capsule.cache.files - 1 : 0;
                }
        }
        r->cache.take_in_ms = (now_monotonic() - t0) / USEC_PER_MSEC;
}

/* capsule/job.h's gate: a cancellation that came before the container existed still ends it;
 * one that comes later kills the front process by its pidfd too (cancel_kill). */
static int cancel_gate(void *userdata, bool spawned, int front_pidfd) {
        ExecCancel *c = userdata;
        int r = 0;

        pthread_mutex_lock(&c->lock);
        if (spawned && front_pidfd >= 0 && c->front_pidfd < 0)
                c->front_pidfd = fcntl(front_pidfd, F_DUPFD_CLOEXEC, 3);
        if (c->front_pidfd < 0)
                c->front_pidfd = -EBADF;
        if (c->cancelled) {
                if (spawned)
                        cancel_kill(c);
                r = -ECANCELED;
        }
        pthread_mutex_unlock(&c->lock);
        return r;
}

/* What the steps of one exec_run share. */
typedef struct ExecRun {
        StreamInput in;
        const char *work_dir;     /* the generation bound at /work, or NULL */
        bool with_cache;          /* the build cache is handed out and taken back */
        bool cache_made;          /* a mount point of the cache had to be made now */
        uint64_t cache_version;   /* the version handed out */
        int cache_staging;
} ExecRun;

static void exec_run_done(ExecRun *x) {
        x->cache_staging = safe_close(x->cache_staging);
}

/* Step 1, the input: a workspace is walked into the plan's lane (or, without one, while the
 * capsule boots, its stream read by the capsule's init into /work: docs/snapshot.md; a refusal
 * of the walk is the outcome whatever the capsule did, and the job never starts on an incomplete
 * stream); a prepared tree is mounted. With the build cache, its paths are left out of the walk
 * and the cache handed out. 1: the outcome is decided (r says it). */
SnapshotLimits exec_walk_limits(const Config *config, BuildCache *cache, bool exclude_cache, struct DirtyView *watch) {
        return (SnapshotLimits) {
                .max_bytes = config->limits.max_snapshot_bytes,
                .max_entries = config->limits.max_snapshot_entries,
                .group = config->container_gid,
                .cache_paths = cache ? build_cache_paths(cache) : NULL,
                .exclude_cache = exclude_cache,
                .watch = watch,
        };
}

static int exec_input(const ExecPlan *p, ExecRun *x, ExecResult *r) {
        if (p->workspace)
                x->in = (StreamInput) {
                        .workspace = p->workspace,
                        /* The cache's paths belong to the cache in a job that uses it. */
                        .limits = exec_walk_limits(p->config, p->cache, p->cache && p->use_cache && p->lane,
                                                   p->lane ? p->watch : NULL),
                        .r = -EINPROGRESS,
                };
        if (input_generation(p, &x->in.limits, r, &x->work_dir) > 0)
                return 1;
        r->input = x->work_dir ? "generation" : p->workspace ? "stream" : "tree";
        x->with_cache = p->cache && p->use_cache && x->work_dir;
        if (p->cache && p->use_cache && !x->work_dir) {
                /* Streamed: there is nothing to mount the cache under; the workspace's own
                 * entries at its paths go in as they are. */
                x->in.limits.exclude_cache = false;
                cache_note(r, "cache_unavailable", "the workspace was not a generation (%s): the job ran without the build cache",
                           r->input_note[0] ? r->input_note : "no lane");
        }
        if (x->with_cache && cache_hand_out(p, r, &x->cache_staging, &x->cache_made, &x->cache_version) > 0)
                return 1;
        /* Without the cache the generation is as the capsule binds it: copied for a lane that
         * waits for its first (with it, cache_hand_out did that). */
        if (x->work_dir && !x->with_cache)
                gen_lane_mirror(p->lane, p->store_fd, p->store_lanes);
        return 0;
}

/* A capsule started ahead, when its walls are the job's and the input can come over its
 * channel; otherwise it goes (a failure to end it said in r->warm_lost) and NULL is returned. */
static CapsuleWarm *exec_warm_fit(const ExecPlan *p, const ExecRun *x, CapsuleWarm *warm, ExecResult *r) {
        const char *warm_tree = capsule_warm_snapshot_dir(warm);
        bool input_ok = (p->tree_dir ? warm_tree && streq(warm_tree, p->tree_dir) : !warm_tree) &&
                        streq_ptr(capsule_warm_work_dir(warm), x->work_dir) &&
                        capsule_warm_binds_cache(warm) == x->with_cache && !x->cache_made;
        if (warm && (!capsule_warm_fits(warm, p->config) || !input_ok || !p->driver->ops->boots_ahead ||
                     !capsule_warm_alive(warm))) {
                TfwError e = {0};
                if (capsule_warm_end(TAKE_PTR(warm), &e) < 0)
                        snprintf(r->warm_lost, sizeof(r->warm_lost), "%s", e.message);
        }
        return warm;
}

/* The changeset's "output" walls (capsule/walls.h): its stream refused at its bounds, or its
 * list cut at them (init's own word, in the list it sent). */
static void changes_walls(const ExecPlan *p, ExecResult *r) {
        const ExecChanges *c = &r->changes;
        char sz[24];
        if (c->error && streq(c->error, "artifact_too_large"))
                walls_add(&r->capsule.walls, WALL_OUTPUT, 1,
                          "changeset refused: more than limits.max_changes_bytes (%s) or limits.max_changes_entries (%llu)",
                          format_size(p->changes_max_bytes, sz, sizeof(sz)), (unsigned long long) p->changes_max_entries);
        else if (c->manifest && !c->sum.complete)
                walls_add(&r->capsule.walls, WALL_OUTPUT, 1, "changeset cut at limits.max_changes_entries (%llu)",
                          (unsigned long long) p->changes_max_entries);
}

/* The job's changeset, from what the capsule sent (exec/changeset.h); a changeset that broke
 * a rule leaves nothing staged. */
static void changes_take(const ExecPlan *p, const ExecRun *x, ExecResult *r) {
        ExecChanges *c = &r->changes;
        TfwError e = {};
        c->wanted = x->work_dir && p->changes_fd > STDERR_FILENO && p->changes_max_entries > 0 && r->ran;
        if (!c->wanted)
                return;
        if (!r->capsule.changes_imported) {
                c->error = r->capsule.changes_error_code ? r->capsule.changes_error_code : "no_changes";
                snprintf(c->message, sizeof(c->message), "%s", r->capsule.changes_error[0] ? r->capsule.changes_error : "the capsule sent no changes");
        } else {
                _cleanup_close_ int gen = open(x->work_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (gen < 0)
                        (void) tfw_error(&e, errno, "changes_failed", "changes: cannot open the generation: %m");
                else {
                        /* What init leaves out, checked again: artifacts/ and the cache's paths. */
                        const char *skip[BUILD_CACHE_PATHS_MAX + 2] = { CAPSULE_ARTIFACTS_DIR };
                        char *const *cp = x->with_cache ? build_cache_paths(p->cache) : NULL;
                        for (size_t i = 0; cp && cp[i] && i < BUILD_CACHE_PATHS_MAX; i++)
                                skip[1 + i] = cp[i];
                        if (changeset_build(p->changes_fd, gen, skip, p->changes_max_entries, &c->manifest, &c->sum, &e) >= 0)
                                return;
                }
                c->error = e.code ? e.code : "changes_failed";
                snprintf(c->message, sizeof(c->message), "%s", e.message);
        }
        (void) rm_rf_children(p->changes_fd);
}

static void capsule_params(const ExecPlan *p, ExecRun *x, const char *init_path, CapsuleWarm *warm, CapsuleJobParams *ret) {
        *ret = (CapsuleJobParams) {
                .config = p->config,
                .driver = p->driver,
                .scratch_fd = p->scratch_fd,
                .scratch_path = p->scratch_path,
                .job_id = p->job_id,
                .argv = p->argv,
                .cwd = p->cwd,
                .changes_staging_fd = x->work_dir && p->changes_fd > STDERR_FILENO ? p->changes_fd : -1,
                .changes_max_bytes = p->changes_max_bytes,
                .changes_max_entries = p->changes_max_entries,
                .extra_env = p->extra_env,
                .check = p->check,
                .timeout_seconds = p->timeout_seconds,
                .cpu_seconds = p->cpu_seconds,
                .end_on_log_limit = p->end_on_log_limit,
                .snapshot_dir = p->tree_dir,
                .work_dir = x->work_dir,
                .input = p->workspace && !x->work_dir ? stream_input : NULL,
                .input_userdata = &x->in,
                .gate = p->cancel ? cancel_gate : NULL,
                .gate_userdata = p->cancel,
                .warm = warm,
                .defer_record = p->defer_record,
                .init_path = init_path,
                .log_fd = p->log_fd,
                .live_fd = p->live_fd > STDERR_FILENO ? p->live_fd : -EBADF,
                .staging_fd = p->artifacts_fd,
                .cache_paths = x->with_cache ? build_cache_paths(p->cache) : NULL,
                .cache_dir = x->with_cache ? build_cache_versions_path(p->cache) : NULL,
                .cache_version = x->cache_version,
                .cache_staging_fd = x->cache_staging,
                .cache_max_bytes = p->cache ? p->config->cache.max_bytes : 0,
                .cache_max_entries = p->cache ? p->config->cache.max_entries : 0,
                .unpriv_uid = ARTIFACT_PARSER_UID,
                .unpriv_gid = ARTIFACT_PARSER_GID,
                /* Never the standard fds: a plan that left it 0 keeps no records, not on stdin. */
                .egress_log_fd = p->egress_log_fd > STDERR_FILENO ? p->egress_log_fd : -EBADF,
        };
}

static void cancelled_before(ExecResult *r) {
        r->outcome = EXEC_CANCELLED;
        r->error = "cancelled";
        set_message(r, "cancelled before the capsule started");
}

/* After the capsule: the walk's verdict first (a refusal, a host-side failure), then the
 * runtime's (k < 0), then the job's own outcome. */
static void exec_judge(const ExecPlan *p, const ExecRun *x, int k, const TfwError *se, ExecResult *r) {
        const StreamInput *in = &x->in;
        if (p->workspace && in->done && in->r >= 0) {
                r->have_snapshot = true;
                r->snapshot = in->summary;
        }
        if (p->workspace && in->done && in->r < 0 && snapshot_refusal(&in->error)) {
                /* Never runnable as given; init ran nothing (the stream ended with 'A'). */
                r->outcome = EXEC_REFUSED;
                r->error = in->error.code;
                set_message(r, "%s", in->error.message);
                return;
        }
        if (p->workspace && in->done && in->r < 0 && !(in->error.code && streq(in->error.code, "snapshot_stream"))) {
                /* The walk failed on the host (the workspace could not be opened, a read
                 * error): the job did not run, and it is not the job's fault. */
                r->outcome = EXEC_WORKER_FAULT;
                r->error = in->error.code ? in->error.code : "snapshot_io";
                set_message(r, "%s", in->error.message);
                return;
        }
        if (k < 0) {
                r->outcome = EXEC_WORKER_FAULT;
                r->error = se->code ? se->code : "capsule_setup";
                set_message(r, "%s", se->message);
                return;
        }
        r->ran = true;
        r->started_at = r->capsule.started_at;
        r->finished_at = r->capsule.finished_at;
        r->duration_ms = r->capsule.duration_ms;
        r->have_peak_memory = r->capsule.have_peak_memory;
        r->peak_memory_bytes = r->capsule.peak_memory_bytes;
        classify(r);
        if (p->cancel && exec_cancelled(p->cancel)) {
                r->outcome = EXEC_CANCELLED;
                r->error = "cancelled";
                set_message(r, "cancelled while it ran");
        }
}

void exec_release_record(const ExecPlan *p, ExecResult *r) {
        capsule_remove_record(p->driver, r->capsule.record);
}

int exec_run(const ExecPlan *p, ExecResult *ret, TfwError *e) {
        /* Declared before the first goto: the cleanup must never see an uninitialised value. */
        _cleanup_free_ char *cid = NULL;
        char init_path[PATH_MAX];
        /* Ours from here: used below, or torn down on the way out. */
        _cleanup_(capsule_warm_freep) CapsuleWarm *warm = p ? p->warm : NULL;
        _cleanup_(exec_run_done) ExecRun x = { .in = { .r = -EINPROGRESS }, .cache_staging = -EBADF };
        ExecResult r = {0};
        TfwError se = {0};
        int k;

        if (!plan_is_valid(p))
                return tfw_error(e, EINVAL, "bad_capsule_spec", "invalid execution plan");
        r.started_at = now_realtime();
        record_limits(p, &r);
        usec_t t = now_monotonic();
        if (exec_plan_digest(p, r.environment_digest) < 0)
                r.environment_digest[0] = 0;
        r.timing.digest = now_monotonic() - t;

        /* 1. The input. */
        t = now_monotonic();
        k = exec_input(p, &x, &r);
        r.timing.input = now_monotonic() - t;
        if (k > 0)
                goto done;
        if (capsule_find_init(init_path, sizeof(init_path), &se) < 0) {
                r.outcome = EXEC_WORKER_FAULT;
                r.error = se.code ? se.code : "capsule_setup";
                set_message(&r, "%s", se.message);
                goto done;
        }

        /* 2-4. The capsule: run, drain log, artifacts and cache, clean up. */
        warm = exec_warm_fit(p, &x, TAKE_PTR(warm), &r);
        if (warm)
                cid = strdup(capsule_warm_container(warm));
        else if (capsule_container_id(p->config->name, p->job_id, &cid) < 0)
                cid = NULL;
        if (!cid || !cancel_register(p->cancel, p->driver, cid)) {
                cancelled_before(&r);
                goto done;
        }
        CapsuleJobParams cp;
        capsule_params(p, &x, init_path, TAKE_PTR(warm), &cp);
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
                        cancelled_before(&r);
                        goto done;
                }
                cp.warm = NULL;
                capsule_remove_record(p->driver, r.capsule.record);
                r.capsule = (CapsuleResult) {0};
                k = capsule_run_job(&cp, &r.capsule, &se);
                cancel_unregister(p->cancel);
        }
        exec_judge(p, &x, k, &se, &r);

        t = now_monotonic();
        changes_take(p, &x, &r);
        changes_walls(p, &r);
        r.timing.changes = now_monotonic() - t;

done:
        t = now_monotonic();
        if (r.cache.used)
                cache_take_in(p, &r);
        r.timing.cache_take_in = now_monotonic() - t;
        if (!r.finished_at)
                r.finished_at = now_realtime();
        *ret = r;
        return 0;
}
