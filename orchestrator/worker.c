/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/fd-util.h"
#include "common/log.h"
#include "common/resolve.h"
#include "common/shell-word.h"
#include "orchestrator/worker.h"

void worker_say(const Worker *w, int level, const char *fmt, ...) {
        char line[2048];
        va_list ap;

        if (!w->report)
                return;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        w->report(w->report_userdata, level, line);
}

char *worker_approve_command(const Worker *w, const char *id, const char *sha256) {
        char conventional[PATH_MAX], *out = NULL;
        const char *path = w->config_path;

        snprintf(conventional, sizeof(conventional), WORKER_CONFIG_DIR "/%s.json", w->config->name);
        if (!path || streq(path, conventional)) {
                if (asprintf(&out, "tentaflake-worker --name %s approve %s --expect-sha256 %s", w->config->name, id,
                             sha256) < 0)
                        return NULL;
                return out;
        }
        _cleanup_free_ char *word = shell_word(path);
        if (!word || asprintf(&out, "tentaflake-worker --config %s approve %s --expect-sha256 %s", word, id, sha256) < 0)
                return NULL;
        return out;
}

int worker_open(Worker *w, const Config *c, TfwError *e) {
        int r;

        *w = (Worker){.config = c, .dirs = WORKER_DIRS_NULL, .inbox_fd = -EBADF, .jobs_lock_fd = -EBADF, .watch_fd = -EBADF, .watch_view_fd = -EBADF};
        config_request_policy(c, &w->policy);
        w->use_openat2 = openat2_usable();
        r = worker_dirs_open(c, &w->dirs, e);
        if (r < 0)
                return r;
        r = audit_open(w->dirs.state_fd, c->audit_generations, &w->audit, e);
        if (r < 0) {
                worker_dirs_close(&w->dirs);
                return r;
        }
        return 0;
}

void worker_close(Worker *w) {
        json_decref(w->isolation);
        w->isolation = NULL;
        audit_close(w->audit);
        w->audit = NULL;
        worker_dirs_close(&w->dirs);
        w->inbox_fd = safe_close(w->inbox_fd);
}

int worker_audit_best_effort(Worker *w, const char *event, json_t *fields) {
        TfwError e = {0};
        int r = audit_append(w->audit, event, fields, &e);
        /* The caller goes on after a failed append, so the failure is never silent: it reaches
         * the journal here. */
        if (r < 0)
                worker_say(w, LOG_ERR, "audit: cannot record '%s': %s", event, e.message);
        return r;
}

int worker_audit_required(Worker *w, const char *event, json_t *fields, TfwError *e) {
        TfwError ae = {0};
        int r = audit_append(w->audit, event, fields, &ae);
        if (r < 0)
                return tfw_error(e, -r, "audit_failed", "cannot record '%s' in the audit log: %s", event,
                                 ae.message[0] ? ae.message : strerror(-r));
        return r;
}

int worker_workspace_error(TfwError *e, const char *code, const char *workspace, int err) {
        switch (err) {
        case -ENOENT:
                return tfw_error(e, ENOENT, code,
                                 "workspace '%s' does not exist (make it, owned by the controller's uid: docs/install.md)",
                                 workspace);
        case -ENOTDIR:
                return tfw_error(e, ENOTDIR, code, "workspace '%s': it, or a directory on the way to it, is not a directory",
                                 workspace);
        case -ELOOP:
                return tfw_error(e, ELOOP, code,
                                 "workspace '%s' has a symbolic link on its path; it is opened without following any", workspace);
        default:
                return tfw_error(e, -err, code, "workspace '%s' cannot be opened: %s", workspace, strerror(-err));
        }
}

int worker_workspace_check(const Config *c, TfwError *e) {
        _cleanup_close_ int fd = open_dir_path_nofollow(c->workspace, openat2_usable());
        return fd < 0 ? worker_workspace_error(e, "workspace", c->workspace, fd) : 0;
}

int worker_daemon_report(int state_fd, const char *name, json_t **ret) {
        _cleanup_close_ int fd = openat(state_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *text = NULL;
        size_t n = 0;
        *ret = NULL;
        if (fd < 0)
                return errno == ENOENT ? 0 : -EBADMSG;
        if (read_full_fd_bounded(fd, 4096, &text, &n) < 0)
                return -EBADMSG;
        json_t *j = json_loadb(text, n, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return -EBADMSG;
        }
        *ret = j;
        return 0;
}
