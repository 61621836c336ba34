/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/path-util.h"
#include "common/shell-word.h"
#include "controller/site.h"

static bool has_control_dir(const char *dir) {
        char p[PATH_MAX];
        struct stat st;
        if (path_join_buf(p, sizeof(p), streq(dir, "/") ? "" : dir, CONTROL_DIR_NAME) < 0)
                return false;
        return lstat(p, &st) >= 0 && S_ISDIR(st.st_mode);
}

/* The current directory or its nearest parent holding .tentaflake-worker/. */
static int find_workspace(char **ret, TfwError *e) {
        _cleanup_free_ char *cwd = getcwd(NULL, 0);
        if (!cwd)
                return tfw_error(e, errno, "no_workspace", "cannot get the current directory: %m");
        for (;;) {
                if (has_control_dir(cwd)) {
                        *ret = TAKE_PTR(cwd);
                        return 0;
                }
                char *slash = strrchr(cwd, '/');
                if (!slash || streq(cwd, "/"))
                        break;
                if (slash == cwd)
                        slash[1] = 0;
                else
                        *slash = 0;
        }
        return tfw_error(e, ENOENT, "no_workspace",
                         "no '" CONTROL_DIR_NAME "/' in the current directory or any parent: "
                         "give --workspace DIR (the worker makes it when it starts)");
}

static void load_info(ControllerSite *s, int ctl_fd) {
        _cleanup_close_ int fd = openat(ctl_fd, WORKER_INFO_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        _cleanup_(json_decrefp) json_t *j = NULL;
        struct stat st;
        size_t len;
        WorkerInfo info;
        TfwError e = {0};

        if (fd < 0) {
                snprintf(s->results_error, sizeof(s->results_error),
                         "no readable '%s/" CONTROL_DIR_NAME "/" WORKER_INFO_FILE "' (%s; the worker writes it when it "
                         "starts): give --results DIR",
                         s->workspace, strerror(errno));
                return;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            read_full_fd_bounded(fd, WORKER_INFO_MAX_BYTES, &buf, &len) < 0 ||
            worker_info_parse(buf, len, &info, &j, &e) < 0) {
                snprintf(s->results_error, sizeof(s->results_error),
                         "'%s/" CONTROL_DIR_NAME "/" WORKER_INFO_FILE "' is not usable (%s): give --results DIR",
                         s->workspace, e.message[0] ? e.message : "not a readable regular file");
                return;
        }
        s->policy = info.limits;
        s->results_dir = strdup(info.results_dir);
        s->info = info;
        s->info_json = TAKE_PTR(j);
}

int controller_site_open(const char *workspace, const char *results_dir, ControllerSite *ret, TfwError *e) {
        ControllerSite s = CONTROLLER_SITE_NULL;
        _cleanup_close_ int ctl = -EBADF;
        int r;

        s.policy = request_policy_default;
        if (workspace) {
                s.workspace = realpath(workspace, NULL);
                if (!s.workspace)
                        return tfw_error(e, errno, "no_workspace", "workspace '%s': %m", workspace);
        } else if ((r = find_workspace(&s.workspace, e)) < 0)
                return r;

        /* Where the caller is, below the workspace: its jobs start there (contract section 9). */
        _cleanup_free_ char *here = getcwd(NULL, 0), *real = here ? realpath(here, NULL) : NULL;
        if (real && !streq(real, s.workspace) && path_is_below_or_equal(real, s.workspace) &&
            !(s.cwd = strdup(real + strlen(s.workspace) + (streq(s.workspace, "/") ? 0 : 1)))) {
                r = tfw_error(e, ENOMEM, "internal", "out of memory");
                goto fail;
        }

        char p[PATH_MAX];
        if (path_join_buf(p, sizeof(p), s.workspace, CONTROL_DIR_NAME) < 0) {
                r = tfw_error(e, ENAMETOOLONG, "no_workspace", "workspace '%s': path too long", s.workspace);
                goto fail;
        }
        ctl = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ctl < 0) {
                r = tfw_error(e, errno, "no_workspace", "cannot open '%s' (the worker makes it when it starts): %m", p);
                goto fail;
        }
        s.inbox_fd = openat(ctl, "inbox", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s.inbox_fd < 0) {
                r = tfw_error(e, errno, "no_workspace", "cannot open the inbox '%s/inbox': %m", p);
                goto fail;
        }
        load_info(&s, ctl);
        if (results_dir) {
                free(s.results_dir);
                s.results_dir = realpath(results_dir, NULL);
                if (!s.results_dir) {
                        r = tfw_error(e, errno, "no_results", "results directory '%s': %m", results_dir);
                        goto fail;
                }
        }
        if (s.results_dir) {
                s.results_fd = open(s.results_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (s.results_fd < 0)
                        snprintf(s.results_error, sizeof(s.results_error),
                                 "cannot open the results directory '%s': %s", s.results_dir, strerror(errno));
        }
        *ret = s;
        return 0;
fail:
        controller_site_close(&s);
        return r;
}

void controller_site_close(ControllerSite *s) {
        s->inbox_fd = safe_close(s->inbox_fd);
        s->results_fd = safe_close(s->results_fd);
        free(s->workspace);
        free(s->cwd);
        free(s->results_dir);
        json_decref(s->info_json);
        s->info_json = NULL;
        s->info = (WorkerInfo) {};
        s->workspace = s->cwd = s->results_dir = NULL;
}

int controller_site_need_results(const ControllerSite *s, TfwError *e) {
        if (s->results_fd >= 0)
                return 0;
        return tfw_error(e, ENOENT, "no_results", "cannot wait for the result: %s",
                         s->results_error[0] ? s->results_error : "the results directory is unknown");
}

char *controller_approve_command(const ControllerSite *s, const char *id, const char *sha256) {
        _cleanup_free_ char *cfg = s->info.config ? shell_word(s->info.config) : strdup("<the worker's config>");
        char *out = NULL;
        if (!cfg)
                return NULL;
        if (asprintf(&out, "tentaflake-worker --config %s approve %s --expect-sha256 %s", cfg, id, sha256) < 0)
                return NULL;
        return out;
}

bool controller_inbox_holds(const ControllerSite *s, const char *id) {
        char name[REQUEST_ID_MAX + sizeof(".json")];
        if (snprintf(name, sizeof(name), "%s.json", id) >= (int) sizeof(name))
                return false;
        return faccessat(s->inbox_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
}
