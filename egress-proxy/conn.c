/* SPDX-License-Identifier: MIT */
/* One egress connection, in a thread of its own (capsule/egress-wire.h): the request head read
 * under its deadline and parsed by parser/egress-request.h, the allowlist, the job's budgets,
 * the name resolved once and every address checked before any is tried, the connect, the
 * relay both ways with half-close, and the connection's one record. Every byte on the stream
 * was written by arbitrary code in the sandbox: what a peer can make the proxy hold is fixed
 * (the head buffer, one relay buffer each way) and every wait has a deadline.
 *
 * Counting: bytes_up is every byte sent to the upstream (a forward's rewritten head included)
 * and the upload budget is charged for exactly those bytes, so the bytes_up of all records
 * never add up to more than --max-upload. bytes_down is every byte the proxy wrote into the
 * stream: what it relayed from the upstream, and also its own replies (the 200 of a CONNECT, a
 * refusal); only the relayed bytes are charged to the download budget, so what the network
 * sent the job stays within --max-download and a refusal can still be explained once the
 * budget is spent. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "capsule/egress-wire.h"
#include "egress-proxy/proxy-internal.h"
#include "common/macro.h"
#include "common/time-util.h"
#include "parser/egress-allow.h"
#include "parser/egress-request.h"

/* A step ended the connection (refused or cut): the record fields say why. */
#define CONN_DONE (-ECANCELED)

#define CONNECT_REPLY "HTTP/1.1 200 Connection established\r\n\r\n"

/* "host:port" or "[v6]:port" */
#define TARGET_MAX (EGRESS_HOST_MAX + 16)

typedef struct Conn {
        Proxy *proxy;
        ConnSocket *sock;   /* the job's socket, for the main thread's shutdown */
        int stream, upstream;
        /* --stream-carries socket: the stream that brought the job's socket (then in stream),
         * held until the connection ends, when closing it tells init so; else -EBADF. */
        int link;
        usec_t start, deadline;   /* the first byte; start + --max-seconds */

        char head[EGRESS_HEAD_MAX];
        size_t head_len, consumed;   /* bytes read into head; how many of them are the head */
        EgressRequest req;
        bool have_req;

        struct sockaddr_storage addrs[EGRESS_MAX_ADDRESSES];
        size_t n_addrs;

        /* The record. */
        bool allowed;
        const char *reason;
        char detail[EGRESS_DETAIL_MAX + 1];
        char address[INET6_ADDRSTRLEN];
        uint64_t bytes_up, bytes_down;
} Conn;

static void conn_freep(Conn **cp) {
        Conn *c = *cp;
        if (!c)
                return;
        safe_close(c->stream);
        safe_close(c->upstream);
        safe_close(c->link);
        egress_request_done(&c->req);
        free(c);
}

static void freeaddrinfop(struct addrinfo **a) {
        if (*a)
                freeaddrinfo(*a);
}

/* strerror() may use a static buffer: not for threads. */
static const char *errno_text(int e) {
        const char *s = strerrordesc_np(e);
        return s ? s : "unknown error";
}

static int poll_ms(usec_t left) {
        usec_t ms = (left + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
        return ms > INT_MAX ? INT_MAX : (int) ms;
}

static int conn_end(Conn *c, bool allowed, const char *word, const char *fmt, ...) _printf_(4, 5);
static int conn_end(Conn *c, bool allowed, const char *word, const char *fmt, ...) {
        va_list ap;

        c->allowed = allowed;
        c->reason = word;
        va_start(ap, fmt);
        (void) vsnprintf(c->detail, sizeof c->detail, fmt, ap);
        va_end(ap);
        return CONN_DONE;
}
#define refuse(c, word, ...) conn_end((c), false, (word), __VA_ARGS__)
#define cut(c, word, ...) conn_end((c), true, (word), __VA_ARGS__)

/* Wait until fd is ready for events (1), the deadline passes (0) or the proxy stops
 * (-ECANCELED). */
static int conn_wait(Conn *c, int fd, short events, usec_t deadline) {
        for (;;) {
                usec_t now = now_monotonic();
                if (now >= deadline)
                        return 0;
                struct pollfd pfd[2] = {
                        { .fd = fd, .events = events },
                        { .fd = c->proxy->stop_fd, .events = POLLIN },
                };
                if (poll(pfd, 2, poll_ms(deadline - now)) < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (pfd[1].revents)
                        return -ECANCELED;
                if (pfd[0].revents)
                        return 1;
        }
}

static void format_target(const char *host, uint16_t port, char buf[static TARGET_MAX]) {
        if (strchr(host, ':'))
                (void) snprintf(buf, TARGET_MAX, "[%s]:%u", host, (unsigned) port);
        else
                (void) snprintf(buf, TARGET_MAX, "%s:%u", host, (unsigned) port);
}

static void sockaddr_text(const struct sockaddr_storage *ss, char buf[static INET6_ADDRSTRLEN]) {
        const void *a = ss->ss_family == AF_INET ? (const void *) &((const struct sockaddr_in *) ss)->sin_addr
                                                 : (const void *) &((const struct sockaddr_in6 *) ss)->sin6_addr;
        if (!inet_ntop(ss->ss_family, a, buf, INET6_ADDRSTRLEN))
                (void) snprintf(buf, INET6_ADDRSTRLEN, "?");
}

/* The host as an IPv4 or IPv6 literal with the port, or false for a name. */
static bool host_literal(const char *host, uint16_t port, struct sockaddr_storage *ret) {
        struct sockaddr_storage ss = {};
        struct sockaddr_in *in = (struct sockaddr_in *) &ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;

        if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
                in->sin_family = AF_INET;
                in->sin_port = htons(port);
        } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(port);
        } else
                return false;
        *ret = ss;
        return true;
}

