/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/driver.h"
#include "capsule/id.h"
#include "capsule/oci-spec.h"
#include "exec/exec.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/log.h"
#include "common/path-util.h"
#include "orchestrator/cancel.h"
#include "orchestrator/cancel-listen.h"
#include "orchestrator/finish.h"
#include "orchestrator/job.h"
#include "orchestrator/watch.h"
#include "orchestrator/publish.h"
#include "orchestrator/result.h"
#include "orchestrator/scratch.h"
#include "orchestrator/teardown.h"
#include "snapshot/build-cache.h"
#include "snapshot/dirty-set.h"
#include "snapshot/gen-check.h"
#include "snapshot/snapshot.h"

int job_driver_open(Worker *w, CapsuleDriver *d, TfwError *e) {
        char root[PATH_MAX];
        int r = worker_runsc_root_open(w->config, root, sizeof(root), e);
        if (r < 0)
                return r;
        r = capsule_driver_init(d, w->config, root, NULL, e);
        if (r < 0)
                return r;
        /* The next start waits for the last of them (daemon.c take_jobs_lock). */
        capsule_driver_hold(d, w->jobs_lock_fd);
        return 0;
}

/* Until issue 12 runsc's root was <state_dir>/runsc: what a worker killed before the upgrade
 * left there goes as at any start, then the directory (kept when that fails, for the
 * operator to look at). */
