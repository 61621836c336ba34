/* SPDX-License-Identifier: MIT */
/* The workspace's watch in the daemon. See watch.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/time-util.h"
#include "orchestrator/scratch.h"
#include "orchestrator/watch.h"

uint64_t watch_host_max(void) {
        _cleanup_close_ int fd = open("/proc/sys/fs/inotify/max_user_watches", O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *s = NULL;
        unsigned long long v;
        if (fd < 0 || read_full_fd_bounded(fd, 64, &s, NULL) < 0 || sscanf(s, "%llu", &v) != 1)
                return 0;
        return v;
}

uint32_t watch_budget(const Config *c, uint64_t host_max) {
        uint64_t b = c->limits.max_watches;
        if (host_max > 0)
                b = MIN(b, host_max / 4);
        return (uint32_t) MIN(b, (uint64_t) UINT32_MAX);
}

/* The file system's mark (snapshot/fan-mark.h) beside the directories' watch: said either way. */
static void watch_mark(Worker *w, DirtySet *s) {
        char why[256] = "";
        _cleanup_close_ int fd = open(w->config->workspace, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int r = fd < 0 ? -errno : dirty_set_mark(s, fd, why, sizeof(why));
        if (fd < 0)
                snprintf(why, sizeof(why), "cannot open the workspace: %s", strerror(-r));
        if (r < 0) {
                worker_say(w, LOG_NOTICE, "the workspace's file system cannot be marked (%s): every request asks every "
                           "file the watch vouches for by stat", why);
                return;
        }
        /* The daemon's own reads (the walk at start, the inbox) are not stamped. */
        dirty_set_own(s, getpid(), true);
        worker_say(w, LOG_INFO, "the workspace's file system is marked (fanotify): a request asks by stat only the files "
                   "it reports");
}

DirtySet *watch_start(Worker *w) {
        DirtySet *s = NULL;
        if (w->dirs.store_fd < 0)
                return NULL;
        uint64_t host = watch_host_max();
        uint32_t budget = watch_budget(w->config, host);
        if (budget == 0) {
                worker_say(w, LOG_WARNING, "the workspace is not watched (limits.max_watches %llu, the host's "
                           "fs.inotify.max_user_watches %llu): every request reads all of it",
                           (unsigned long long) w->config->limits.max_watches, (unsigned long long) host);
                return NULL;
        }
        int r = dirty_set_new(budget, &s);
        if (r < 0) {
                worker_say(w, LOG_WARNING, "the workspace cannot be watched (%s): every request reads all of it",
                           strerror(-r));
                return NULL;
        }
        if (budget < w->config->limits.max_watches)
                worker_say(w, LOG_NOTICE, "the workspace's watch holds at most %u inotify watches: limits.max_watches "
                           "is %llu, but never more than a quarter of the host's fs.inotify.max_user_watches (%llu)",
                           budget, (unsigned long long) w->config->limits.max_watches, (unsigned long long) host);
        else
                log_debug("the workspace's watch holds at most %u inotify watches (the host has %llu for root)", budget,
                          (unsigned long long) host);
        /* Each lane's next walk starts where its last one began: twice the lanes leaves room for
         * views whose job walked nothing (refused, streamed) before a lane's stamps go; and while
         * the mark holds few stamps a lane seldom taken keeps its word. */
        dirty_set_keep_views(s, 2 * scratch_store_lanes(w->config), DIRTY_SET_KEEP_STAMPS);
        w->watch_fd = dirty_set_fd(s);
        w->watch_budget = dirty_set_budget(s);
        watch_mark(w, s);
        return s;
}

void watch_after_job(Worker *w, const char *id, const SnapshotSummary *s) {
        DirtyBudget *b = w->watch_budget;
        if (!b || s->watch == SNAPSHOT_WATCH_NONE)
                return;
        uint32_t held = atomic_load(&b->held), no = 0;
        uint64_t host = watch_host_max();
        if (s->dirs_over_budget && atomic_compare_exchange_strong(&b->said, &no, 1))
                worker_say(w, LOG_WARNING, "job '%s': the workspace has more directories (%" PRIu64 ") than its watch may "
                           "hold (%u inotify watches: limits.max_watches %llu, at most a quarter of the host's "
                           "fs.inotify.max_user_watches %llu): %" PRIu64 " directories are read by every request",
                           id, s->dirs + 1, b->max, (unsigned long long) w->config->limits.max_watches,
                           (unsigned long long) host, s->dirs_over_budget);
        if (s->dirs_unwatched)
                worker_say(w, LOG_WARNING, "job '%s': %" PRIu64 " directories of the workspace could not be watched (the "
                           "host has no inotify watch left for root: fs.inotify.max_user_watches %llu): every request "
                           "reads them", id, s->dirs_unwatched, (unsigned long long) host);
        _cleanup_(json_decrefp) json_t *j = json_pack(
                "{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "budget", (json_int_t) b->max, "held", (json_int_t) held,
                "max_watches", (json_int_t) w->config->limits.max_watches, "host_max_user_watches", (json_int_t) host,
                "directories", (json_int_t) (s->dirs + 1), "over_budget", (json_int_t) s->dirs_over_budget, "unwatched",
                (json_int_t) s->dirs_unwatched, "at", (json_int_t) (now_realtime() / USEC_PER_SEC));
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (text)
                (void) write_file_replace_at(w->dirs.state_fd, "watch.json", text, strlen(text), 0600, 0, 0);
}

int watch_view(DirtySet *s) {
        int fd = -EBADF;
        if (!s)
                return -EBADF;
        int r = dirty_set_read(s);
        if (r >= 0)
                r = dirty_set_export(s, &fd);
        return r < 0 ? r : fd;
}

ssize_t watch_send_id(int sock, const char *id, size_t len, int view_fd) {
        struct iovec iov = {.iov_base = (void *) id, .iov_len = len};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        if (view_fd >= 0) {
                m.msg_control = control.buf;
                m.msg_controllen = sizeof(control.buf);
                struct cmsghdr *c = CMSG_FIRSTHDR(&m);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &view_fd, sizeof(int));
        }
        return sendmsg(sock, &m, MSG_NOSIGNAL);
}

ssize_t watch_recv_id(int sock, char *buf, size_t size, int *ret_view_fd) {
        struct iovec iov = {.iov_base = buf, .iov_len = size};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                           .msg_controllen = sizeof(control.buf)};
        ssize_t n;
        *ret_view_fd = -EBADF;
        do
                n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int))) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(c), sizeof(int));
                        if (*ret_view_fd >= 0)
                                safe_close(fd); /* one only */
                        else
                                *ret_view_fd = fd;
                }
        return n;
}
