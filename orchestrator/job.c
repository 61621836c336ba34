/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifacts/envdigest.h"
#include "capsule/init-path.h"
#include "capsule/job.h"
#include "capsule/runsc.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/log.h"
#include "common/path-util.h"
#include "orchestrator/finish.h"
#include "orchestrator/job.h"
#include "orchestrator/publish.h"
#include "orchestrator/result.h"
#include "orchestrator/teardown.h"
#include "snapshot/snapshot.h"

/* The artifact parser drops to nobody. */
#define ARTIFACT_PARSER_UID 65534
#define ARTIFACT_PARSER_GID 65534



static int runsc_root(Worker *w, char *buf, size_t size) {
        int n = snprintf(buf, size, "%s/runsc", w->config->state_dir);
        return n > 0 && (size_t) n < size ? 0 : -ENAMETOOLONG;
}

/* The docker/podman drivers at start-up: every container labelled with this worker's name (and
 * no other). */
static void engine_job_cleanup(Worker *w) {
        Engine en = {};
        TfwError e = {0};

        if (engine_init(&en, w->config, NULL, &e) < 0) {
                log_warning("cleanup: %s", e.message);
                return;
        }
        unsigned removed = 0;
        if (engine_cleanup_stale(&en, &removed, &e) < 0)
                log_warning("start-up cleanup: %s", e.message);
        else if (removed)
                log_notice("start-up cleanup: removed %u container(s) left by a previous run", removed);
        engine_done(&en);
}

void job_cleanup(Worker *w, const char *id) {
        Runsc rt = {};
        char root[PATH_MAX];
        TfwError e = {0};

        if (id) {
                /* Issue 11 item 7 (threat 13): the whole capsule, killed and removed, bounded. */
                unsigned killed = 0;
                if (job_teardown(w, id, &killed, &e) < 0)
                        log_warning("job '%s': capsule teardown: %s", id, e.message);
                else if (killed)
                        log_notice("job '%s': capsule torn down (%u runtime process(es) killed)", id, killed);
                (void) rm_rf_at(w->dirs.scratch_fd, id);
                return;
        }
        if (w->config->driver != DRIVER_RUNSC) {
                engine_job_cleanup(w);
                return;
        }
        if (runsc_root(w, root, sizeof(root)) < 0 ||
            runsc_init(&rt, w->config, root, &e) < 0)
                return;
        unsigned removed = 0;
        if (capsule_cleanup_stale(&rt, w->dirs.scratch_fd, &removed, &e) < 0)
                log_warning("start-up cleanup: %s", e.message);
        else if (removed)
                log_notice("start-up cleanup: removed %u container(s) left by a previous run", removed);
        runsc_done(&rt);
}

static void runtime_version_of(const Runsc *rt, const Engine *en, char *buf, size_t size) {
        snprintf(buf, size, "unknown");
        if (en) {
                _cleanup_free_ char *v = NULL;
                TfwError ve = {0};
                if (engine_server_version(en, &v, &ve) >= 0 && v)
                        snprintf(buf, size, "%s", v);
        } else if (rt)
                runsc_version(rt, buf, size);
}

void job_cache_runtime_version(Worker *w) {
        char root[PATH_MAX];
        TfwError e = {0};

        if (w->config->driver == DRIVER_RUNSC) {
                Runsc rt = {};
                if (runsc_root(w, root, sizeof(root)) >= 0 && runsc_init(&rt, w->config, root, &e) >= 0)
                        runtime_version_of(&rt, NULL, w->runtime_version, sizeof(w->runtime_version));
                runsc_done(&rt);
        } else {
                Engine en = {};
                if (engine_init(&en, w->config, NULL, &e) >= 0)
                        runtime_version_of(NULL, &en, w->runtime_version, sizeof(w->runtime_version));
                engine_done(&en);
        }
}

static json_t *snapshot_json(const SnapshotSummary *s) {
        return json_pack("{s:I, s:I, s:I, s:s}", "bytes", (json_int_t) s->bytes, "entries", (json_int_t) s->entries,
                         "skipped_symlinks", (json_int_t) s->skipped_symlinks, "tree", s->tree);
}

static int finish(Worker *w, RequestRecord *rec, const Request *req, const char *status, const char *error,
                  const char *message, const ResultRun *run, TfwError *e) {
        int r = finish_request(w, rec, req, status, error, message, run, e);
        if (r >= 0)
                finish_audit(w, "finished", rec, error, message, run);
        return r;
}