static void legacy_root_cleanup(Worker *w) {
        char root[PATH_MAX];
        struct stat st;
        CapsuleDriver d = {};
        TfwError e = {0};
        unsigned removed = 0;

        if (fstatat(w->dirs.state_fd, "runsc", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
            snprintf(root, sizeof(root), "%s/runsc", w->config->state_dir) >= (int) sizeof(root))
                return;
        if (capsule_driver_init(&d, w->config, root, NULL, &e) < 0 ||
            d.ops->cleanup_stale(&d, w->dirs.scratch_fd, &removed, &e) < 0) {
                worker_say(w, LOG_WARNING, "start-up cleanup of the old runsc root '%s': %s", root, e.message);
                capsule_driver_done(&d);
                return;
        }
        capsule_driver_done(&d);
        if (removed)
                worker_say(w, LOG_NOTICE, "start-up cleanup: removed %u container(s) left in the old runsc root '%s'",
                           removed, root);
        /* A container of another owner (never touched) keeps the directory. */
        _cleanup_close_ int fd = open_dir_at(w->dirs.state_fd, "runsc");
        _cleanup_closedir_ DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
        if (dir)
                TAKE_FD(fd);
        for (struct dirent *de; dir && (de = readdir(dir));) {
                size_t n = strlen(de->d_name);
                if (n > 6 && streq(de->d_name + n - 6, ".state")) {
                        worker_say(w, LOG_WARNING, "the old runsc root '%s' still holds containers of other owners; "
                                   "it is kept", root);
                        return;
                }
        }
        int r = rm_rf_at(w->dirs.state_fd, "runsc");
        if (r < 0)
                worker_say(w, LOG_WARNING, "cannot remove the old runsc root '%s': %s", root, strerror(-r));
}

void job_cleanup(Worker *w, const char *id) {
        CapsuleDriver d = {};
        TfwError e = {0};

        if (id) {
                /* Issue 11 item 7 (threat 13): the whole capsule, killed and removed, bounded. */
                unsigned killed = 0;
                bool found = false;
                /* Said whenever something of it was there: its runsc processes usually died
                 * with the job's process already (runsc_hold), and left their record. */
                if (job_teardown(w, id, &killed, &found, &e) < 0)
                        worker_say(w, LOG_WARNING, "job '%s': capsule teardown: %s", id, e.message);
                else if (found)
                        worker_say(w, LOG_NOTICE, "job '%s': capsule torn down (%u runtime process(es) killed)", id, killed);
                (void) rm_rf_at(w->dirs.scratch_fd, id);
                return;
        }
        if (job_driver_open(w, &d, &e) < 0) {
                worker_say(w, LOG_WARNING, "cleanup: %s", e.message);
                return;
        }
        unsigned removed = 0;
        /* The scratch of capsules started ahead by a predecessor (their containers go below). */
        DIR *dir = opendir_fd(w->dirs.scratch_fd);
        struct dirent *de;
        while (dir && (de = readdir(dir)))
                if (strncmp(de->d_name, "warm-", 5) == 0 && capsule_job_id_is_valid(de->d_name))
                        (void) rm_rf_at(w->dirs.scratch_fd, de->d_name);
        if (dir)
                closedir(dir);
        if (d.ops->cleanup_stale(&d, w->dirs.scratch_fd, &removed, &e) < 0)
                worker_say(w, LOG_WARNING, "start-up cleanup: %s", e.message);
        else if (removed)
                worker_say(w, LOG_NOTICE, "start-up cleanup: removed %u container(s) left by a previous run", removed);
        capsule_driver_done(&d);
        legacy_root_cleanup(w);
}

/* The engine and its walls every result names (contract section 7), asked once. */
static void job_cache_isolation(Worker *w, const CapsuleDriver *d) {
        if (!w->isolation)
                w->isolation = capsule_driver_isolation(d);
}

void job_cache_runtime_version(Worker *w) {
        CapsuleDriver d = {};
        TfwError e = {0};

        snprintf(w->runtime_version, sizeof(w->runtime_version), "unknown");
        if (job_driver_open(w, &d, &e) >= 0) {
                d.ops->version(&d, w->runtime_version, sizeof(w->runtime_version));
                job_cache_isolation(w, &d);
        }
        capsule_driver_done(&d);
}

static json_t *snapshot_json(const SnapshotSummary *s) {
        return json_pack("{s:I, s:I, s:I, s:s}", "bytes", (json_int_t) s->bytes, "entries", (json_int_t) s->entries,
                         "skipped_symlinks", (json_int_t) s->skipped_symlinks, "tree", s->tree);
}

static int finish(Worker *w, RequestRecord *rec, const Request *req, const char *status, const char *error,
                  const char *message, const ResultRun *run, TfwError *e) {
        return finish_request(w, rec, req, status, error, message, run, &(FinishAudit){"finished", NULL}, e);
}

/* The inbox plane's reading of the core's one classification (exec/exec.h). */
static const char *inbox_status(const ExecResult *x) {
        switch (x->outcome) {
        case EXEC_REFUSED:
                return "rejected";
        case EXEC_WORKER_FAULT:
                return "error";
        case EXEC_CANCELLED:
                return "cancelled"; /* only the controller cancels an inbox job */
        case EXEC_EXEC_FAILED:
        case EXEC_RAN:
                break;
        }
        return capsule_status_to_string(x->capsule.status);
}

/* A lane of the generation store for a job of this process, or NULL (no store, every lane
 * held, or the store failed: said in *note, the workspace is then streamed). */
static GenLane *job_lane(Worker *w, char *note, size_t note_size) {
        char path[PATH_MAX];
        GenLane *l = NULL;
        TfwError e = {0};
        const CapsuleDriverOps *ops = capsule_driver_ops(w->config->driver);

        if (w->dirs.store_fd < 0 || !ops || !ops->binds_generations)
                return NULL;
        if (scratch_store_path(w->config, path, sizeof(path)) < 0 ||
            gen_lane_acquire(w->dirs.store_fd, path, scratch_store_lanes(w->config), w->config->container_uid,
                             w->config->container_gid, &l, &e) < 0) {
                snprintf(note, note_size, "no lane of the generation store (%.900s); the workspace is streamed",
                         e.message[0] ? e.message : "path too long");
                return NULL;
        }
        return l;
}

/* The workspace's watch as the daemon handed it to this job, or NULL: every directory is read
 * (said in the log when the view was there but cannot be read). */
static DirtyView *job_watch(Worker *w, const char *id) {
        DirtyView *v = NULL;
        if (w->watch_fd < 0 || w->watch_view_fd < 0)
                return NULL;
        int r = dirty_view_load(w->watch_view_fd, w->watch_fd, w->watch_budget, &v);
        if (r < 0)
                worker_say(w, LOG_WARNING, "job '%s': the workspace's watch cannot be read (%s): every directory is read",
                           id, strerror(-r));
        return r < 0 ? NULL : v;
}

/* What the store holds, for `list --json` and doctor (they cannot see the daemon's tmpfs):
 * <state_dir>/store.json, replaced after each job. */
static void job_store_report(Worker *w) {
        GenStoreUsage u;
        if (w->dirs.store_fd < 0 || gen_store_usage(w->dirs.store_fd, scratch_store_lanes(w->config), &u) < 0)
                return;
        _cleanup_(json_decrefp) json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "bytes", (json_int_t) u.bytes,
                                                       "max_bytes", (json_int_t) u.max_bytes, "inodes", (json_int_t) u.inodes,
                                                       "max_inodes", (json_int_t) u.max_inodes, "generations",
                                                       (json_int_t) u.lanes, "at", (json_int_t) (now_realtime() / USEC_PER_SEC));
        _cleanup_free_ char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s)
                (void) write_file_replace_at(w->dirs.state_fd, "store.json", s, strlen(s), 0600, 0, 0);
}

/* The controller's build cache, opened by this process (its lock is its own: a descriptor
 * inherited from the daemon would share the daemon's lock), or NULL: none configured, no store,
 * or it cannot be opened (said in *note). */
static BuildCache *job_cache(Worker *w, char *note, size_t note_size) {
        const CapsuleDriverOps *ops = capsule_driver_ops(w->config->driver);
        BuildCache *c = NULL;
        TfwError e = {0};

        char store[PATH_MAX];
        if (!w->config->cache.paths || w->dirs.store_fd < 0 || !ops || !ops->binds_generations)
                return NULL;
        if (scratch_store_path(w->config, store, sizeof(store)) < 0) {
                snprintf(note, note_size, "the build cache cannot be opened (the store's path is too long)");
                return NULL;
        }
        BuildCacheParams p = {
                .paths = w->config->cache.paths,
                .store_path = store,
                .max_bytes = w->config->cache.max_bytes,
                .max_entries = w->config->cache.max_entries,
                .uid = w->config->container_uid,
                .gid = w->config->container_gid,
        };
        if (build_cache_open(w->dirs.store_fd, &p, &c, &e) < 0) {
                snprintf(note, note_size, "the build cache cannot be opened (%.900s)", e.message);
                return NULL;
        }
        return c;
}

/* What the cache holds, for `list --json` and doctor: <state_dir>/cache.json, replaced after
 * each job that used it. */
