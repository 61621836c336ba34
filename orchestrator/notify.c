/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/process.h"
#include "orchestrator/notify.h"

#define NOTIFY_ENV_MAX 9

/* In the hook's own process: drop to the hook's identity for good, then exec. */
_noreturn_ static void exec_hook(const ConfigNotify *n, char **env) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || child_setup_stdio(null, null, null) < 0)
                _exit(126);
        if (setgroups(0, NULL) < 0 || setresgid(n->gid, n->gid, n->gid) < 0 || setresuid(n->uid, n->uid, n->uid) < 0)
                _exit(126);
        if (getuid() != n->uid || geteuid() != n->uid || getegid() != n->gid || setuid(0) == 0)
                _exit(126);
        if (chdir("/") < 0)
                _exit(126);
        execve(n->command[0], n->command, env);
        _exit(127);
}

static void report_outcome(const Worker *w, const char *id, int r, int status) {
        const ConfigNotify *n = &w->config->notify;
        if (r == -ETIMEDOUT)
                worker_say(w, LOG_WARNING, "notify: the hook for '%s' ran longer than notify.timeout_seconds (%u) and "
                           "was killed", id, n->timeout_seconds);
        else if (r < 0)
                worker_say(w, LOG_WARNING, "notify: cannot wait for the hook for '%s': %s", id, strerror(-r));
        else if (WIFEXITED(status) && WEXITSTATUS(status) == 126)
                worker_say(w, LOG_WARNING, "notify: the hook for '%s' could not take uid %u gid %u", id,
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
        pid_t hook;
        int status = 0;

        (void) close_range(3, ~0U, 0);
        int r = safe_fork(FORK_DEATHSIG, &hook);
        if (r == 0)
                exec_hook(n, env);
        if (r < 0) {
                worker_say(w, LOG_WARNING, "notify: cannot start the hook for '%s': %s", id, strerror(-r));
                _exit(1);
        }
        r = waitpid_bounded(hook, (usec_t) n->timeout_seconds * USEC_PER_SEC, &status);
        (void) kill(-hook, SIGKILL); /* what it left in its session */
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
