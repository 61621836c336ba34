/* SPDX-License-Identifier: MIT */
/* The workspace's watch in the daemon. See watch.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <syslog.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "orchestrator/watch.h"

DirtySet *watch_start(Worker *w) {
        DirtySet *s = NULL;
        if (w->dirs.store_fd < 0)
                return NULL;
        int r = dirty_set_new(&s);
        if (r < 0) {
                worker_say(w, LOG_WARNING, "the workspace cannot be watched (%s): every request reads all of it",
                           strerror(-r));
                return NULL;
        }
        w->watch_fd = dirty_set_fd(s);
        return s;
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
