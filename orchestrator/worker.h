/* SPDX-License-Identifier: MIT */
/* The state one inbox worker (daemon, drain or operator verb) works with. */
#pragma once

#include <jansson.h>

#include <stdbool.h>

#include "common/macro.h"
#include "orchestrator/audit.h"
#include "orchestrator/dirs.h"
#include "parser/config.h"
#include "parser/request.h"

/* Where the worker's events go (one line each, a syslog level): the library logs nothing
 * itself; the CLI passes a function that logs (cli_report_line). */
typedef void (*WorkerReport)(void *userdata, int level, const char *line);

typedef struct Worker {
        const Config *config;
        WorkerReport report; /* NULL: the events are dropped */
        void *report_userdata;
        RequestPolicy policy;
        WorkerDirs dirs;
        Audit *audit;
        int inbox_fd;        /* <workspace>/.tentaflake-worker/inbox, or -EBADF */
        /* The daemon's jobs.lock (daemon.c take_jobs_lock): every runtime process its jobs
         * start holds it too (job_driver_open). -EBADF: none, outside the daemon. */
        int jobs_lock_fd;
        /* The workspace's watch (snapshot/dirty-set.h), the daemon's: its inotify fd, which
         * every process of it inherits, and in a job's process the view the daemon handed it
         * when the job was taken (a sealed memfd). -EBADF: none (every directory is read). */
        int watch_fd, watch_view_fd;
        struct DirtyBudget *watch_budget; /* its budget's shared page (dirty-set.h), or NULL */
        bool use_openat2;
        pid_t notify_pids[4];    /* the notify hooks' supervisors still running (notify.h) */
        const char *config_path; /* as the operator names it, for the commands the worker
                                  * prints (worker_approve_command); NULL: unknown */
        char runtime_version[256]; /* "" until job_cache_runtime_version() or a job asks */
        json_t *isolation;         /* the driver's (capsule_driver_isolation), with the version */
} Worker;

/* Open the worker's directories and audit log (not the inbox). The caller sets report after. */
int worker_open(Worker *w, const Config *c, TfwError *e);
void worker_close(Worker *w);

/* The command an operator runs to approve id (binding its sha256): --name NAME when the
 * config is the conventional /etc/tentaflake/workers/NAME.json, else --config PATH, quoted
 * for a shell. A malloc'd string, or NULL when out of memory. */
char *worker_approve_command(const Worker *w, const char *id, const char *sha256);

/* One event line to w->report. */
void worker_say(const Worker *w, int level, const char *fmt, ...) _printf_(3, 4);

/* Record an audit event, BEST EFFORT: a failure is logged here and returned, and the caller
 * goes on (a job's result is published even when its audit line could not be written; a request
 * is captured, rejected or expired all the same). For the outcomes and the worker's own events. */
int worker_audit_best_effort(Worker *w, const char *event, json_t *fields);

/* What the running daemon last reported of the memory it keeps between jobs, which lives in
 * its own namespace (state_dir/store.json, state_dir/cache.json: orchestrator/job.c writes
 * them): 0 with *ret the JSON object in state_fd/name, or NULL when there is none yet;
 * -EBADMSG when the file is there but is no such object (or cannot be read). */
int worker_daemon_report(int state_fd, const char *name, json_t **ret);

/* The error for a workspace that open_dir_path_nofollow() could not open (err a negative
 * errno), saying what is wrong with it: missing, not a directory, a symlink on the way. */
int worker_workspace_error(TfwError *e, const char *code, const char *workspace, int err);

/* The workspace can be opened as the worker opens it (no symlink followed), else the error
 * above (code "workspace"). */
int worker_workspace_check(const Config *c, TfwError *e);

/* Record an audit event that a decision depends on (approve, deny, a job's start; issue 11 item
 * 9): called under the store lock before the decision is committed, which is not taken when
 * this fails. Nothing is logged: the failure is returned in e (code "audit_failed", the reason in
 * the message) for the caller to refuse with. */
int worker_audit_required(Worker *w, const char *event, json_t *fields, TfwError *e);


/* The wake file in <state_dir>: a running daemon watches it, and in path mode
 * tentaflake-worker-queue@NAME.path starts `drain` while it exists (PathExists=). Whoever
 * reloads the queue removes it first, so it is never left behind work taken. */
#define WORKER_WAKE_FILE ".wake"
/* `cache clear` asks the running daemon to empty the build cache (it lives in the daemon's
 * memory, docs/cache.md) by making this file in state_dir; the daemon removes it when done. Its
 * content: the operator's name. */
#define WORKER_CACHE_CLEAR_FILE "cache-clear"