static void job_cache_report(Worker *w, BuildCache *c) {
        BuildCacheState st;
        TfwError e = {0};
        if (build_cache_state(c, &st, &e) < 0)
                return;
        _cleanup_(json_decrefp) json_t *j = json_pack(
                "{s:s?, s:I, s:I, s:I, s:I, s:I}", "tree", st.tree[0] ? st.tree : NULL, "bytes", (json_int_t) st.bytes,
                "entries", (json_int_t) st.entries, "max_bytes", (json_int_t) w->config->cache.max_bytes, "max_entries",
                (json_int_t) w->config->cache.max_entries, "at", (json_int_t) (now_realtime() / USEC_PER_SEC));
        _cleanup_free_ char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (s)
                (void) write_file_replace_at(w->dirs.state_fd, "cache.json", s, strlen(s), 0600, 0, 0);
}

void job_cache_clear(Worker *w, const char *operator_name) {
        char note[1024] = "";
        TfwError e = {0};
        _cleanup_(build_cache_freep) BuildCache *c = job_cache(w, note, sizeof(note));
        if (!c) {
                if (note[0])
                        worker_say(w, LOG_ERR, "cache clear: %s", note);
                return;
        }
        if (build_cache_clear(c, &e) < 0) {
                worker_say(w, LOG_ERR, "cache clear: %s", e.message);
                return;
        }
        worker_say(w, LOG_NOTICE, "build cache cleared by '%s': the next job starts without one", operator_name);
        _cleanup_(json_decrefp) json_t *f = json_pack("{s:s}", "approver", operator_name);
        (void) worker_audit_best_effort(w, "cache-cleared", f);
        job_cache_report(w, c);
}

static json_t *cache_json(const ExecCache *c) {
        return json_pack("{s:b, s:s?, s:s?, s:b, s:I, s:I, s:I, s:I, s:s?, s:s?, s:I, s:I}", "used", c->used, "from",
                         c->used && c->from[0] ? c->from : NULL, "left", c->used && c->left[0] ? c->left : NULL, "kept",
                         c->kept, "bytes", (json_int_t) c->bytes, "entries", (json_int_t) c->entries, "files_sent",
                         (json_int_t) c->files_sent, "files_unchanged", (json_int_t) c->files_unchanged, "error", c->error,
                         "message", c->error ? c->message : NULL, "hand_out_ms", (json_int_t) c->hand_out_ms,
                         "take_in_ms", (json_int_t) c->take_in_ms);
}

static void job_cache_log(Worker *w, const char *id, const ExecCache *c) {
        if (c->kept)
                worker_say(w, LOG_INFO, "job '%s': build cache %s -> %s: %" PRIu64 " entries, %" PRIu64 " bytes, %" PRIu64
                           " files sent, %" PRIu64 " unchanged (hand-out %" PRIu64 " ms, take-in %" PRIu64 " ms)", id,
                           c->from[0] ? c->from : "(none)", c->left, c->entries, c->bytes, c->files_sent, c->files_unchanged,
                           c->hand_out_ms, c->take_in_ms);
        else if (c->used || c->error)
                worker_say(w, LOG_NOTICE, "job '%s': build cache %s kept as it was: %s", id,
                           c->from[0] ? c->from : "(none)", c->message);
}

/* One connection's audit line: the record's fields that apply (the audit writer takes no null),
 * its detail as the message. */
static json_t *egress_audit_fields(const char *id, json_t *rec) {
        static const char *const keys[][2] = { { "kind", "kind" },       { "host", "host" },
                                               { "port", "port" },       { "address", "address" },
                                               { "verdict", "verdict" }, { "reason", "reason" },
                                               { "detail", "message" },  { "bytes_up", "bytes_up" },
                                               { "bytes_down", "bytes_down" }, { "duration_ms", "duration_ms" } };
        json_t *f = json_pack("{s:s}", "id", id);
        for (size_t i = 0; f && i < ELEMENTSOF(keys); i++) {
                json_t *v = json_object_get(rec, keys[i][0]);
                if (v && !json_is_null(v))
                        json_object_set(f, keys[i][1], v);
        }
        return f;
}

/* The job's connections (docs/egress.md): result.json's "network", one audit line each and a
 * line for the log. */
static json_t *job_network(Worker *w, const char *id, int records_fd, const EgressSummary *s) {
        json_t *net = egress_result_json(w->config, s, records_fd);
        json_t *conns = net ? json_object_get(net, "connections") : NULL;
        for (size_t i = 0; i < json_array_size(conns); i++) {
                _cleanup_(json_decrefp) json_t *f = egress_audit_fields(id, json_array_get(conns, i));
                if (f)
                        (void) worker_audit_best_effort(w, "egress", f);
        }
        worker_say(w, s->error ? LOG_WARNING : LOG_INFO,
                   "job '%s': egress: %u connection(s), %u allowed, %u refused, %" PRIu64 " bytes up, %" PRIu64
                   " bytes down%s%s",
                   id, s->connections, s->allowed, s->refused, s->bytes_up, s->bytes_down, s->error ? "; " : "",
                   s->error ? s->message : "");
        return net;
}

/* A job's (or a warm capsule's) scratch directory, made afresh and opened, and its path
 * (PATH_MAX bytes) for the bundle. */