/* Is fd a TCP socket, connected or not, but not listening? */
static bool is_tcp_socket(int fd) {
        int v = 0;
        socklen_t l = sizeof v;

        if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &l) < 0 || (v != AF_INET && v != AF_INET6))
                return false;
        l = sizeof v;
        if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &l) < 0 || v != IPPROTO_TCP)
                return false;
        l = sizeof v;
        return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &l) == 0 && v == 0;
}

/* The fds of a received message's SCM_RIGHTS: exactly one is returned in *ret (else -1); every
 * other one is closed. false when there was not exactly one or the control data was cut. */
static bool take_one_fd(struct msghdr *m, int *ret) {
        int n = 0;

        *ret = -1;
        for (struct cmsghdr *h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(m, h)) {
                if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t k = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(h) + i * sizeof(int), sizeof(int));
                        if (n++ == 0)
                                *ret = fd;
                        else
                                safe_close(fd);
                }
        }
        if (n == 1 && !(m->msg_flags & MSG_CTRUNC))
                return true;
        *ret = safe_close(*ret);
        return false;
}

/* --stream-carries socket: the job's connection itself, as the stream's first message (one
 * byte, one fd), under the head's deadline. What is attached comes from the sandbox: anything
 * but a TCP socket is refused and closed. A TCP socket of the job's gives the proxy nothing the
 * job could not do with it itself: the proxy only reads the request from it and writes back
 * what it relays, under the same allowlist and budgets as bytes on a stream. */
static int conn_take_socket(Conn *c) {
        usec_t deadline = MIN(c->start + c->proxy->head_usec, c->deadline);
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } u;
        char byte;
        int fd;

        for (;;) {
                int r = conn_wait(c, c->stream, POLLIN, deadline);
                if (r == -ECANCELED)
                        return refuse(c, "stopped", "the capsule ended before it passed a connection");
                if (r == 0)
                        return refuse(c, "head_timeout", "no connection passed within %" PRIu64 " s",
                                      c->proxy->head_usec / USEC_PER_SEC);
                if (r < 0)
                        return refuse(c, "no_request", "poll: %s", errno_text(-r));
                struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
                struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                                    .msg_controllen = sizeof u.buf };
                ssize_t k = recvmsg(c->stream, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (k < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (k < 0)
                        return refuse(c, "no_request", "reading the stream: %s", errno_text(errno));
                bool one = take_one_fd(&m, &fd);
                if (k == 0 && !one)
                        return refuse(c, "no_request", "the stream ended before it passed a connection");
                if (!one || !is_tcp_socket(fd)) {
                        safe_close(fd);
                        return refuse(c, "no_request", "the stream passed no TCP socket");
                }
                break;
        }
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
                safe_close(fd);
                return refuse(c, "no_request", "the passed socket: %s", errno_text(errno));
        }
        c->link = c->stream;
        c->stream = fd;
        pthread_mutex_lock(&c->sock->lock);
        c->sock->fd = fd;
        pthread_mutex_unlock(&c->sock->lock);
        return 0;
}

/* Read until the parser has a whole head. The parser runs only once the head's terminator may
 * have arrived (or the buffer is full): parsing the whole buffer again after every read would
 * let a peer that drips one byte at a time cost quadratic time. A head that is malformed
 * before its end is therefore refused when it ends or fills the buffer, or times out. */
