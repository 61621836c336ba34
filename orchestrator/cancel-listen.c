/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "orchestrator/cancel-listen.h"

static void *listen_thread(void *userdata) {
        CancelListener *l = userdata;
        for (;;) {
                struct pollfd p[2] = {{.fd = l->fd, .events = POLLIN}, {.fd = l->stop[0], .events = POLLIN}};
                if (poll(p, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return NULL;
                }
                if (p[1].revents)
                        return NULL;
                char b[16];
                ssize_t n = read(l->fd, b, sizeof(b));
                if (n < 0 && (errno == EINTR || errno == EAGAIN))
                        continue;
                if (n <= 0)
                        return NULL; /* the daemon is gone: no cancel from it any more */
                if (n == 1 && b[0] == CANCEL_BYTE) {
                        exec_cancel(l->cancel);
                        return NULL;
                }
        }
}

int cancel_listen_start(CancelListener *l, int fd, ExecCancel *c) {
        if (fd < 0)
                return -EBADF;
        if (pipe2(l->stop, O_CLOEXEC) < 0)
                return -errno;
        l->fd = fd;
        l->cancel = c;
        int r = pthread_create(&l->thread, NULL, listen_thread, l);
        if (r != 0) {
                l->stop[0] = safe_close(l->stop[0]);
                l->stop[1] = safe_close(l->stop[1]);
                return -r;
        }
        l->started = true;
        return 0;
}

void cancel_listen_stop(CancelListener *l) {
        if (l->started) {
                if (write(l->stop[1], "x", 1) < 0) /* a pipe of its own, empty: never full */
                        (void) pthread_cancel(l->thread);
                (void) pthread_join(l->thread, NULL);
                l->started = false;
        }
        l->stop[0] = safe_close(l->stop[0]);
        l->stop[1] = safe_close(l->stop[1]);
}