static int job_scratch(Worker *w, const char *id, char *scratch_path, TfwError *e) {
        char scratch_base[PATH_MAX];
        (void) rm_rf_at(w->dirs.scratch_fd, id);
        if (mkdirat(w->dirs.scratch_fd, id, 0700) < 0)
                return tfw_error(e, errno, "internal", "cannot create the scratch directory of '%s': %m", id);
        int scratch = open_dir_at(w->dirs.scratch_fd, id);
        if (scratch < 0)
                return tfw_error(e, scratch, "internal", "cannot open the scratch directory of '%s'", id);
        if (path_join_buf(scratch_base, sizeof(scratch_base), w->config->state_dir, "scratch") < 0 ||
            path_join_buf(scratch_path, PATH_MAX, scratch_base, id) < 0)
        {
                safe_close(scratch);
                return tfw_error(e, ENAMETOOLONG, "internal", "the scratch path of '%s' is too long", id);
        }
        return scratch;
}

/* job_warm_start's steps; *lane is taken here when it is NULL, and left to the caller. */
static int warm_start_on(Worker *w, const char *warm_id, CapsuleDriver *drv, GenLane **lane, CapsuleWarm **ret,
                         TfwError *e) {
        char scratch_path[PATH_MAX];
        _cleanup_close_ int scratch = -EBADF;

        const CapsuleDriverOps *ops = capsule_driver_ops(w->config->driver);
        if (!ops || !ops->boots_ahead)
                return tfw_error(e, EOPNOTSUPP, "capsule_setup", "the %s driver does not start capsules ahead",
                                 driver_to_string(w->config->driver));
        scratch = job_scratch(w, warm_id, scratch_path, e);
        if (scratch < 0)
                return scratch;
        int r = job_driver_open(w, drv, e);
        if (r < 0)
                return r;
        char note[1024] = "";
        if (!*lane)
                *lane = job_lane(w, note, sizeof(note));
        if (note[0])
                worker_say(w, LOG_WARNING, "warm capsule '%s': %s", warm_id, note);
        _cleanup_(build_cache_freep) BuildCache *cache = job_cache(w, note, sizeof(note));
        return exec_warm_start(w->config, drv, scratch, scratch_path, warm_id, NULL, *lane, cache, ret, e);
}

int job_warm_start(Worker *w, const char *warm_id, CapsuleDriver *drv, GenLane *given, CapsuleWarm **ret,
                   GenLane **ret_lane, TfwError *e) {
        GenLane *lane = given;
        int r = warm_start_on(w, warm_id, drv, &lane, ret, e);
        if (r >= 0) {
                *ret_lane = lane;
                return r;
        }
        if (lane && lane == given) {
                /* The start's lane, which the daemon may still be walking: released (sealed) only
                 * once that walk has ended, under its update lock. */
                TfwError le = {0};
                (void) gen_lane_lock_update(lane, &le);
        }
        gen_lane_release(lane);
        return r;
}

/* How the file system's mark served a walk on the watch's word, for the log line. */
static const char *mark_words(const SnapshotSummary *s, char *buf, size_t size) {
        switch (s->mark) {
        case SNAPSHOT_MARK_USED:
                snprintf(buf, size, "the ones the file system's mark reported (%" PRIu64 "); %" PRIu64 " trusted on its word, %"
                         PRIu64 " probed for a writer", s->files_reported, s->files_trusted, s->files_probed);
                return buf;
        case SNAPSHOT_MARK_FLOOR:
                snprintf(buf, size, "all: the file system's mark cannot vouch for the last walk (its events overflowed "
                         "since, or it began after); %" PRIu64 " probed for a writer", s->files_probed);
                return buf;
        default:
                return "all: no file system mark";
        }
}

/* How the workspace's watch served the walk, for the log line. */
static const char *watch_words(const SnapshotSummary *s, char *buf, size_t size) {
        char mark[200];
        switch (s->watch) {
        case SNAPSHOT_WATCH_DIRTY:
                snprintf(buf, size, "%" PRIu64 " entries unchanged by the watch's word (%" PRIu64 " files of them asked by stat: %s)",
                         s->entries_unread, s->files_checked, mark_words(s, mark, sizeof(mark)));
                return buf;
        case SNAPSHOT_WATCH_FULL:
                if (s->mark == SNAPSHOT_MARK_NONE)
                        return "a full walk (the watch vouched for no earlier walk)";
                snprintf(buf, size, "a full walk (the watch vouched for no earlier walk; %" PRIu64 " kept files probed for a "
                         "writer, for the file system's mark)", s->files_probed);
                return buf;
        default:
                return "a full walk (no watch)";
        }
}

