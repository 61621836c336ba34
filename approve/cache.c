/* SPDX-License-Identifier: MIT */
/* `cache clear` (approve/cache.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "approve/cache.h"
#include "approve/decide.h"
#include "common/fd-util.h"
#include "common/proc-locks.h"

static bool daemon_runs(Worker *w) {
        struct stat st;
        if (fstatat(w->dirs.state_fd, "daemon.lock", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                return false;
        return flock_held(st.st_ino) != 0; /* unreadable /proc/locks: ask it anyway */
}

int cache_clear(Worker *w, bool *ret_daemon, TfwError *e) {
        char who[128];

        if (!w->config->cache.paths)
                return tfw_error(e, EINVAL, "no_cache", "worker '%s' has no build cache (no cache.paths in its configuration)",
                                 w->config->name);
        decide_operator_identity(who, sizeof(who));
        int r = write_file_atomic_at(w->dirs.state_fd, WORKER_CACHE_CLEAR_FILE, who, strlen(who), 0600, (uid_t) -1,
                                     (gid_t) -1);
        if (r < 0)
                return tfw_error(e, -r, "internal", "cannot write '%s/%s': %s", w->config->state_dir,
                                 WORKER_CACHE_CLEAR_FILE, strerror(-r));
        if (!daemon_runs(w)) {
                /* The cache outlives the daemon (state_dir/store): the request is left for the
                 * next start, which takes it before its first job. */
                *ret_daemon = false;
                return 0;
        }
        /* The daemon removes the file once the cache is empty. */
        for (unsigned i = 0; i < CACHE_CLEAR_WAIT_SECONDS * 20; i++) {
                struct stat st;
                if (fstatat(w->dirs.state_fd, WORKER_CACHE_CLEAR_FILE, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
                        *ret_daemon = true;
                        return 0;
                }
                nanosleep(&(struct timespec) { .tv_nsec = 50 * 1000 * 1000 }, NULL);
        }
        return tfw_error(e, ETIMEDOUT, "timeout",
                         "the daemon of worker '%s' did not take the request within %d s; it stays in '%s/%s' and is "
                         "taken when the daemon gets to it", w->config->name, CACHE_CLEAR_WAIT_SECONDS, w->config->state_dir,
                         WORKER_CACHE_CLEAR_FILE);
}
