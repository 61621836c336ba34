/* SPDX-License-Identifier: MIT */
/* The seccomp listener of a runc capsule (capsule/seccomp-listen.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "capsule/seccomp-listen.h"
#include "capsule/seccomp-notify.h"
#include "common/macro.h"

/* runc's message: the container's state (specs.ContainerProcessState), a few KiB; read whole
 * or refused. */
#define STATE_MAX (256U * 1024)
/* How long runc may take between its connect and its message. */
#define MESSAGE_WAIT_MS 10000
#define SECCOMP_NOTIFY_LINK "anon_inode:seccomp notify"

struct SeccompListener {
        char path[sizeof(((struct sockaddr_un *) NULL)->sun_path)];
        int listen_fd, stop_fd;
        pid_t runtime_pid;
        pthread_t thread;
        bool started;
        Walls walls;            /* the thread's until it is joined */
};

int seccomp_listen_open(const char *path, SeccompListener **ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (path[0] != '/' || strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        SeccompListener *l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        snprintf(l->path, sizeof(l->path), "%s", path);
        memcpy(sa.sun_path, path, strlen(path));
        l->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        int r = l->listen_fd < 0 || l->stop_fd < 0 ? -errno : 0;
        if (r >= 0 && unlink(path) < 0 && errno != ENOENT)
                r = -errno;
        /* Only root connects: the directory is root's, 0700 (the umask is the process's, not
         * this thread's to change), and the socket 0600. */
        bool bound = r >= 0 && bind(l->listen_fd, (struct sockaddr *) &sa, sizeof(sa)) == 0;
        if (r >= 0 && !bound)
                r = -errno;
        if (r >= 0 && chmod(path, 0600) < 0)
                r = -errno;
        if (r >= 0 && listen(l->listen_fd, SECCOMP_LISTEN_TRIES) < 0)
                r = -errno;
        if (r < 0) {
                if (!bound)
                        l->path[0] = '\0'; /* not ours to remove */
                seccomp_listen_finish(l, NULL);
                return r;
        }
        *ret = l;
        return 0;
}

/* Wait until fd is readable or the listener is stopped: 1, 0 (stopped, or timeout_ms passed)
 * or a negative errno. */
static int wait_readable(SeccompListener *l, int fd, int timeout_ms) {
        struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = l->stop_fd, .events = POLLIN } };
        for (;;) {
                int n = poll(p, 2, timeout_ms);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0 || p[1].revents)
                        return 0;
                return 1;
        }
}

static bool is_notify_fd(int fd) {
        char link[64], target[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n < 0)
                return false;
        target[n] = '\0';
        return streq(target, SECCOMP_NOTIFY_LINK);
}

/* The one descriptor of runc's message on conn, or a negative errno (every descriptor that
 * came with a message that is not exactly one notification descriptor closed). */
static int receive_fd(SeccompListener *l, int conn) {
        _cleanup_free_ char *buf = malloc(STATE_MAX);
        union {
                struct cmsghdr h;
                char space[CMSG_SPACE(sizeof(int) * 4)];
        } ctl;
        struct iovec iov = { .iov_base = buf, .iov_len = STATE_MAX };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &ctl, .msg_controllen = sizeof(ctl) };
        int fd = -EBADF, n_fds = 0;

        if (!buf)
                return -ENOMEM;
        int r = wait_readable(l, conn, MESSAGE_WAIT_MS);
        if (r <= 0)
                return r < 0 ? r : -ETIMEDOUT;
        ssize_t k = recvmsg(conn, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (k < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < cnt; i++) {
                        int got;
                        memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (n_fds++ == 0)
                                fd = got;
                        else
                                safe_close(got);
                }
        }
        if (n_fds != 1 || (m.msg_flags & MSG_CTRUNC) || !is_notify_fd(fd)) {
                safe_close(fd);
                return -EBADMSG;
        }
        return fd;
}

/* The notification descriptor from the runtime's connection, or a negative errno (-ECANCELED:
 * stopped before it came): at most SECCOMP_LISTEN_TRIES connections looked at; then the socket
 * is closed and removed. */