static int conn_read_head(Conn *c) {
        usec_t deadline = MIN(c->start + c->proxy->head_usec, c->deadline);

        for (;;) {
                if (c->head_len < sizeof c->head) {
                        int r = conn_wait(c, c->stream, POLLIN, deadline);
                        if (r == -ECANCELED)
                                return refuse(c, "stopped", "the capsule ended before a whole request head");
                        if (r == 0)
                                return refuse(c, "head_timeout", "no whole request head within %" PRIu64 " s",
                                              c->proxy->head_usec / USEC_PER_SEC);
                        if (r < 0)
                                return refuse(c, "no_request", "poll: %s", errno_text(-r));
                        ssize_t k = recv(c->stream, c->head + c->head_len, sizeof c->head - c->head_len,
                                         MSG_DONTWAIT);
                        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                                continue;
                        if (k < 0)
                                return refuse(c, "no_request", "reading the request head: %s", errno_text(errno));
                        if (k == 0)
                                return refuse(c, "no_request",
                                              "the stream ended after %zu bytes, before a whole request head",
                                              c->head_len);
                        size_t from = c->head_len >= 3 ? c->head_len - 3 : 0;
                        c->head_len += (size_t) k;
                        if (c->head_len < sizeof c->head &&
                            !memmem(c->head + from, c->head_len - from, "\r\n\r\n", 4))
                                continue;
                }
                const char *why = NULL;
                int r = egress_request_parse(c->head, c->head_len, &c->req, &c->consumed, &why);
                if (r == 0) {
                        c->have_req = true;
                        return 0;
                }
                if (r == -EAGAIN && c->head_len < sizeof c->head)
                        continue;
                if (r == -EAGAIN || r == -E2BIG)
                        return refuse(c, "bad_request", "no whole request head within %d bytes", EGRESS_HEAD_MAX);
                if (r == -EINVAL)
                        return refuse(c, "bad_request", "%s", why ? why : "malformed request head");
                return refuse(c, "bad_request", "%s", errno_text(-r));
        }
}

static int conn_check_allowed(Conn *c) {
        const Proxy *p = c->proxy;
        char target[TARGET_MAX];
        struct sockaddr_storage ss;

        if (egress_allow_match(p->allow, p->n_allow, c->req.host, c->req.port))
                return 0;
        format_target(c->req.host, c->req.port, target);
        if (host_literal(c->req.host, c->req.port, &ss))
                return refuse(c, "not_allowed", "%s is not on network.allow (an IP literal must be listed as such)",
                              target);
        return refuse(c, "not_allowed", "%s is not on network.allow", target);
}

/* The job's byte budgets. Contract: budget_take() grants at most want bytes and never more than
 * is left, atomically against every other connection, so the bytes all the connections send
 * under grants never add up to more than the budget; a grant not used in full is handed back
 * with budget_return(). A grant of 0 means the budget is spent. */
static uint64_t budget_take(_Atomic uint64_t *left, uint64_t want) {
        uint64_t cur = atomic_load(left);
        for (;;) {
                uint64_t g = MIN(cur, want);
                if (g == 0)
                        return 0;
                if (atomic_compare_exchange_weak(left, &cur, cur - g))
                        return g;
        }
}

static void budget_return(_Atomic uint64_t *left, uint64_t n) {
        if (n > 0)
                (void) atomic_fetch_add(left, n);
}

/* A budget already spent refuses the request before any name is resolved. */
static int conn_check_budgets(Conn *c) {
        Proxy *p = c->proxy;

        if (atomic_load(&p->upload_left) == 0)
                return refuse(c, "upload_limit", "the job's upload budget of %" PRIu64 " bytes is spent",
                              p->max_upload);
        if (atomic_load(&p->download_left) == 0)
                return refuse(c, "download_limit", "the job's download budget of %" PRIu64 " bytes is spent",
                              p->max_download);
        return 0;
}

/* The addresses to check and try, each with the port: an IP literal as it is, a name through
 * getaddrinfo, once (never again for this request: the checked addresses are the ones tried). */
