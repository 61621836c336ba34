/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/process.h"
#include "common/root-dir.h"
#include "orchestrator/notify.h"

#define NOTIFY_ENV_MAX 9

int notify_command_check(const char *path, char *why, size_t size) {
        char dir[PATH_MAX], dummy[8];
        TfwError e = {0};
        struct stat st;

        if (!why) {
                why = dummy;
                size = sizeof(dummy);
        }
        const char *slash = strrchr(path, '/');
        if (path[0] != '/' || !slash || !slash[1] || (size_t) (slash - path) >= sizeof(dir)) {
                snprintf(why, size, "'%s' is not an absolute path to a file", path);
                return -EINVAL;
        }
        snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int) (slash - path), path);
        _cleanup_close_ int dfd = root_dir_open("notify.command[0]", dir, false, 0, 0, 0, NULL, &e);
        if (dfd < 0) {
                snprintf(why, size, "%s", e.message);
                return dfd;
        }
        if (fstat(dfd, &st) < 0 || !root_dir_is_private(st.st_uid, st.st_mode)) {
                snprintf(why, size, "'%s' is not root's alone (owner %u, mode %04o): someone else could put another "
                         "hook there", dir, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777));
                return -EPERM;
        }
        _cleanup_close_ int fd = openat(dfd, slash + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                snprintf(why, size, "'%s': %s", path, strerror(errno));
                return -errno;
        }
        if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
                snprintf(why, size, "'%s' is %s (owner %u, mode %04o): it must be a file of root's that nobody else "
                         "can write", path, S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISREG(st.st_mode) ? "a file"
                                                                                             : "not a file",
                         (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777));
                return -EPERM;
        }
        return 0;
}

/* In the hook's own process: drop to the hook's identity for good, then exec. */
_noreturn_ static void exec_hook(const ConfigNotify *n, char **env, pid_t supervisor) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || child_setup_stdio(null, null, null) < 0)
                _exit(126);
        if (setgroups(0, NULL) < 0 || setresgid(n->gid, n->gid, n->gid) < 0 || setresuid(n->uid, n->uid, n->uid) < 0)
                _exit(126);
        if (getuid() != n->uid || geteuid() != n->uid || getegid() != n->gid || setuid(0) == 0)
                _exit(126);
        /* Changing the uid cleared the parent-death signal: armed again, so that the hook never
         * outlives the supervisor that bounds it. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != supervisor || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                _exit(126);
        if (chdir("/") < 0)
                _exit(126);
        execve(n->command[0], n->command, env);
        _exit(127);
}

/* Wait for the hook to end, for at most timeout, without reaping it: its pid (and so its process
 * group's id) cannot be taken by another process while it is a zombie, so what it left in its
 * group is killed with it, then it is reaped. */