static int take_notify_fd(SeccompListener *l) {
        int r = -ENOENT;
        for (unsigned tries = 0; tries < SECCOMP_LISTEN_TRIES; tries++) {
                struct ucred cred;
                socklen_t len = sizeof(cred);
                r = wait_readable(l, l->listen_fd, -1);
                if (r <= 0) {
                        r = r < 0 ? r : -ECANCELED; /* stopped first */
                        break;
                }
                _cleanup_close_ int conn = accept4(l->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (conn < 0) {
                        r = -errno;
                        continue;
                }
                if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != 0 ||
                    cred.pid != l->runtime_pid) {
                        r = -EPERM;
                        continue;
                }
                r = receive_fd(l, conn);
                if (r >= 0 || r == -ETIMEDOUT)
                        break;
        }
        l->listen_fd = safe_close(l->listen_fd);
        (void) unlink(l->path);
        l->path[0] = '\0';
        return r;
}

/* At most CAPSULE_NOTIFY_ADDR_MAX bytes at the call's address in the caller's memory, read
 * only while the notification is still pending (so the pid is still the caller's). The bytes
 * read, or -1. */
static ssize_t read_address(int notify_fd, const struct seccomp_notif *req, uint64_t ptr, size_t len, void *buf) {
        char mem[64];
        snprintf(mem, sizeof(mem), "/proc/%u/mem", req->pid);
        _cleanup_close_ int fd = open(mem, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        uint64_t id = req->id;
        if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0)
                return -1;
        return pread(fd, buf, len, (off_t) ptr);
}

static void answer(SeccompListener *l, int notify_fd, const struct seccomp_notif *req) {
        uint8_t addr[CAPSULE_NOTIFY_ADDR_MAX];
        uint64_t ptr;
        size_t len;
        ssize_t got = -1;
        SeccompVerdict v;

        if (capsule_seccomp_notify_address(req, &ptr, &len))
                got = read_address(notify_fd, req, ptr, len, addr);
        capsule_seccomp_notify_judge(req, got > 0 ? addr : NULL, got > 0 ? (size_t) got : 0, &v);
        struct seccomp_notif_resp resp = {
                .id = req->id,
                .error = v.cont ? 0 : -v.error,
                .flags = v.cont ? SECCOMP_USER_NOTIF_FLAG_CONTINUE : 0,
        };
        /* ENOENT: the caller is gone (killed meanwhile); nothing to answer. */
        (void) ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
        if (v.wall)
                walls_add(&l->walls, v.wall, 1, "%s", v.detail);
}

/* Until every process of the filter has ended (POLLHUP) or the listener is stopped. */
static void serve(SeccompListener *l, int notify_fd) {
        struct pollfd p[2] = { { .fd = notify_fd, .events = POLLIN }, { .fd = l->stop_fd, .events = POLLIN } };
        for (;;) {
                int n = poll(p, 2, -1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 || p[1].revents)
                        return;
                if (p[0].revents & POLLIN) {
                        struct seccomp_notif req;
                        memset(&req, 0, sizeof(req)); /* the kernel refuses a request not zeroed */
                        if (ioctl(notify_fd, SECCOMP_IOCTL_NOTIF_RECV, &req) == 0)
                                answer(l, notify_fd, &req);
                        else if (errno != ENOENT && errno != EINTR)
                                return; /* ENOENT: its caller was killed meanwhile */
                        continue;
                }
                if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL))
                        return;
        }
}

static void *listen_main(void *arg) {
        SeccompListener *l = arg;
        _cleanup_close_ int fd = take_notify_fd(l);
        if (fd >= 0)
                serve(l, fd);
        return NULL;
}

int seccomp_listen_start(SeccompListener *l, pid_t runtime_pid) {
        sigset_t all, old;
        l->runtime_pid = runtime_pid;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        int r = pthread_create(&l->thread, NULL, listen_main, l);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0)
                return -r;
        l->started = true;
        return 0;
}

void seccomp_listen_finish(SeccompListener *l, Walls *ret) {
        if (!l)
                return;
        if (l->started) {
                uint64_t one = 1;
                (void) !write(l->stop_fd, &one, sizeof(one));
                pthread_join(l->thread, NULL);
        }
        if (ret)
                walls_merge(ret, &l->walls);
        safe_close(l->listen_fd);
        safe_close(l->stop_fd);
        if (l->path[0])
                (void) unlink(l->path);
        free(l);
}