static int conn_resolve(Conn *c) {
        _cleanup_(freeaddrinfop) struct addrinfo *res = NULL;
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
        struct sockaddr_storage ss;

        if (host_literal(c->req.host, c->req.port, &ss)) {
                c->addrs[0] = ss;
                c->n_addrs = 1;
                return 0;
        }
        /* The name goes to the resolver and on to the name's servers: under a *.SUFFIX entry
         * its labels are the job's to choose, so it is bytes up like any other. */
        size_t name_len = strlen(c->req.host);
        uint64_t granted = budget_take(&c->proxy->upload_left, name_len);
        if (granted < name_len) {
                budget_return(&c->proxy->upload_left, granted);
                return refuse(c, "upload_limit", "the job's upload budget of %" PRIu64 " bytes cannot take the name",
                              c->proxy->max_upload);
        }
        c->bytes_up += name_len;
        int r = getaddrinfo(c->req.host, NULL, &hints, &res);
        if (r != 0)
                return refuse(c, "resolve_failed", "%s: %s", c->req.host,
                              r == EAI_SYSTEM ? errno_text(errno) : gai_strerror(r));
        for (const struct addrinfo *ai = res; ai && c->n_addrs < EGRESS_MAX_ADDRESSES; ai = ai->ai_next) {
                if (ai->ai_family == AF_INET && ai->ai_addrlen == sizeof(struct sockaddr_in)) {
                        ss = (struct sockaddr_storage) {};
                        memcpy(&ss, ai->ai_addr, sizeof(struct sockaddr_in));
                        ((struct sockaddr_in *) &ss)->sin_port = htons(c->req.port);
                } else if (ai->ai_family == AF_INET6 && ai->ai_addrlen == sizeof(struct sockaddr_in6)) {
                        ss = (struct sockaddr_storage) {};
                        memcpy(&ss, ai->ai_addr, sizeof(struct sockaddr_in6));
                        ((struct sockaddr_in6 *) &ss)->sin6_port = htons(c->req.port);
                } else
                        continue;
                c->addrs[c->n_addrs++] = ss;
        }
        if (c->n_addrs == 0)
                return refuse(c, "resolve_failed", "%s has no IPv4 or IPv6 address", c->req.host);
        return 0;
}

static bool is_own_address(const Proxy *p, const struct sockaddr_storage *ss) {
        const uint8_t *a = ss->ss_family == AF_INET
                                   ? (const uint8_t *) &((const struct sockaddr_in *) ss)->sin_addr
                                   : (const uint8_t *) &((const struct sockaddr_in6 *) ss)->sin6_addr;
        size_t n = ss->ss_family == AF_INET ? 4 : 16;

        for (size_t i = 0; i < p->n_own; i++)
                if (p->own[i].family == ss->ss_family && memcmp(p->own[i].addr, a, n) == 0)
                        return true;
        return false;
}

/* The address check, the proxy's defence against SSRF and DNS rebinding. Contract: every
 * address in c->addrs (all the proxy will ever try for this request) must be of the public
 * class (egress_addr_classify) and none of the host's own addresses, unless that exact address
 * and port is listed literally on network.allow (an IP literal that matched the allowlist
 * always is). One address failing refuses the whole request, naming it, before any is tried:
 * a name that resolves to a public address and to the metadata service is refused, not tried
 * in part. */
static int conn_check_addresses(Conn *c) {
        const Proxy *p = c->proxy;

        for (size_t i = 0; i < c->n_addrs; i++) {
                const struct sockaddr_storage *ss = &c->addrs[i];
                if (egress_allow_lists_address(p->allow, p->n_allow, (const struct sockaddr *) ss))
                        continue;
                EgressAddrClass class = egress_addr_classify((const struct sockaddr *) ss);
                if (class != EGRESS_ADDR_PUBLIC) {
                        sockaddr_text(ss, c->address);
                        return refuse(c, "address_refused", "%s resolves to %s address %s", c->req.host,
                                      egress_addr_class_name(class), c->address);
                }
                if (is_own_address(p, ss)) {
                        sockaddr_text(ss, c->address);
                        return refuse(c, "address_refused", "%s resolves to the host's own address %s",
                                      c->req.host, c->address);
                }
        }
        return 0;
}

/* A connected socket to ss within EGRESS_CONNECT_SECONDS (and the connection's time), or a
 * negative errno (-ECANCELED: the proxy is stopping). */