int job_execute(Worker *w, RequestRecord *rec, TfwError *e) {
        _cleanup_request_ Request *req = NULL;
        _cleanup_close_ int scratch = -EBADF, staging = -EBADF, log_fd = -EBADF, art_fd = -EBADF;
        char scratch_path[PATH_MAX], snap_path[PATH_MAX], init_path[PATH_MAX], root[PATH_MAX];
        SnapshotSummary sum = {};
        TfwError se = {0};
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
        (void) rm_rf_at(w->dirs.scratch_fd, rec->id);
        if (mkdirat(w->dirs.scratch_fd, rec->id, 0700) < 0)
                return tfw_error(e, errno, "internal", "cannot create the scratch directory of '%s': %m", rec->id);
        scratch = open_dir_at(w->dirs.scratch_fd, rec->id);
        if (scratch < 0)
                return tfw_error(e, scratch, "internal", "cannot open the scratch directory of '%s'", rec->id);
        char scratch_base[PATH_MAX];
        if (path_join_buf(scratch_base, sizeof(scratch_base), w->config->state_dir, "scratch") < 0 ||
            path_join_buf(scratch_path, sizeof(scratch_path), scratch_base, rec->id) < 0 ||
            path_join_buf(snap_path, sizeof(snap_path), scratch_path, "snapshot") < 0)
                return tfw_error(e, ENAMETOOLONG, "internal", "the scratch path of '%s' is too long", rec->id);

        /* 1. Snapshot. A workspace the worker will not copy rejects the job before it runs. */
        SnapshotLimits sl = {
                .max_bytes = w->config->limits.max_snapshot_bytes,
                .max_entries = w->config->limits.max_snapshot_entries,
                .group = w->config->container_gid,
        };
        r = snapshot_take(w->config->workspace, scratch, "snapshot", &sl, &sum, &se);
        if (r < 0) {
                bool refused = se.code && (streq(se.code, "snapshot_too_large") || streq(se.code, "snapshot_special_file"));
                (void) rm_rf_at(w->dirs.scratch_fd, rec->id);
                run = (ResultRun){};
                return finish(w, rec, req, refused ? "rejected" : "error", se.code ? se.code : "snapshot_io",
                              se.message, &run, e);
        }
        _cleanup_(json_decrefp) json_t *snap = snapshot_json(&sum);
        run.snapshot = snap;

        /* 2-4. The capsule: run, drain log and artifacts, clean up. */
        log_fd = openat(staging, "job.log", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
        /* The mode explicitly: a service's UMask= must not make the log unreadable. */
        if (log_fd < 0 || ensure_owner_mode(log_fd, 0, w->config->container_gid, 0640) < 0)
                return tfw_error(e, errno, "internal", "cannot create job.log of '%s': %m", rec->id);
        if (mkdirat(staging, "artifacts", 0750) < 0)
                return tfw_error(e, errno, "internal", "cannot create the artifacts directory of '%s': %m", rec->id);
        art_fd = open_dir_at(staging, "artifacts");
        if (art_fd < 0)
                return tfw_error(e, art_fd, "internal", "cannot open the artifacts directory of '%s'", rec->id);

        r = capsule_find_init(init_path, sizeof(init_path), e);
        if (r >= 0)
                r = runsc_root(w, root, sizeof(root));
        Runsc rt = {};
        Engine en = {};
        bool engine = w->config->driver != DRIVER_RUNSC;
        if (r >= 0)
                r = engine ? engine_init(&en, w->config, NULL, e) : runsc_init(&rt, w->config, root, e);
        if (r < 0) {
                (void) rm_rf_at(w->dirs.scratch_fd, rec->id);
                run = (ResultRun){.snapshot = snap};
                return finish(w, rec, req, "error", e->code ? e->code : "capsule_setup", e->message, &run, e);
        }

        CapsuleJobParams p = {
                .config = w->config,
                .runtime = engine ? NULL : &rt,
                .engine = engine ? &en : NULL,
                .scratch_fd = scratch,
                .scratch_path = scratch_path,
                .job_id = rec->id,
                .argv = req->argv,
                .timeout_seconds = req->timeout_seconds,
                .snapshot_dir = snap_path,
                .init_path = init_path,
                .log_fd = log_fd,
                .staging_fd = art_fd,
                .unpriv_uid = ARTIFACT_PARSER_UID,
                .unpriv_gid = ARTIFACT_PARSER_GID,
        };
        CapsuleResult cr = {};
        r = capsule_run_job(&p, &cr, e);
        /* The runtime's identity, for the result and the environment digest. */
        if (!w->runtime_version[0])
                runtime_version_of(engine ? NULL : &rt, engine ? &en : NULL, w->runtime_version,
                                   sizeof(w->runtime_version));
        const char *version = w->runtime_version;
        runsc_done(&rt);
        engine_done(&en);
        (void) rm_rf_at(w->dirs.scratch_fd, rec->id);
        if (r < 0)
                return r;

        r = ensure_owner_mode(art_fd, 0, w->config->container_gid, 02750);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot set the mode of the artifacts of '%s': %s", rec->id,
                                 strerror(-r));

        _cleanup_(json_decrefp) json_t *logj =
                json_pack("{s:I, s:b}", "bytes", (json_int_t) cr.log_bytes, "truncated", cr.log_truncated);
        _cleanup_(json_decrefp) json_t *artj = json_pack(
                "{s:I, s:I, s:b, s:s?}", "files", (json_int_t) cr.artifacts.files, "bytes",
                (json_int_t) cr.artifacts.bytes, "truncated", false, "error",
                cr.artifacts_ok ? NULL : (cr.artifacts_error[0] ? cr.artifacts_error : cr.artifacts_error_code));
        _cleanup_(json_decrefp) json_t *rtj =
                json_pack("{s:s, s:s, s:s}", "driver", driver_to_string(w->config->driver), "version", version,
                          "platform", w->config->platform);
        /* What the job ran in, never what it ran: the same for every job of this config. */
        _cleanup_(json_decrefp) json_t *desc =
                env_description(w->config, req->timeout_seconds, w->config->limits.max_log_bytes, 0, NULL, version);
        char digest[ENV_DIGEST_SIZE];
        if (desc && env_digest(desc, digest) >= 0)
                run.environment_digest = digest;
        run.started_at = cr.started_at;
        run.finished_at = cr.finished_at;
        run.has_exit_code = cr.exit_code >= 0;
        run.exit_code = cr.exit_code;
        run.signal = cr.signal;
        run.log = logj;
        run.artifacts = artj;
        run.runtime = rtj;
        run.ran = true;
        return finish(w, rec, req, capsule_status_to_string(cr.status), cr.reason,
                      cr.message[0] ? cr.message : NULL, &run, e);
}