GenLane *job_lane_ahead(Worker *w) {
        char note[1024] = "";
        TfwError e = {0};
        _cleanup_(gen_lane_releasep) GenLane *l = job_lane(w, note, sizeof(note));
        /* A lane without an index is left to its job: a copy of the whole workspace is the job's
         * to make, not the start's. */
        if (!l || faccessat(l->lane_fd, GEN_LANE_INDEX, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return NULL;
        if (gen_lane_lock_update(l, &e) < 0) {
                worker_say(w, LOG_WARNING, "at start: lane-%u cannot be walked ahead (%s); its job walks it", l->number,
                           e.message);
                return NULL;
        }
        return TAKE_PTR(l);
}

void job_walk_ahead(Worker *w, int view_fd, GenLane *l) {
        char note[1024] = "", words[400];
        TfwError e = {0};
        SnapshotSummary sum = {0};

        if (view_fd < 0 || !l) {
                safe_close(view_fd);
                return;
        }
        w->watch_view_fd = view_fd;
        _cleanup_(dirty_view_freep) DirtyView *v = job_watch(w, "(the walk at start)");
        _cleanup_(build_cache_freep) BuildCache *cache = job_cache(w, note, sizeof(note));
        /* As an inbox job walks it, so that the first request's walk finds its generation. */
        SnapshotLimits limits = exec_walk_limits(w->config, cache, cache != NULL, v);
        int r = gen_lane_update(l, w->dirs.store_fd, scratch_store_lanes(w->config), w->config->workspace,
                                w->config->container_uid, &limits, &sum, &e);
        w->watch_view_fd = safe_close(w->watch_view_fd);
        /* The index, written beside the walk (snapshot/index-saver.h), is there before the
         * daemon seals the lane or a capsule takes it. */
        TfwError ie = {0};
        if (r >= 0 && gen_lane_index_wait(l, &ie) < 0)
                worker_say(w, LOG_WARNING, "at start: the index of lane-%u could not be written (%s); its job walks it",
                           l->number, ie.message);
        if (r < 0)
                worker_say(w, LOG_WARNING, "at start: the walk of lane-%u failed (%s); its job walks it", l->number,
                           e.message);
        else
                worker_say(w, LOG_INFO, "at start: lane-%u of the generation store walked ahead: %" PRIu64 " entries, kept %" PRIu64
                           " of %" PRIu64 " files, %s (%" PRIu64 " ms)", l->number, sum.entries, sum.files_reused,
                           sum.files, watch_words(&sum, words, sizeof(words)), (uint64_t) (sum.duration / 1000));
}

/* The daemon's log lines about how a job ran (the input, the cache), beside its result. */
static void job_report_run(Worker *w, const char *id, const ExecResult *x) {
        char words[400];
        if (x->warm_lost[0])
                worker_say(w, LOG_WARNING, "job '%s': %s; it ran in a capsule of its own", id, x->warm_lost);
        if (x->have_snapshot)
                worker_say(w, LOG_INFO, "job '%s': %s %s: %" PRIu64 " entries, %" PRIu64 " bytes, kept %" PRIu64 " of %" PRIu64
                           " files, %s (%" PRIu64 " ms)",
                           id, x->input, x->snapshot.tree, x->snapshot.entries, x->snapshot.bytes, x->snapshot.files_reused,
                           x->snapshot.files, watch_words(&x->snapshot, words, sizeof(words)),
                           (uint64_t) (x->snapshot.duration / 1000));
        if (x->have_snapshot && x->snapshot.lease_unusable)
                worker_say(w, LOG_WARNING, "job '%s': the walk cannot ask for read leases (CAP_LEASE): every file is read "
                           "again by every request", id);
        if (x->input_note[0])
                worker_say(w, LOG_WARNING, "job '%s': %s", id, x->input_note);
        job_cache_log(w, id, &x->cache);
}

/* The changeset (exec/changeset.h): changes.json beside result.json, the staged files readable
 * by the controller as the artifacts are, and result.json's counts; NULL when none was asked
 * for or possible (with e filled only on a host failure, when wanted). */
static json_t *job_changes(Worker *w, const char *id, int staging, int changes_fd, const ExecChanges *c, TfwError *e) {
        if (!c->wanted) {
                if (changes_fd >= 0)
                        (void) unlinkat(staging, "changes", AT_REMOVEDIR);
                return NULL;
        }
        json_t *j = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:s?, s:s?}", "added", (json_int_t) c->sum.added,
                              "modified", (json_int_t) c->sum.modified, "deleted", (json_int_t) c->sum.deleted, "directories",
                              (json_int_t) c->sum.directories, "refused", (json_int_t) c->sum.refused, "bytes",
                              (json_int_t) c->sum.bytes, "truncated", c->manifest && !c->sum.complete, "error", c->error,
                              "message", c->error ? c->message : NULL);
        int r = j ? 0 : -ENOMEM;
        if (r >= 0)
                r = ensure_owner_mode(changes_fd, 0, w->config->container_gid, 02750);
        if (r >= 0 && c->manifest) {
                /* Not fsynced: the staged files it names are not either (nor the artifacts, nor
                 * job.log: docs/artifacts.md), so after a power loss the changeset may be lost
                 * with or without it; apply reads it strictly and checks every staged byte
                 * against it, refusing what is missing, empty or cut short, and result.json
                 * (fsynced, publish_commit) is what a guarantee rests on. Its two fsyncs were the
                 * first journal commits on the request's path to its result. */
                _cleanup_free_ char *s = json_dumps(c->manifest, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
                r = s ? write_file_replace_at(staging, "changes.json", s, strlen(s), 0640, 0, w->config->container_gid) : -ENOMEM;
        }
        if (r < 0) {
                json_decref(j);
                (void) tfw_error(e, -r, "internal", "cannot publish the changes of '%s': %s", id, strerror(-r));
                return NULL;
        }
        return j;
}

/* The result's words for a job the controller cancelled (orchestrator/cancel.h). */
static void job_cancelled_words(ExecResult *x) {
        if (x->outcome != EXEC_CANCELLED)
                return;
        x->error = CANCEL_ERROR;
        snprintf(x->message, sizeof(x->message), "%s",
                 x->ran ? "cancelled by the controller while it ran: its capsule was ended"
                        : "cancelled by the controller before its capsule started");
}

/* exec_run, cancellable by the controller while it runs (cancel_fd, orchestrator/cancel-listen.h). */
static int job_run_cancellable(Worker *w, const char *id, ExecPlan *plan, int cancel_fd, ExecResult *x, TfwError *e) {
        ExecCancel cancel;
        CancelListener listener = CANCEL_LISTENER_NULL;
        exec_cancel_init(&cancel);
        if (cancel_fd >= 0 && cancel_listen_start(&listener, cancel_fd, &cancel) >= 0)
                plan->cancel = &cancel;
        else if (cancel_fd >= 0)
                worker_say(w, LOG_WARNING, "job '%s': cannot listen for a cancel; it runs to its end", id);
        int r = exec_run(plan, x, e);
        /* From here the job's own ending stands: a cancel that comes later changes nothing. */
        cancel_listen_stop(&listener);
        plan->cancel = NULL;
        exec_cancel_destroy(&cancel);
        job_cancelled_words(x);
        return r;
}

/* What the job writes into its staging directory, opened into the caller's descriptors (closed
 * by the caller whatever happens): job.log, the live log, artifacts/, changes/ when asked for,
 * and the egress records when the configuration gives network. */
static int job_open_outputs(Worker *w, const Request *req, const char *id, int staging, int *log_fd, int *live_fd,
                            int *art_fd, int *changes_fd, int *egress_fd, TfwError *e) {
        *log_fd = openat(staging, "job.log", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        /* The mode explicitly: a service's UMask= must not make the log unreadable. */
        if (*log_fd < 0 || ensure_owner_mode(*log_fd, 0, w->config->container_gid, 0640) < 0)
                return tfw_error(e, errno, "internal", "cannot create job.log of '%s': %m", id);
        *live_fd = publish_live_open(&w->dirs, w->config->container_gid, id, e);
        if (*live_fd < 0)
                return *live_fd;
        if (mkdirat(staging, "artifacts", 0750) < 0)
                return tfw_error(e, errno, "internal", "cannot create the artifacts directory of '%s': %m", id);
        *art_fd = open_dir_at(staging, "artifacts");
        if (*art_fd < 0)
                return tfw_error(e, *art_fd, "internal", "cannot open the artifacts directory of '%s'", id);
        /* The job's changes come back beside its artifacts (exec/changeset.h), when asked for. */
        if (req->changes && (mkdirat(staging, "changes", 0750) < 0 || (*changes_fd = open_dir_at(staging, "changes")) < 0))
                return tfw_error(e, errno, "internal", "cannot create the changes directory of '%s': %m", id);
        if (capsule_config_egress(w->config) && (*egress_fd = memfd_create("egress-records", MFD_CLOEXEC)) < 0)
                return tfw_error(e, errno, "internal", "cannot keep the connections of '%s': %m", id);
        return 0;
}

/* A job that ran: its result.json with its log, artifacts, changes, runtime and exit. */
static int finish_ran(Worker *w, RequestRecord *rec, Request *req, const ExecResult *x, json_t *snap, json_t *cachej,
                      json_t *netj, json_t *changesj, TfwError *e) {
        ResultRun run = {};
        const CapsuleResult *cr = &x->capsule;
        _cleanup_(json_decrefp) json_t *logj =
                json_pack("{s:I, s:b}", "bytes", (json_int_t) cr->log_bytes, "truncated", cr->log_truncated);
        _cleanup_(json_decrefp) json_t *artj = json_pack(
                "{s:I, s:I, s:b, s:s?}", "files", (json_int_t) cr->artifacts.files, "bytes",
                (json_int_t) cr->artifacts.bytes, "truncated", false, "error",
                cr->artifacts_ok ? NULL : (cr->artifacts_error[0] ? cr->artifacts_error : cr->artifacts_error_code));
        _cleanup_(json_decrefp) json_t *rtj =
                json_pack("{s:s, s:s, s:s}", "driver", driver_to_string(w->config->driver), "version",
                          w->runtime_version, "platform", w->config->platform);
        if (x->environment_digest[0])
                run.environment_digest = x->environment_digest;
        run.snapshot = snap;
        run.cache = cachej;
        run.network = netj;
        run.started_at = x->started_at;
        run.finished_at = x->finished_at;
        run.has_exit_code = cr->exit_code >= 0;
        run.exit_code = cr->exit_code;
        run.signal = cr->signal;
        run.log = logj;
        run.artifacts = artj;
        run.changes = changesj;
        run.runtime = rtj;
        _cleanup_(json_decrefp) json_t *wallsj = walls_json(&cr->walls);
        run.walls = wallsj;
        run.isolation = w->isolation;
        run.ran = true;
        return finish(w, rec, req, inbox_status(x), x->error, x->message[0] ? x->message : NULL, &run, e);
}

/* The capsule is gone (x: how the job ran; ran: whether exec_run got that far): the log lines, the store's
 * report, the lane sealed and given back before the result is published, so that the next
 * request finds it free (a lane's first generation is seeded from a free one, gen-seed.h), the
 * cache's report, the scratch removed. */
static void job_after_capsule(Worker *w, const char *id, const ExecResult *x, bool ran, const GenLane *lane) {
        if (ran)
                job_report_run(w, id, x);
        if (lane && lane->mirrored_for >= 0 && lane->mirror_error)
                worker_say(w, LOG_WARNING, "job '%s': lane-%u's generation could not be copied for lane-%d, which waits for one (%s); that lane copies it itself",
                           id, lane->number, lane->mirrored_for, strerror(lane->mirror_error));
        else if (lane && lane->mirrored_for >= 0)
                worker_say(w, LOG_INFO, "job '%s': lane-%u's generation copied for lane-%d, which waits for one (%" PRIu64 " ms)", id,
                           lane->number, lane->mirrored_for, (uint64_t) (lane->mirror_usec / USEC_PER_MSEC));
}

/* Once the result is out: what nothing of it needs is done after it, off the request's path:
 * the lane given back (its index, written beside the job, waited for, the copies its update
 * replaced removed, then its seal: the process exits only after, and the daemon counts a lane
 * free only once it has), the store's, the watch's and the cache's reports (files on
 * state_dir's disk) and the job's scratch directory. */
static void job_after_publish(Worker *w, const char *id, const ExecResult *x, GenLane *lane, BuildCache *cache) {
        /* One that could not be written (the store full) leaves the lane without a generation,
         * which its next user makes again. */
        TfwError ie = {0};
        bool had_lane = lane;
        if (lane && gen_lane_index_wait(lane, &ie) < 0)
                worker_say(w, LOG_WARNING, "job '%s': the index of lane-%u could not be written (%s); its next user makes its generation again",
                           id, lane->number, ie.message);
        gen_lane_release(lane);
        if (had_lane)
                job_store_report(w);
        /* The watch's report (state_dir/watch.json, renamed over on the disk: 0.5 to 3 ms of
         * 'after' under load) and its warnings. */
        if (x->have_snapshot)
                watch_after_job(w, id, &x->snapshot);
        if (cache && x->cache.used)
                job_cache_report(w, cache);
        (void) rm_rf_at(w->dirs.scratch_fd, id);
}

/* The result of a job exec_run returned for (x), published: what the job got to when nothing
 * ran; otherwise its log, artifacts, changes, snapshot, cache and network. fds: the artifacts',
 * the changes' and the egress records' descriptors (job_open_outputs). */
static int job_publish(Worker *w, RequestRecord *rec, Request *req, const ExecResult *x, BuildCache *cache,
                       int staging, const int fds[static 3], TfwError *e) {
        int art_fd = fds[0], changes_fd = fds[1], egress_fd = fds[2];
        _cleanup_(json_decrefp) json_t *snap = x->have_snapshot ? snapshot_json(&x->snapshot) : NULL;
        _cleanup_(json_decrefp) json_t *cachej = cache ? cache_json(&x->cache) : NULL;
        _cleanup_(json_decrefp) json_t *netj =
                x->capsule.egress.enabled ? job_network(w, rec->id, egress_fd, &x->capsule.egress) : NULL;
        if (!x->ran) {
                /* Refused or faulted before anything ran: no log, no artifacts, no changes, no
                 * runtime. */
                if (changes_fd >= 0)
                        (void) unlinkat(staging, "changes", AT_REMOVEDIR);
                ResultRun run = {.snapshot = snap, .cache = cachej, .network = netj};
                return finish(w, rec, req, inbox_status(x), x->error, x->message[0] ? x->message : NULL, &run, e);
        }

        int r = ensure_owner_mode(art_fd, 0, w->config->container_gid, 02750);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot set the mode of the artifacts of '%s': %s", rec->id,
                                 strerror(-r));

        /* The manifest is written by job_changes; it is freed here, whatever happens. */
        _cleanup_(json_decrefp) _unused_ json_t *manifest = x->changes.manifest;
        _cleanup_(json_decrefp) json_t *changesj = job_changes(w, rec->id, staging, changes_fd, &x->changes, e);
        if (x->changes.wanted && !changesj)
                return -EIO;

        return finish_ran(w, rec, req, x, snap, cachej, netj, changesj, e);
}

/* Where a request's time went once its process took it (docs/performance.md, "A request's fixed
 * cost"), each step in ms: the request read and its outputs opened (prep), the digest, the walk
 * and the cache's hand-out (input), the capsule's steps (capsule/job.h), the changeset, the
 * cache's take-in, the run's report (after), result.json published (publish); the lane is
 * given back after that, off the request's path (job_after_publish). */
typedef struct JobTimes {
        usec_t begin, planned, ran, after, published;
} JobTimes;

static double ms(usec_t u) {
        return (double) u / USEC_PER_MSEC;
}

static void job_report_timing(Worker *w, const char *id, const ExecResult *x, const JobTimes *t) {
        const CapsuleResult *c = &x->capsule;
        worker_say(w, LOG_INFO, "job '%s': timing: prep %.1f, digest %.1f, input %.1f, capsule setup %.1f, run %.1f, end %.1f, "
                   "changes %.1f, cache take-in %.1f, after %.1f, publish %.1f; total %.1f ms",
                   id, ms(t->planned - t->begin), ms(x->timing.digest), ms(x->timing.input), ms(c->setup_usec),
                   ms(c->run_usec), ms(c->end_usec), ms(x->timing.changes), ms(x->timing.cache_take_in),
                   ms(t->after - t->ran), ms(t->published - t->after), ms(t->published - t->begin));
}

int job_execute(Worker *w, RequestRecord *rec, CapsuleWarm *warm_in, GenLane *lane_in, int cancel_fd, TfwError *e) {
        JobTimes times = {.begin = now_monotonic()};
        /* Ours: handed to exec_run, or torn down on any way out before it. The lane after the
         * capsule (declared first, released last). */
        _cleanup_(gen_lane_releasep) GenLane *lane = lane_in;
        _cleanup_(capsule_warm_freep) CapsuleWarm *warm = warm_in;
        _cleanup_request_ Request *req = NULL;
        _cleanup_close_ int scratch = -EBADF, staging = -EBADF, log_fd = -EBADF, art_fd = -EBADF, egress_fd = -EBADF,
                            changes_fd = -EBADF, live_fd = -EBADF;
        char scratch_path[PATH_MAX];
        CapsuleDriver drv = {};
        ResultRun run = {.started_at = now_realtime()};
        int r;

        /* The captured copy, validated again against today's policy and bound to its sha256. */
        r = store_read_request(w->dirs.requests_fd, rec->id, &w->policy, &req, e);
        if (r < 0)
                return r;
        if (!streq(req->sha256, rec->sha256))
                return tfw_error(e, EBADMSG, "internal", "the captured copy of '%s' changed after capture", rec->id);

        staging = publish_stage_begin(&w->dirs, rec->id, e);
        if (staging < 0)
                return staging;
        scratch = job_scratch(w, rec->id, scratch_path, e);
        if (scratch < 0)
                return scratch;

        r = job_open_outputs(w, req, rec->id, staging, &log_fd, &live_fd, &art_fd, &changes_fd, &egress_fd, e);
        if (r < 0)
                return r;

        TfwError de = {0};
        if (job_driver_open(w, &drv, &de) < 0) {
                (void) rm_rf_at(w->dirs.scratch_fd, rec->id);
                run = (ResultRun){};
                return finish(w, rec, req, "error", de.code ? de.code : "capsule_setup", de.message, &run, e);
        }
        if (!w->runtime_version[0])
                drv.ops->version(&drv, w->runtime_version, sizeof(w->runtime_version));
        job_cache_isolation(w, &drv);

        char note[1024] = "", cache_note[1024] = "";
        if (!lane)
                lane = job_lane(w, note, sizeof(note));
        if (note[0])
                worker_say(w, LOG_WARNING, "job '%s': %s", rec->id, note);
        _cleanup_(dirty_view_freep) DirtyView *watch = lane ? job_watch(w, rec->id) : NULL;
        _cleanup_(build_cache_freep) BuildCache *cache = job_cache(w, cache_note, sizeof(cache_note));
        if (cache_note[0])
                worker_say(w, LOG_WARNING, "job '%s': %s; it runs without it", rec->id, cache_note);
        ExecPlan plan = {
                .config = w->config,
                .driver = &drv,
                .runtime_version = w->runtime_version,
                .workspace = w->config->workspace,
                .lane = lane,
                .watch = watch,
                .store_fd = w->dirs.store_fd,
                .store_lanes = scratch_store_lanes(w->config),
                /* Every inbox job starts from the cache; only a local-reversible one keeps what it
                 * leaves there: an approved one's writes are dropped (threat 15). */
                .cache = cache,
                .use_cache = true,
                .keep_cache = req->action_class == ACTION_LOCAL_REVERSIBLE,
                .scratch_fd = scratch,
                .scratch_path = scratch_path,
                .job_id = rec->id,
                .argv = req->argv,
                .cwd = req->cwd,
                .timeout_seconds = req->timeout_seconds,
                .log_fd = log_fd,
                .live_fd = live_fd,
                .artifacts_fd = art_fd,
                /* The changeset's bounds are the artifacts' (docs/controller.md). */
                .changes_fd = changes_fd,
                .changes_max_bytes = w->config->limits.max_changes_bytes,
                .changes_max_entries = w->config->limits.max_changes_entries,
                .egress_log_fd = egress_fd,
                .warm = TAKE_PTR(warm),
                .defer_record = true,
        };
        ExecResult x = {};
        times.planned = now_monotonic();
        r = job_run_cancellable(w, rec->id, &plan, cancel_fd, &x, e);
        times.ran = now_monotonic();
        job_after_capsule(w, rec->id, &x, r >= 0, lane);
        times.after = now_monotonic();
        if (r >= 0)
                r = job_publish(w, rec, req, &x, cache, staging, (int[]) {art_fd, changes_fd, egress_fd}, e);
        times.published = now_monotonic();
        /* The result is out: now the engine's record of the ended capsule (`runc delete`, tens
         * of ms), which nothing of the result waits for (ExecPlan.defer_record). */
        exec_release_record(&plan, &x);
        job_after_publish(w, rec->id, &x, TAKE_PTR(lane), cache);
        capsule_driver_done(&drv);
        if (r >= 0 && x.ran)
                job_report_timing(w, rec->id, &x, &times);
        return r;
}
