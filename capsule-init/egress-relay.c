/* SPDX-License-Identifier: MIT */
/* The capsule's side of egress (capsule/protocol.h, CAPSULE_EGRESS_*; docs/egress.md): init
 * listens on 127.0.0.1:CAPSULE_EGRESS_PORT, the address the job's http_proxy names, and relays
 * each TCP connection it accepts over the next unused stream to the worker's proxy, on a thread
 * of its own, until init exits. One connection a stream, never reused: when the streams are used
 * up, further connections are closed at once and the job's log says so once. At most
 * CAPSULE_EGRESS_LIVE_MAX are relayed at a time; the others wait here, accepted, their bytes in
 * the capsule's own memory, and each gets its turn (in order) when one ends: so the host holds
 * the buffers of that many connections at most. The relay decides
 * nothing: what may leave is the proxy's call, on the host. The job shares init's uid and could
 * take a stream itself through /proc/1/fd; that only spends its own connections.
 *
 * Passing (CAPSULE_EGRESS_PASS_ARG, runc): a connection whose turn comes is not relayed but
 * handed over: its socket goes to the proxy over the stream (one byte, SCM_RIGHTS) and init
 * closes its copy, so the bytes go from the proxy to the job's socket with no copy, wake-up or
 * thread of init's between (issue 48: under runc this relay took as much CPU as the proxy). The
 * connection stays live here until the proxy closes the stream, which it does when the
 * connection ends: the bound on live connections holds as when relaying. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "capsule-init/init-internal.h"
#include "capsule/protocol.h"

/* Downloads are read from the stream in chunks as large as its buffers let gVisor take them
 * (capsule/egress.h, EGRESS_STREAM_SNDBUF); uploads are small. Allocated per connection, in the
 * capsule's own memory: the download's as a pipe of that size, which splice fills from the
 * stream and empties into the job's socket without a copy through init (issue 48: under runc
 * the two copies were a third of a download's cost), or a buffer where the pipe cannot be
 * had. */
#define RELAY_DOWN_BUF (1024 * 1024)
#define RELAY_UP_BUF (64 * 1024)

/* One direction of a connection: what was read from `from` and not yet written to `to`. */
typedef struct Dir {
        char *buf;
        int pipe[2];  /* -1: the bytes go through buf */
        size_t size, off, len;
        bool eof;  /* `from` reached its end: `to` is shut for writing once the buffer is out */
        bool shut;
} Dir;

typedef struct Pair {
        int tcp, stream; /* stream -1: free slot; tcp -1 once passed to the proxy */
        bool live;       /* relayed (or passed) now; false: accepted, waiting for its turn */
        Dir up, down;    /* up: tcp -> stream; down: stream -> tcp */
} Pair;

static int listener = -1;
/* Once init writes the status trailer, which must be the last thing on the log channel, the
 * relay says nothing more. */
static pthread_mutex_t say_lock = PTHREAD_MUTEX_INITIALIZER;
static bool quiet;
static unsigned next_stream;
static bool accept_paused; /* out of fds: the listener waits until a connection ends */
static bool pass;          /* CAPSULE_EGRESS_PASS_ARG: connections are passed, not relayed */
static unsigned n_live;
static Pair pairs[CAPSULE_EGRESS_STREAMS];

static void pair_close(Pair *p) {
        accept_paused = false;
        if (p->live)
                n_live--;
        if (p->tcp >= 0)
                close(p->tcp);
        close(p->stream);
        free(p->up.buf);
        free(p->down.buf);
        if (p->down.pipe[0] >= 0) {
                close(p->down.pipe[0]);
                close(p->down.pipe[1]);
        }
        *p = (Pair) { .tcp = -1, .stream = -1, .down.pipe = { -1, -1 } };
}

/* The connection's socket to the proxy over its stream, and init's copy closed: from now on the
 * stream only tells when the proxy is done with it. The stream is new and empty: the one byte
 * goes at once or not at all. */
