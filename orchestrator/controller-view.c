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
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/process.h"
#include "common/resolve.h"
#include "common/time-util.h"
#include "orchestrator/controller-view.h"

usec_t controller_view_test_timeout_usec = 10 * USEC_PER_SEC;
bool controller_view_test_stop_child = false;
#define VIEW_EXIT_GRACE_USEC (2 * USEC_PER_SEC)
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
                emit(out, "inbox", true, "'%s' is not made yet: the worker makes it, owned by uid %u", path,
                     (unsigned) uid);
                return;
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

/* In the child: only the pipe stays open (the daemon's locks and directories must not outlive
 * it in a process the agent can signal), then the controller's identity, then the parent-death
 * signal armed again (changing the uid cleared it). */
_noreturn_ static void run_as_controller(int out, const Config *c, pid_t parent) {
        gid_t g = c->container_gid;
        if (dup2(out, 3) < 0 || close_range(4, ~0U, 0) < 0)
                _exit(1);
        out = 3;
        if (setgroups(1, &g) < 0 || setresgid(g, g, g) < 0 ||
            setresuid(c->container_uid, c->container_uid, c->container_uid) < 0) {
                emit(out, "results_view", false, "cannot become uid %u gid %u to look: %m",
                     (unsigned) c->container_uid, (unsigned) g);
                _exit(1);
        }
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                _exit(1);
        if (controller_view_test_stop_child)
                (void) raise(SIGSTOP);
        check_inbox(out, c, c->container_uid);
        check_results(out, c, c->container_uid);
        _exit(0);
}

/* Read the child's lines until it closes the pipe (true) or the deadline passes (false): the
 * child runs as the controller, whom the agent is, and the agent can stop it. */
static bool read_bounded(int fd, char *buf, size_t size) {
        usec_t deadline = now_monotonic() + controller_view_test_timeout_usec;
        size_t n = 0;
        bool eof = false;
        while (n < size - 1) {
                usec_t now = now_monotonic();
                if (now >= deadline)
                        break;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int pr = poll(&p, 1, (int) ((deadline - now) / USEC_PER_MSEC) + 1);
                if (pr < 0 && errno == EINTR)
                        continue;
                if (pr <= 0)
                        break;
                ssize_t k = read(fd, buf + n, size - 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                eof = k == 0;
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        buf[n] = 0;
        return eof;
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

        if (!check_workspace(c, use_openat2, report, userdata))
                return;
        if (pipe2(pipefd, O_CLOEXEC) < 0) {
                report(userdata, "results_view", false, "cannot look as the controller: pipe failed");
                return;
        }
        pid_t parent = getpid();
        int r = safe_fork(FORK_DEATHSIG, &pid);
        if (r == 0) {
                close(pipefd[0]);
                run_as_controller(pipefd[1], c, parent);
        }
        close(pipefd[1]);
        if (r < 0) {
                close(pipefd[0]);
                report(userdata, "results_view", false, "cannot look as the controller: fork failed");
                return;
        }
        bool eof = read_bounded(pipefd[0], buf, sizeof(buf));
        close(pipefd[0]);
        int status = 0;
        /* It had its time in read_bounded: after its end of the pipe closed, a moment to exit;
         * otherwise it is killed now. */
        r = waitpid_bounded(pid, eof ? VIEW_EXIT_GRACE_USEC : 0, &status);
        bool finished = r >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!finished) {
                char why[160];
                snprintf(why, sizeof(why), "the check as uid %u did not finish within %.1f s (stopped or killed?)",
                         (unsigned) c->container_uid, (double) controller_view_test_timeout_usec / USEC_PER_SEC);
                report(userdata, "results_view", false, why);
                return;
        }
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