static int connect_one(Conn *c, const struct sockaddr_storage *ss) {
        socklen_t len = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        _cleanup_close_ int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);

        if (fd < 0)
                return -errno;
        /* Fixed buffers: the kernel's autotuning would let an upstream that sends to a job which
         * does not read queue megabytes per connection on the host. */
        (void) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int) { PROXY_UPSTREAM_RCVBUF }, sizeof(int));
        (void) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &(int) { PROXY_UPSTREAM_BUFFER }, sizeof(int));
        if (connect(fd, (const struct sockaddr *) ss, len) < 0) {
                if (errno != EINPROGRESS && errno != EINTR)
                        return -errno;
                usec_t deadline = MIN(now_monotonic() + EGRESS_CONNECT_SECONDS * USEC_PER_SEC, c->deadline);
                int r = conn_wait(c, fd, POLLOUT, deadline);
                if (r < 0)
                        return r;
                if (r == 0)
                        return -ETIMEDOUT;
                int err = 0;
                socklen_t elen = sizeof err;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
                        return -errno;
                if (err != 0)
                        return -err;
        }
        return TAKE_FD(fd);
}

/* Only the checked addresses, in order; the first that accepts is the connection. */
static int conn_connect(Conn *c) {
        char last[INET6_ADDRSTRLEN] = "";
        int err = EHOSTUNREACH;

        for (size_t i = 0; i < c->n_addrs; i++) {
                sockaddr_text(&c->addrs[i], last);
                int r = connect_one(c, &c->addrs[i]);
                if (r == -ECANCELED)
                        return refuse(c, "stopped", "the capsule ended before the connection was made");
                if (r >= 0) {
                        c->upstream = r;
                        memcpy(c->address, last, sizeof last);
                        c->allowed = true;
                        return 0;
                }
                err = -r;
        }
        return refuse(c, "connect_failed", "%s: %s", last, errno_text(err));
}

/* Write a reply of the proxy's own whole into the stream (counted in bytes_down, not charged to
 * the download budget). */
