/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/process.h"
#include "common/resolve.h"
#include "orchestrator/controller-view.h"

#define VIEW_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define VIEW_LINE_MAX 1024

/* One line "check\tok\tdetail\n" to the parent. */
static void emit(int fd, const char *check, bool ok, const char *fmt, ...) _printf_(4, 5);
static void emit(int fd, const char *check, bool ok, const char *fmt, ...) {
        char detail[VIEW_LINE_MAX - 64], line[VIEW_LINE_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        detail[strcspn(detail, "\t\n")] = 0;
        int n = snprintf(line, sizeof(line), "%s\t%d\t%s\n", check, ok, detail);
        if (n > 0 && write(fd, line, MIN((size_t) n, sizeof(line) - 1)) < 0)
                _exit(1); /* the parent is gone: nobody to tell */
}

static void check_inbox(int out, const Config *c, uid_t uid) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/.tentaflake-worker/inbox", c->workspace);
        if (access(path, F_OK) < 0 && errno == ENOENT) {
                snprintf(path, sizeof(path), "%s/.tentaflake-worker", c->workspace);
                if (access(path, F_OK) < 0 && errno == ENOENT) {
                        emit(out, "inbox", true, "'%s/.tentaflake-worker/inbox' is not made yet: the worker makes it, "
                             "owned by uid %u", c->workspace, (unsigned) uid);
                        return;
                }
                snprintf(path, sizeof(path), "%s/.tentaflake-worker/inbox", c->workspace);
        }
        if (access(path, W_OK | X_OK) < 0)
                emit(out, "inbox", false, "uid %u cannot write requests into '%s': %m", (unsigned) uid, path);
        else
                emit(out, "inbox", true, "uid %u can write requests into '%s'", (unsigned) uid, path);
}

/* Every existing directory from "/" down to results_dir must be searchable, results_dir
 * readable. */
static void check_results(int out, const Config *c, uid_t uid) {
        char prefix[PATH_MAX];
        const char *p = c->results_dir;
        size_t len = strlen(p);

        for (size_t i = 1; i <= len; i++) {
                if (i < len && p[i] != '/')
                        continue;
                snprintf(prefix, sizeof(prefix), "%.*s", (int) i, p);
                struct stat st;
                if (stat(prefix, &st) < 0) {
                        if (errno == ENOENT)
                                emit(out, "results_view", true,
                                     "'%s' is not made yet; uid %u can reach where it will be", p, (unsigned) uid);
                        else
                                emit(out, "results_view", false, "uid %u cannot look at '%s': %m", (unsigned) uid,
                                     prefix);
                        return;
                }
                /* Not a directory: results_dir's own check, made as
                 * root, names that; a line here would only repeat it. */
                if (!S_ISDIR(st.st_mode))
                        return;
                if (access(prefix, X_OK) < 0) {
                        int err = errno;
                        emit(out, "results_view", false,
                             "uid %u cannot reach '%s': '%s' (owner %u:%u, mode %04o) cannot be searched (%s); the "
                             "controller cannot read its results", (unsigned) uid, p, prefix, (unsigned) st.st_uid,
                             (unsigned) st.st_gid, (unsigned) (st.st_mode & 07777), strerror(err));
                        return;
                }
        }
        _cleanup_close_ int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_closedir_ DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (d)
                fd = -EBADF; /* the DIR owns it now */
        errno = 0;
        if (!d || (!readdir(d) && errno))
                emit(out, "results_view", false, "uid %u cannot read '%s': %m", (unsigned) uid, p);
        else
                emit(out, "results_view", true, "uid %u can read '%s'", (unsigned) uid, p);
}

_noreturn_ static void run_as_controller(int out, const Config *c) {
        gid_t g = c->container_gid;
        if (setgroups(1, &g) < 0 || setresgid(g, g, g) < 0 ||
            setresuid(c->container_uid, c->container_uid, c->container_uid) < 0) {
                emit(out, "results_view", false, "cannot become uid %u gid %u to look: %m",
                     (unsigned) c->container_uid, (unsigned) g);
                _exit(1);
        }
        check_inbox(out, c, c->container_uid);
        check_results(out, c, c->container_uid);
        _exit(0);
}

/* As root: the workspace itself (a symlink on its path is never followed). */
static bool check_workspace(const Config *c, bool use_openat2, ControllerViewReport report, void *userdata) {
        char detail[VIEW_LINE_MAX];
        struct stat st;
        _cleanup_close_ int fd = open_dir_path_nofollow(c->workspace, use_openat2);
        if (fd < 0) {
                snprintf(detail, sizeof(detail), "'%s' %s", c->workspace,
                         fd == -ENOENT ? "does not exist (make it, owned by container_uid: docs/install.md)"
                         : fd == -ENOTDIR ? "is not a directory, or a directory on the way to it is not"
                         : fd == -ELOOP  ? "has a symbolic link on its path; it is never followed"
                                         : strerror(-fd));
                report(userdata, "workspace", false, detail);
                return false;
        }
        if (fstat(fd, &st) < 0) {
                snprintf(detail, sizeof(detail), "cannot stat '%s': %s", c->workspace, strerror(errno));
                report(userdata, "workspace", false, detail);
                return false;
        }
        bool ok = st.st_uid == c->container_uid;
        if (ok)
                snprintf(detail, sizeof(detail), "'%s' is owned by container_uid %u", c->workspace,
                         (unsigned) c->container_uid);
        else
                snprintf(detail, sizeof(detail), "'%s' is owned by uid %u, not by container_uid %u, as whom the "
                         "agent works there", c->workspace, (unsigned) st.st_uid, (unsigned) c->container_uid);
        report(userdata, "workspace", ok, detail);
        return true;
}

void controller_view_check(const Config *c, bool use_openat2, ControllerViewReport report, void *userdata) {
        int pipefd[2];
        pid_t pid;
        char buf[4 * VIEW_LINE_MAX + 1];
        size_t n = 0;

        if (!check_workspace(c, use_openat2, report, userdata))
                return;
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                report(userdata, "results_view", false, "cannot look as the controller: pipe failed");
                return;
        }
        int r = safe_fork(FORK_DEATHSIG, &pid);
        if (r == 0) {
                close(pipefd[0]);
                run_as_controller(pipefd[1], c);
        }
        close(pipefd[1]);
        if (r < 0) {
                close(pipefd[0]);
                report(userdata, "results_view", false, "cannot look as the controller: fork failed");
                return;
        }
        for (ssize_t k; n < sizeof(buf) - 1 && (k = read(pipefd[0], buf + n, sizeof(buf) - 1 - n)) != 0;) {
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        break;
                n += (size_t) k;
        }
        close(pipefd[0]);
        int status;
        (void) waitpid_bounded(pid, VIEW_TIMEOUT_USEC, &status);
        buf[n] = 0;
        for (char *line = buf, *next; *line; line = next) {
                next = line + strcspn(line, "\n");
                if (*next)
                        *next++ = 0;
                char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
                if (!t2)
                        continue;
                *t1 = *t2 = 0;
                report(userdata, line, t1[1] == '1', t2 + 1);
        }
}