static int pass_socket(Pair *p) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u = {};
        struct iovec iov = { .iov_base = (char[]) { 'c' }, .iov_len = 1 };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);

        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(h), &p->tcp, sizeof(int));
        if (sendmsg(p->stream, &m, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
                return -errno;
        close(p->tcp);
        p->tcp = -1;
        return 0;
}

/* The download's pipe, d->size bytes (its fds non-blocking and close-on-exec); false: none. */
static bool dir_pipe(Dir *d) {
        d->pipe[0] = d->pipe[1] = -1;
        if (pipe2(d->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return false;
        if (fcntl(d->pipe[1], F_SETPIPE_SZ, (int) d->size) >= (int) d->size)
                return true;
        close(d->pipe[0]);
        close(d->pipe[1]);
        d->pipe[0] = d->pipe[1] = -1;
        return false;
}

/* The waiting connections with the lowest streams (the oldest) become live while there is room. */
static void promote(void) {
        for (size_t i = 0; i < ELEMENTSOF(pairs) && n_live < CAPSULE_EGRESS_LIVE_MAX; i++) {
                Pair *p = &pairs[i];
                if (p->stream < 0 || p->live)
                        continue;
                if (pass) {
                        p->live = true;
                        n_live++;
                        if (pass_socket(p) < 0)
                                pair_close(p);
                        continue;
                }
                p->up = (Dir) { .buf = malloc(RELAY_UP_BUF), .pipe = { -1, -1 }, .size = RELAY_UP_BUF };
                p->down = (Dir) { .size = RELAY_DOWN_BUF };
                p->live = true;
                n_live++;
                if (!dir_pipe(&p->down))
                        p->down.buf = malloc(RELAY_DOWN_BUF);
                if (!p->up.buf || (!p->down.buf && p->down.pipe[0] < 0))
                        pair_close(p);
        }
}

/* Move bytes one way as far as the sockets take them now. false: the connection is over (an
 * error on either side: the job's peer sees it closed). */
static bool dir_pump(Dir *d, int from, int to) {
        if (d->len == d->off && !d->eof) {
                ssize_t k = d->pipe[0] < 0 ? read(from, d->buf, d->size)
                                           : splice(from, NULL, d->pipe[1], NULL, d->size, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (k < 0 && errno != EAGAIN && errno != EINTR)
                        return false;
                if (k == 0)
                        d->eof = true;
                if (k > 0) {
                        d->off = 0;
                        d->len = (size_t) k;
                }
        }
        while (d->off < d->len) {
                ssize_t k = d->pipe[0] < 0 ? write(to, d->buf + d->off, d->len - d->off)
                                           : splice(d->pipe[0], NULL, to, NULL, d->len - d->off,
                                                    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
                if (k < 0)
                        return errno == EAGAIN || errno == EINTR;
                d->off += (size_t) k;
        }
        if (d->eof && !d->shut) {
                (void) shutdown(to, SHUT_WR);
                d->shut = true;
        }
        return true;
}

static void accept_one(void) {
        static bool told;
        int c = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c < 0) {
                /* The connection stays queued; polling the listener now would only spin. */
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                        accept_paused = true;
                return;
        }
        Pair *p = NULL;
        for (size_t i = 0; i < ELEMENTSOF(pairs) && !p; i++)
                if (pairs[i].stream < 0)
                        p = &pairs[i];
        if (next_stream >= CAPSULE_EGRESS_STREAMS || !p) {
                close(c);
                pthread_mutex_lock(&say_lock);
                if (!told && !quiet)
                        say("egress: this job's %d connections are used up; further ones are closed",
                            CAPSULE_EGRESS_STREAMS);
                told = true;
                pthread_mutex_unlock(&say_lock);
                return;
        }
        /* The stream is this connection's from now on; it is relayed when its turn comes. */
        *p = (Pair) { .tcp = c, .stream = CAPSULE_EGRESS_FD_BASE + (int) next_stream++, .down.pipe = { -1, -1 } };
        promote();
}

static void *relay_main(void *arg) {
        (void) arg;
        static struct pollfd pfd[1 + 2 * CAPSULE_EGRESS_STREAMS];
        static size_t at[CAPSULE_EGRESS_STREAMS]; /* pairs[i]'s first entry in pfd */
        for (;;) {
                size_t n = 0;
                pfd[n++] = (struct pollfd) { .fd = accept_paused ? -1 : listener, .events = POLLIN };
                for (size_t i = 0; i < ELEMENTSOF(pairs); i++) {
                        Pair *p = &pairs[i];
                        short te = 0, se = 0;
                        if (p->stream < 0 || !p->live)
                                continue;
                        if (pass) {
                                se = POLLIN;   /* the proxy's close: the connection has ended */
                        } else {
                                if (p->up.off == p->up.len && !p->up.eof)
                                        te |= POLLIN;
                                if (p->up.off < p->up.len)
                                        se |= POLLOUT;
                                if (p->down.off == p->down.len && !p->down.eof)
                                        se |= POLLIN;
                                if (p->down.off < p->down.len)
                                        te |= POLLOUT;
                        }
                        /* A side nothing is waited for is left out: a hang-up there would be
                         * reported on every round while the other side drains. */
                        at[i] = n;
                        pfd[n++] = (struct pollfd) { .fd = te ? p->tcp : -1, .events = te };
                        pfd[n++] = (struct pollfd) { .fd = se ? p->stream : -1, .events = se };
                }
                /* Paused, the job itself may be what holds the fds: try again now and then. */
                int k = poll(pfd, (nfds_t) n, accept_paused ? 1000 : -1);
                if (k < 0 && errno != EINTR)
                        return NULL;
                if (k == 0)
                        accept_paused = false;
                for (size_t i = 0; i < ELEMENTSOF(pairs); i++) {
                        Pair *p = &pairs[i];
                        if (p->stream < 0 || !p->live || !(pfd[at[i]].revents | pfd[at[i] + 1].revents))
                                continue;
                        bool dead = (pfd[at[i]].revents | pfd[at[i] + 1].revents) & (POLLERR | POLLNVAL);
                        if (dead || pass || !dir_pump(&p->up, p->tcp, p->stream) || !dir_pump(&p->down, p->stream, p->tcp) ||
                            (p->up.shut && p->down.shut))
                                pair_close(p);
                }
                /* A pair that ended makes room for one that waits. */
                promote();
                /* After the pairs: a new one is not in this round's pfd. */
                if (pfd[0].revents & POLLIN)
                        accept_one();
        }
}

void egress_relay_quiet(void) {
        pthread_mutex_lock(&say_lock);
        quiet = true;
        pthread_mutex_unlock(&say_lock);
}

int egress_relay_start(bool pass_sockets) {
        struct sockaddr_in a = {
                .sin_family = AF_INET,
                .sin_port = htons(CAPSULE_EGRESS_PORT),
                .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
        };
        int one = 1, r;

        pass = pass_sockets;
        for (size_t i = 0; i < ELEMENTSOF(pairs); i++)
                pairs[i] = (Pair) { .tcp = -1, .stream = -1, .down.pipe = { -1, -1 } };
        /* The streams must all be there; the job never inherits them (spawn_job closes from 3). */
        for (int i = 0; i < CAPSULE_EGRESS_STREAMS; i++) {
                int fd = CAPSULE_EGRESS_FD_BASE + i, fl = fcntl(fd, F_GETFL);
                if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
                        return -EBADF;
        }
        listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (listener < 0)
                return -errno;
        (void) setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(listener, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(listener, 128) < 0)
                return -errno;

        /* Every signal blocked on the thread: SIGCHLD must reach the job loop's signalfd. */
        sigset_t all, old;
        pthread_t t;
        pthread_attr_t attr;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        r = pthread_create(&t, &attr, relay_main, NULL);
        pthread_attr_destroy(&attr);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return -r;
}