static int conn_reply(Conn *c, const char *buf, size_t len) {
        usec_t deadline = MIN(now_monotonic() + PROXY_REPLY_SECONDS * USEC_PER_SEC, c->deadline);

        while (len > 0) {
                ssize_t k = send(c->stream, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (k > 0) {
                        buf += k;
                        len -= (size_t) k;
                        c->bytes_down += (uint64_t) k;
                        continue;
                }
                if (k < 0 && errno != EAGAIN && errno != EINTR)
                        return -errno;
                int r = conn_wait(c, c->stream, POLLOUT, deadline);
                if (r < 0)
                        return r;
                if (r == 0)
                        return -ETIMEDOUT;
        }
        return 0;
}

static const char *refusal_status(const char *reason) {
        if (streq(reason, "bad_request"))
                return "400 Bad Request";
        if (streq(reason, "head_timeout"))
                return "408 Request Timeout";
        if (streq(reason, "resolve_failed") || streq(reason, "connect_failed"))
                return "502 Bad Gateway";
        return "403 Forbidden";   /* not_allowed, address_refused, upload_limit, download_limit */
}

/* The refusal as a short HTTP response, so the job's log says why. Then what the peer already
 * sent is read and dropped (without waiting, at most a relay buffer's worth): closing a unix
 * socket with unread bytes makes the peer's read fail with ECONNRESET, which could lose the
 * reply. A stream that ended before its head (no_request) asked nothing and gets nothing. */
static void conn_send_refusal(Conn *c) {
        char detail[EGRESS_DETAIL_MAX + 1], body[EGRESS_DETAIL_MAX + 64], msg[EGRESS_DETAIL_MAX + 256];

        if (streq(c->reason, "no_request"))
                return;
        proxy_printable(detail, sizeof detail, c->detail);
        int b = snprintf(body, sizeof body, "tentaflake-worker egress: %s: %s\n", c->reason, detail);
        if (b < 0 || (size_t) b >= sizeof body)
                return;
        int m = snprintf(msg, sizeof msg,
                         "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                         "Content-Length: %d\r\n\r\n%s",
                         refusal_status(c->reason), b, body);
        if (m < 0 || (size_t) m >= sizeof msg)
                return;
        if (conn_reply(c, msg, (size_t) m) < 0)
                return;
        (void) shutdown(c->stream, SHUT_WR);
        for (size_t total = 0; total < PROXY_RELAY_BUFFER;) {
                ssize_t k = recv(c->stream, c->head, sizeof c->head, MSG_DONTWAIT);
                if (k <= 0)
                        break;
                total += (size_t) k;
        }
}

/* One direction of the relay: bytes from `from` wait in buf[start..end) to go to `to`; or, for
 * a flow with a pipe, wait in the pipe (end - start of them), moved by splice without a copy
 * through the proxy's memory. */
typedef struct Flow {
        int from, to;
        const char *from_name, *to_name;
        char *buf;
        int pipe[2];     /* -1: the flow uses buf */
        bool pipe_full;  /* the pipe took no more (its slots, not its bytes): wait for a write */
        size_t size;     /* what buf or the pipe holds at most */
        size_t start, end;
        bool eof;    /* from has ended: nothing more will come */
        bool shut;   /* to was shut down for writing after the last byte */
        bool dead;   /* to is gone: nothing more can be delivered */
        _Atomic uint64_t *budget;
        uint64_t budget_size;
        const char *limit_word, *budget_name;
        uint64_t *count;
} Flow;

static short flow_in(const Flow *f) {
        return !f->eof && !f->dead && !f->pipe_full && f->end < f->size ? POLLIN : 0;
}

/* The download's bytes go through a pipe of PROXY_DOWN_PIPE (or, where the user's pipe pages
 * are short, PROXY_RELAY_BUFFER), upstream to pipe to stream, both non-blocking: what the
 * proxy holds stays bounded by the pipe's size (issue 48: 100 MB through the proxy, where the
 * two copies were most of its cost). Where no such pipe can be had the flow keeps its buffer. */
static void flow_pipe_open(Flow *f) {
        f->pipe[0] = f->pipe[1] = -1;
        if (pipe2(f->pipe, O_CLOEXEC | O_NONBLOCK) < 0)
                return;
        size_t size = PROXY_DOWN_PIPE;
        if (fcntl(f->pipe[1], F_SETPIPE_SZ, (int) size) != (int) size) {
                size = PROXY_RELAY_BUFFER;
                if (fcntl(f->pipe[1], F_SETPIPE_SZ, (int) size) != (int) size)
                        size = 0;
        }
        if (size == 0 || fcntl(f->to, F_SETFL, fcntl(f->to, F_GETFL) | O_NONBLOCK) < 0) {
                close(f->pipe[0]);
                close(f->pipe[1]);
                f->pipe[0] = f->pipe[1] = -1;
                return;
        }
        f->size = size;
}

static void flow_pipe_close(Flow *f) {
        if (f->pipe[0] >= 0) {
                close(f->pipe[0]);
                close(f->pipe[1]);
        }
}

/* recv or send of the flow's bytes: into buf or the pipe, out of buf or the pipe. */
static ssize_t flow_in_bytes(Flow *f) {
        size_t room = f->size - f->end;
        if (f->pipe[0] < 0)
                return recv(f->from, f->buf + f->end, room, MSG_DONTWAIT);
        ssize_t k = splice(f->from, NULL, f->pipe[1], NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        /* Readable, yet nothing moved: the pipe's slots are taken by small pieces. */
        f->pipe_full = k < 0 && errno == EAGAIN && f->end > f->start;
        return k;
}

static ssize_t flow_out_bytes(Flow *f, size_t n) {
        if (f->pipe[0] < 0)
                return send(f->to, f->buf + f->start, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        ssize_t k = splice(f->pipe[0], NULL, f->to, NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (k > 0)
                f->pipe_full = false;
        return k;
}

static short flow_out(const Flow *f) {
        return !f->dead && f->start < f->end ? POLLOUT : 0;
}

/* Half-close: once from has ended and everything went out, to learns it too. */
static void flow_settle(Flow *f) {
        if (f->start == f->end)
                f->start = f->end = 0;
        else if (f->end == f->size && f->start > 0) {
                if (f->pipe[0] < 0)
                        memmove(f->buf, f->buf + f->start, f->end - f->start);
                f->end -= f->start;
                f->start = 0;
        }
        if (f->eof && !f->dead && !f->shut && f->start == f->end) {
                (void) shutdown(f->to, SHUT_WR);
                f->shut = true;
        }
}

static bool flow_done(const Flow *f) {
        return f->dead || f->shut;
}

/* 1: bytes moved, 0: nothing moved, CONN_DONE: cut. A reset from the peer is its end. */
static int flow_read(Conn *c, Flow *f) {
        ssize_t k = flow_in_bytes(f);

        if (k > 0) {
                f->end += (size_t) k;
                return 1;
        }
        if (k == 0 || errno == ECONNRESET) {
                f->eof = true;
                return 0;
        }
        if (errno == EAGAIN || errno == EINTR)
                return 0;
        return cut(c, "io_error", "reading from %s: %s", f->from_name, errno_text(errno));
}

/* Send what the budget grants of what is waiting; a grant short of it sends the granted part
 * and cuts the connection there. A peer that closed (EPIPE, ECONNRESET) ends this direction
 * normally. */
static int flow_write(Conn *c, Flow *f) {
        size_t want = f->end - f->start;
        uint64_t granted = budget_take(f->budget, want);

        if (granted == 0)
                return cut(c, f->limit_word, "the job's %s budget of %" PRIu64 " bytes is spent", f->budget_name,
                           f->budget_size);
        ssize_t k = flow_out_bytes(f, (size_t) granted);
        if (k < 0) {
                int e = errno;
                budget_return(f->budget, granted);
                if (e == EAGAIN || e == EINTR)
                        return 0;
                if (e == EPIPE || e == ECONNRESET) {
                        f->dead = true;
                        f->start = f->end = 0;
                        return 0;
                }
                return cut(c, "io_error", "writing to %s: %s", f->to_name, errno_text(e));
        }
        budget_return(f->budget, granted - (uint64_t) k);
        f->start += (size_t) k;
        *f->count += (uint64_t) k;
        if (granted < want && (uint64_t) k == granted)
                return cut(c, f->limit_word, "the job's %s budget of %" PRIu64 " bytes is spent", f->budget_name,
                           f->budget_size);
        return k > 0;
}

/* The poll results of one socket for the flow reading from it and the flow writing to it. */
static int relay_socket(Conn *c, short revents, short asked, Flow *reading, Flow *writing) {
        int moved = 0, r;

        if (revents & POLLNVAL)
                return cut(c, "io_error", "%s is not open", reading->from_name);
        if ((asked & POLLIN) && (revents & (POLLIN | POLLHUP | POLLERR))) {
                r = flow_read(c, reading);
                if (r < 0)
                        return r;
                moved |= r;
        }
        if ((asked & POLLOUT) && (revents & (POLLOUT | POLLHUP | POLLERR))) {
                r = flow_write(c, writing);
                if (r < 0)
                        return r;
                moved |= r;
        }
        return moved;
}

static int relay_timeout(Conn *c, usec_t now) {
        const Proxy *p = c->proxy;
        if (now >= c->deadline)
                return cut(c, "time_limit", "open for %" PRIu64 " s", p->max_usec / USEC_PER_SEC);
        return cut(c, "idle_timeout", "no byte either way for %" PRIu64 " s", p->idle_usec / USEC_PER_SEC);
}

/* Both ways until both have ended (each end's EOF passed on as a half-close), or a cut: idle,
 * --max-seconds, a budget, an error, the proxy stopping. */
static int conn_relay(Conn *c, Flow *up, Flow *down) {
        const Proxy *p = c->proxy;
        usec_t last = now_monotonic();

        for (;;) {
                flow_settle(up);
                flow_settle(down);
                if (flow_done(up) && flow_done(down))
                        return 0;
                short s_ev = flow_in(up) | flow_out(down), u_ev = flow_in(down) | flow_out(up);
                struct pollfd pfd[3] = {
                        { .fd = s_ev ? c->stream : -1, .events = s_ev },
                        { .fd = u_ev ? c->upstream : -1, .events = u_ev },
                        { .fd = p->stop_fd, .events = POLLIN },
                };
                usec_t now = now_monotonic(), deadline = MIN(last + p->idle_usec, c->deadline);
                if (now >= deadline)
                        return relay_timeout(c, now);
                if (poll(pfd, ELEMENTSOF(pfd), poll_ms(deadline - now)) < 0) {
                        if (errno == EINTR)
                                continue;
                        return cut(c, "io_error", "poll: %s", errno_text(errno));
                }
                if (pfd[2].revents)
                        return cut(c, "stopped", "the capsule ended with the connection open");
                int a = relay_socket(c, pfd[0].revents, s_ev, up, down);
                if (a < 0)
                        return a;
                int b = relay_socket(c, pfd[1].revents, u_ev, down, up);
                if (b < 0)
                        return b;
                if (a > 0 || b > 0)
                        last = now_monotonic();
        }
}

/* The connection is up: the CONNECT's 200 or the forward's rewritten head, the bytes that came
 * after the head, then the relay. */
static int conn_tunnel(Conn *c) {
        Proxy *p = c->proxy;
        _cleanup_free_ char *up_buf = malloc(PROXY_RELAY_BUFFER), *down_buf = malloc(PROXY_RELAY_BUFFER);
        size_t leftover = c->head_len - c->consumed;

        if (!up_buf || !down_buf)
                return cut(c, "io_error", "out of memory");
        Flow up = {
                .from = c->stream, .to = c->upstream, .from_name = "the stream", .to_name = "the upstream",
                .buf = up_buf, .pipe = { -1, -1 }, .size = PROXY_RELAY_BUFFER, .budget = &p->upload_left,
                .budget_size = p->max_upload,
                .limit_word = "upload_limit", .budget_name = "upload", .count = &c->bytes_up,
        };
        Flow down = {
                .from = c->upstream, .to = c->stream, .from_name = "the upstream", .to_name = "the stream",
                .buf = down_buf, .size = PROXY_RELAY_BUFFER, .budget = &p->download_left,
                .budget_size = p->max_download,
                .limit_word = "download_limit", .budget_name = "download", .count = &c->bytes_down,
        };
        /* Both fit: the rewritten head is at most the head plus a Host line, the leftover what
         * the head buffer held after it. */
        if (c->req.kind == EGRESS_REQ_FORWARD) {
                if (c->req.head_len + leftover > PROXY_RELAY_BUFFER)
                        return cut(c, "io_error", "rewritten head too large");
                memcpy(up.buf, c->req.head, c->req.head_len);
                up.end = c->req.head_len;
        } else {
                int r = conn_reply(c, CONNECT_REPLY, strlen(CONNECT_REPLY));
                if (r == -ECANCELED)
                        return cut(c, "stopped", "the capsule ended with the connection open");
                if (r == -EPIPE || r == -ECONNRESET)
                        return 0;
                if (r == -ETIMEDOUT)
                        return cut(c, "idle_timeout", "the stream took no reply for %d s", PROXY_REPLY_SECONDS);
                if (r < 0)
                        return cut(c, "io_error", "writing to the stream: %s", errno_text(-r));
        }
        memcpy(up.buf + up.end, c->head + c->consumed, leftover);
        up.end += leftover;
        flow_pipe_open(&down);
        int r = conn_relay(c, &up, &down);
        flow_pipe_close(&down);
        return r;
}

static int conn_run(Conn *c) {
        int r = c->proxy->take_sockets ? conn_take_socket(c) : 0;
        if (r >= 0)
                r = conn_read_head(c);
        if (r >= 0)
                r = conn_check_allowed(c);
        if (r >= 0)
                r = conn_check_budgets(c);
        if (r >= 0)
                r = conn_resolve(c);
        if (r >= 0)
                r = conn_check_addresses(c);
        if (r >= 0)
                r = conn_connect(c);
        if (r < 0) {
                conn_send_refusal(c);
                return r;
        }
        return conn_tunnel(c);
}

static void conn_record(Conn *c) {
        ProxyRecord rec = {
                .kind = !c->have_req ? NULL : c->req.kind == EGRESS_REQ_CONNECT ? "connect" : "forward",
                .host = c->have_req ? c->req.host : NULL,
                .port = c->have_req ? (int) c->req.port : -1,
                .address = c->address[0] ? c->address : NULL,
                .allowed = c->allowed,
                .reason = c->reason,
                .detail = c->reason ? c->detail : NULL,
                .bytes_up = c->bytes_up,
                .bytes_down = c->bytes_down,
                .duration_ms = (now_monotonic() - c->start) / USEC_PER_MSEC,
        };
        (void) proxy_write_record(c->proxy, &rec);
}

void conn_socket_shutdown(ConnSocket *sock) {
        pthread_mutex_lock(&sock->lock);
        if (sock->fd >= 0)
                (void) shutdown(sock->fd, SHUT_RDWR);
        pthread_mutex_unlock(&sock->lock);
}

void conn_serve(Proxy *p, int fd, usec_t start, ConnSocket *sock) {
        _cleanup_(conn_freep) Conn *c = calloc(1, sizeof(Conn));

        if (!c) {
                safe_close(fd);
                ProxyRecord rec = { .port = -1, .reason = "connect_failed", .detail = "out of memory" };
                (void) proxy_write_record(p, &rec);
                return;
        }
        c->proxy = p;
        c->sock = sock;
        c->stream = fd;
        c->upstream = -EBADF;
        c->link = -EBADF;
        c->start = start;
        c->deadline = start + p->max_usec;
        (void) conn_run(c);
        /* Both ends see the close before the record is written. */
        pthread_mutex_lock(&sock->lock);
        sock->fd = -1;
        c->stream = safe_close(c->stream);
        pthread_mutex_unlock(&sock->lock);
        c->upstream = safe_close(c->upstream);
        c->link = safe_close(c->link);
        conn_record(c);
}