static int wait_hook(pid_t hook, usec_t timeout, int *ret_status) {
        usec_t deadline = now_monotonic() + timeout;
        siginfo_t si;
        int r = 0;
        for (;;) {
                si = (siginfo_t){};
                if (waitid(P_PID, (id_t) hook, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno != EINTR) {
                        r = -errno;
                        break;
                }
                if (si.si_pid == hook)
                        break;
                if (now_monotonic() >= deadline) {
                        r = -ETIMEDOUT;
                        break;
                }
                nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
        }
        (void) kill(-hook, SIGKILL);
        (void) kill(hook, SIGKILL);
        int st = 0;
        /* Bounded too (threat 13): one the kernel holds past the bound is left, and said. */
        int k = process_wait(hook, -EBADF, PROCESS_REAP_AFTER_KILL_USEC, &st);
        if (k < 0 && r == 0)
                r = k == -ETIMEDOUT ? -EBUSY : k;
        *ret_status = st;
        return r;
}

static void report_outcome(const Worker *w, const char *id, int r, int status) {
        const ConfigNotify *n = &w->config->notify;
        if (r == -ETIMEDOUT)
                worker_say(w, LOG_WARNING, "notify: the hook for '%s' ran longer than notify.timeout_seconds (%u) and "
                           "was killed", id, n->timeout_seconds);
        else if (r == -EBUSY)
                worker_say(w, LOG_WARNING, "notify: the hook for '%s' did not end within %u s of SIGKILL and is left",
                           id, (unsigned) (PROCESS_REAP_AFTER_KILL_USEC / USEC_PER_SEC));
        else if (r < 0)
                worker_say(w, LOG_WARNING, "notify: cannot wait for the hook for '%s': %s", id, strerror(-r));
        else if (WIFEXITED(status) && WEXITSTATUS(status) == 126)
                worker_say(w, LOG_WARNING, "notify: the hook for '%s' could not take uid %u gid %u and no_new_privs", id,
                           (unsigned) n->uid, (unsigned) n->gid);
        else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
                worker_say(w, LOG_WARNING, "notify: the hook for '%s' could not be run: '%s' is missing or not "
                           "executable by uid %u", id, n->command[0], (unsigned) n->uid);
        else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
                worker_say(w, LOG_WARNING, "notify: the hook for '%s' failed with exit status %d", id,
                           WEXITSTATUS(status));
        else if (WIFSIGNALED(status))
                worker_say(w, LOG_WARNING, "notify: the hook for '%s' was killed by signal %d", id, WTERMSIG(status));
        else
                worker_say(w, LOG_DEBUG, "notify: the hook for '%s' ran", id);
}

/* The supervising child: nothing of the daemon but stderr (its log) stays open. */
_noreturn_ static void supervise(const Worker *w, const char *id, char **env) {
        const ConfigNotify *n = &w->config->notify;
        char why[512];
        pid_t hook, self = getpid();
        int status = 0;

        (void) close_range(3, ~0U, 0);
        if (notify_command_check(n->command[0], why, sizeof(why)) < 0) {
                worker_say(w, LOG_WARNING, "notify: the hook for '%s' is not run: %s", id, why);
                _exit(1);
        }
        int r = safe_fork(FORK_DEATHSIG, &hook);
        if (r == 0)
                exec_hook(n, env, self);
        if (r < 0) {
                worker_say(w, LOG_WARNING, "notify: cannot start the hook for '%s': %s", id, strerror(-r));
                _exit(1);
        }
        r = wait_hook(hook, (usec_t) n->timeout_seconds * USEC_PER_SEC, &status);
        report_outcome(w, id, r, status);
        _exit(0);
}

bool notify_reaped(Worker *w, pid_t pid) {
        for (size_t i = 0; pid > 0 && i < NOTIFY_RUNNING_MAX; i++)
                if (w->notify_pids[i] == pid) {
                        w->notify_pids[i] = 0;
                        return true;
                }
        return false;
}

static pid_t *free_slot(Worker *w) {
        for (size_t i = 0; i < NOTIFY_RUNNING_MAX; i++)
                if (w->notify_pids[i] == 0)
                        return &w->notify_pids[i];
        return NULL;
}

void notify_pending(Worker *w, const char *id, const char *action_class, const char *reason,
                    const char *sha256) {
        const ConfigNotify *n = &w->config->notify;
        char *env[NOTIFY_ENV_MAX + 1] = {};
        size_t k = 0;
        pid_t pid, *slot;

        if (!n->command)
                return;
        if (!(slot = free_slot(w))) {
                worker_say(w, LOG_WARNING, "notify: %zu hooks are still running: not run for '%s' (the journal line "
                           "above and 'list' tell of it)", NOTIFY_RUNNING_MAX, id);
                return;
        }
        _cleanup_free_ char *approve = worker_approve_command(w, id, sha256);
        if (asprintf(&env[k++], "TENTAFLAKE_EVENT=pending") < 0 ||
            asprintf(&env[k++], "TENTAFLAKE_WORKER=%s", w->config->name) < 0 ||
            asprintf(&env[k++], "TENTAFLAKE_ID=%s", id) < 0 ||
            asprintf(&env[k++], "TENTAFLAKE_CLASS=%s", action_class) < 0 ||
            asprintf(&env[k++], "TENTAFLAKE_REASON=%s", reason ? reason : "") < 0 ||
            asprintf(&env[k++], "TENTAFLAKE_SHA256=%s", sha256) < 0 ||
            asprintf(&env[k++], "TENTAFLAKE_APPROVE=%s", approve ? approve : "") < 0 ||
            asprintf(&env[k++], "PATH=/usr/bin:/bin") < 0) {
                env[k - 1] = NULL;
                worker_say(w, LOG_WARNING, "notify: out of memory: the hook for '%s' is not run", id);
                goto out;
        }
        int r = safe_fork(0, &pid);
        if (r == 0)
                supervise(w, id, env);
        if (r < 0)
                worker_say(w, LOG_WARNING, "notify: cannot start the hook for '%s': %s", id, strerror(-r));
        else
                *slot = pid;
out:
        for (size_t i = 0; i < k; i++)
                free(env[i]);
}
