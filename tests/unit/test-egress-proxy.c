/* SPDX-License-Identifier: MIT */
/* tentaflake-egress-proxy (egress-proxy/, capsule/egress-wire.h) run the way the worker runs
 * it: its streams are socketpairs, its records a pipe at a fixed fd, the upstreams loopback
 * servers in threads of this test. Each case asserts what the job reads on its stream and the
 * record line the proxy wrote. As root the whole set runs twice, on an id the worker's own
 * allocator gives (capsule/egress-id.h): the proxy started as root and dropping to it itself,
 * and started as it already (its unprivileged path); otherwise once, as the test's own uid.
 * As root, the proxy's identity is also set against a notify hook's (issue 33 finding 4): the
 * ids of the proxies' range only, never shared with a process it can see, and neither can read
 * the other's /proc/PID/environ. Every wait is a bounded poll on the event, never a sleep. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/egress-id.h"
#include "capsule/egress-wire.h"
#include "common/macro.h"
#include "common/time-util.h"
#include "parser/config.h"
#include "parser/egress-request.h"
#include "egress-proxy/proxy-internal.h"
#include "tests/unit/lib/tfw-test.h"

extern char **environ;

#define RECORDS_FD 200
#define WAIT_MS 15000   /* the bound of every wait: far above what any case needs */
#define MAX_STREAMS 72
#define HOSTILE 64
#define CONNECT_REPLY "HTTP/1.1 200 Connection established\r\n\r\n"
#define CONNECT_REPLY_LEN (sizeof(CONNECT_REPLY) - 1)

/* The proxy's peak resident memory once 64 hostile connections were open at once. Measured:
 * about 3 MiB (plain build), about 15 MiB (ASan + UBSan). */
#define HWM_BOUND_KIB (64 * 1024)

typedef enum Mode {
        MODE_OWN_UID,               /* not root: the proxy runs as the test's uid */
        MODE_ROOT_DROPS,            /* root: the proxy starts as root and drops to run_uid */
        MODE_STARTED_UNPRIVILEGED,  /* root: the proxy starts as run_uid already */
} Mode;

static Mode mode;
static uid_t run_uid;
static gid_t run_gid;
static char proxy_path[4096];

/* ---- loopback upstreams ------------------------------------------------------------------- */

typedef enum ServerKind {
        SRV_ECHO,    /* echoes until EOF */
        SRV_HTTP,    /* keeps the request head it got, answers "hello", closes */
        SRV_SEND,    /* sends send_n bytes, then EOF */
        SRV_COUNT,   /* counts what it receives until EOF */
} ServerKind;

#define HTTP_REPLY "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"

typedef struct Server {
        ServerKind kind;
        int listen_fd, stop_r, stop_w, done_r, done_w;
        uint16_t port;
        size_t send_n;
        pthread_t thread;
        bool running;
        atomic_uint accepted;
        _Atomic uint64_t received;
        char head[16384];
        size_t head_len;
} Server;

static bool send_all(int fd, const void *buf, size_t len) {
        const char *p = buf;
        while (len > 0) {
                ssize_t k = send(fd, p, len, MSG_NOSIGNAL);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return false;
                p += k;
                len -= (size_t) k;
        }
        return true;
}

static void serve_http(Server *s, int fd) {
        s->head_len = 0;
        while (s->head_len < sizeof s->head - 1) {
                ssize_t k = recv(fd, s->head + s->head_len, sizeof s->head - 1 - s->head_len, 0);
                if (k <= 0)
                        break;
                s->head_len += (size_t) k;
                s->head[s->head_len] = 0;
                if (strstr(s->head, "\r\n\r\n"))
                        break;
        }
        (void) send_all(fd, HTTP_REPLY, strlen(HTTP_REPLY));
}

static void serve_one(Server *s, int fd) {
        char b[4096];
        ssize_t k;

        switch (s->kind) {
        case SRV_ECHO:
                while ((k = recv(fd, b, sizeof b, 0)) > 0)
                        if (!send_all(fd, b, (size_t) k))
                                break;
                break;
        case SRV_HTTP:
                serve_http(s, fd);
                break;
        case SRV_SEND:
                memset(b, 'd', sizeof b);
                for (size_t left = s->send_n; left > 0;) {
                        size_t n = MIN(left, sizeof b);
                        if (!send_all(fd, b, n))
                                break;
                        left -= n;
                }
                (void) shutdown(fd, SHUT_WR);
                while (recv(fd, b, sizeof b, 0) > 0)
                        ;
                break;
        case SRV_COUNT:
                while ((k = recv(fd, b, sizeof b, 0)) > 0)
                        atomic_fetch_add(&s->received, (uint64_t) k);
                break;
        }
}

static void *server_main(void *arg) {
        Server *s = arg;
        for (;;) {
                struct pollfd pfd[2] = { { .fd = s->listen_fd, .events = POLLIN }, { .fd = s->stop_r, .events = POLLIN } };
                if (poll(pfd, 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        return NULL;
                }
                if (pfd[1].revents)
                        return NULL;
                int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0)
                        continue;
                /* A handler must never hang the test: every blocking call is bounded. */
                struct timeval tv = { .tv_sec = WAIT_MS / 1000 };
                (void) setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
                (void) setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
                atomic_fetch_add(&s->accepted, 1);
                serve_one(s, fd);
                close(fd);
                if (write(s->done_w, "x", 1) < 0)
                        return NULL;
        }
}

/* ---- one test's processes and servers, cleaned up whatever the outcome ------------------- */

typedef struct Run {
        pid_t pid;
        int n;
        int streams[MAX_STREAMS];   /* the test's ends; -1 once closed */
        int records;
        char buf[4 * EGRESS_RECORD_MAX];
        size_t len;
} Run;

typedef struct Ctx {
        Run runs[16];
        size_t n_runs;
        Server *servers[4];
        size_t n_servers;
} Ctx;

static int ctx_setup(void **state) {
        *state = calloc(1, sizeof(Ctx));
        return *state ? 0 : -1;
}

static int ctx_teardown(void **state) {
        Ctx *ctx = *state;
        for (size_t i = 0; i < ctx->n_runs; i++) {
                Run *r = &ctx->runs[i];
                for (int j = 0; j < r->n; j++)
                        safe_close(r->streams[j]);
                safe_close(r->records);
                if (r->pid > 0) {
                        (void) kill(r->pid, SIGKILL);
                        (void) waitpid(r->pid, NULL, 0);
                }
        }
        for (size_t i = 0; i < ctx->n_servers; i++) {
                Server *s = ctx->servers[i];
                if (s->running) {
                        if (write(s->stop_w, "x", 1) < 0)
                                fprintf(stderr, "cannot stop a server: %m\n");
                        (void) pthread_join(s->thread, NULL);
                }
                safe_close(s->listen_fd);
                safe_close(s->stop_r);
                safe_close(s->stop_w);
                safe_close(s->done_r);
                safe_close(s->done_w);
                free(s);
        }
        free(ctx);
        return 0;
}

static Server *server_start(Ctx *ctx, ServerKind kind) {
        Server *s = calloc(1, sizeof(Server));
        int sp[2], dp[2];
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t alen = sizeof a;

        assert_non_null(s);
        assert_true(ctx->n_servers < ELEMENTSOF(ctx->servers));
        ctx->servers[ctx->n_servers++] = s;
        s->kind = kind;
        s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(s->listen_fd >= 0);
        assert_int_equal(bind(s->listen_fd, (struct sockaddr *) &a, sizeof a), 0);
        assert_int_equal(listen(s->listen_fd, 16), 0);
        assert_int_equal(getsockname(s->listen_fd, (struct sockaddr *) &a, &alen), 0);
        s->port = ntohs(a.sin_port);
        assert_int_equal(pipe2(sp, O_CLOEXEC), 0);
        assert_int_equal(pipe2(dp, O_CLOEXEC), 0);
        s->stop_r = sp[0], s->stop_w = sp[1], s->done_r = dp[0], s->done_w = dp[1];
        assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
        s->running = true;
        return s;
}

/* Wait until the server has finished n more connections. */
static void server_wait(Server *s, int n) {
        for (int i = 0; i < n; i++) {
                struct pollfd pfd = { .fd = s->done_r, .events = POLLIN };
                char b;
                assert_int_equal(poll(&pfd, 1, WAIT_MS), 1);
                assert_int_equal(read(s->done_r, &b, 1), 1);
        }
}

/* ---- starting the proxy ----------------------------------------------------------------------- */

/* Between fork and exec: fds[i] to 3+i, the records pipe to RECORDS_FD, stdin and stdout on
 * /dev/null (stderr stays, so a sanitizer report is seen), in MODE_STARTED_UNPRIVILEGED the ids
 * run_uid:run_gid. Raw system calls only. */
static _noreturn_ void child_exec(const int *fds, int n, int rec_w, int null_fd, char **argv) {
        int tmp[MAX_STREAMS + 1];

        for (int i = 0; i < n; i++)
                if ((tmp[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 500)) < 0)
                        _exit(126);
        int rec = fcntl(rec_w, F_DUPFD_CLOEXEC, 500);
        if (rec < 0 || dup2(null_fd, 0) < 0 || dup2(null_fd, 1) < 0)
                _exit(126);
        for (int i = 0; i < n; i++)
                if (dup2(tmp[i], 3 + i) < 0)
                        _exit(126);
        if (dup2(rec, RECORDS_FD) < 0)
                _exit(126);
        if (mode == MODE_STARTED_UNPRIVILEGED &&
            (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, run_gid, run_gid, run_gid) < 0 ||
             syscall(SYS_setresuid, run_uid, run_uid, run_uid) < 0))
                _exit(126);
        execve(proxy_path, argv, environ);
        _exit(127);
}

static Run *spawn(Ctx *ctx, const int *fds, int n_fds, char **argv) {
        assert_true(ctx->n_runs < ELEMENTSOF(ctx->runs));
        Run *r = &ctx->runs[ctx->n_runs++];
        int rec[2];
        int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);

        *r = (Run) { .records = -EBADF };
        for (int i = 0; i < MAX_STREAMS; i++)
                r->streams[i] = -EBADF;
        assert_true(null_fd >= 0);
        assert_int_equal(pipe2(rec, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                child_exec(fds, n_fds, rec[1], null_fd, argv);
        close(rec[1]);
        close(null_fd);
        r->pid = pid;
        r->records = rec[0];
        return r;
}

/* The next line of the records: 1 and *ret (caller frees), or 0 at their end (the proxy
 * exited). Fails the test when nothing comes within WAIT_MS. */
static int read_line(Run *r, char **ret) {
        usec_t deadline = now_monotonic() + WAIT_MS * USEC_PER_MSEC;
        for (;;) {
                char *nl = memchr(r->buf, '\n', r->len);
                if (nl) {
                        size_t l = (size_t) (nl - r->buf);
                        *ret = strndup(r->buf, l);
                        assert_non_null(*ret);
                        memmove(r->buf, nl + 1, r->len - l - 1);
                        r->len -= l + 1;
                        return 1;
                }
                assert_true(r->len < sizeof r->buf);
                usec_t now = now_monotonic();
                if (now >= deadline)
                        fail_msg("no record line within %d ms", WAIT_MS);
                struct pollfd pfd = { .fd = r->records, .events = POLLIN };
                int k = poll(&pfd, 1, (int) ((deadline - now) / USEC_PER_MSEC) + 1);
                if (k < 0 && errno == EINTR)
                        continue;
                assert_true(k >= 0);
                if (k == 0)
                        continue;
                ssize_t m = read(r->records, r->buf + r->len, sizeof r->buf - r->len);
                if (m < 0 && errno == EINTR)
                        continue;
                assert_true(m >= 0);
                if (m == 0) {
                        assert_int_equal(r->len, 0);   /* no partial line at the end */
                        return 0;
                }
                r->len += (size_t) m;
        }
}

static json_t *parse_line(const char *line) {
        json_error_t e;
        assert_true(strlen(line) + 1 <= EGRESS_RECORD_MAX);
        json_t *j = json_loads(line, JSON_REJECT_DUPLICATES, &e);
        if (!j)
                fail_msg("not JSON: %s", line);
        assert_true(json_is_object(j));
        return j;
}

/* The next record: exactly the keys of capsule/egress-wire.h. */
static json_t *next_record(Run *r) {
        static const char *const keys[] = { "kind", "host", "port", "address", "verdict", "reason",
                                            "detail", "bytes_up", "bytes_down", "duration_ms" };
        char *line = NULL;
        if (read_line(r, &line) != 1)
                fail_msg("the records ended where a record was expected");
        json_t *j = parse_line(line);
        free(line);
        assert_int_equal(json_object_size(j), ELEMENTSOF(keys));
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                assert_non_null(json_object_get(j, keys[i]));
        const char *d = json_string_value(json_object_get(j, "detail"));
        if (d) {
                assert_true(strlen(d) <= EGRESS_DETAIL_MAX);
                for (const char *c = d; *c; c++)
                        assert_true(*c >= 0x20 && *c < 0x7f);
        }
        return j;
}

typedef struct Opts {
        int n;   /* streams (default 2) */
        const char *max_upload, *max_download, *idle, *max_seconds, *head;
        const char *carries;   /* --stream-carries; NULL: not given (bytes) */
        const char *allow[4];
} Opts;

static void expect_ready(Run *r) {
        char *line = NULL;
        assert_int_equal(read_line(r, &line), 1);
        if (!streq(line, "{\"ready\":true}"))
                fail_msg("not ready: %s", line);
        free(line);
}

static Run *proxy_start(Ctx *ctx, const Opts *o) {
        int n = o->n > 0 ? o->n : 2, outer[MAX_STREAMS], inner[MAX_STREAMS];
        char uid[16], gid[16], streams[32];
        char *argv[40];
        int k = 0;

        for (int i = 0; i < n; i++) {
                int sp[2];
                assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
                outer[i] = sp[0];
                inner[i] = sp[1];
        }
        snprintf(uid, sizeof uid, "%u", (unsigned) run_uid);
        snprintf(gid, sizeof gid, "%u", (unsigned) run_gid);
        snprintf(streams, sizeof streams, "3:%d", n);
        argv[k++] = proxy_path;
#define ARG(flag, value) (argv[k++] = (char *) (flag), argv[k++] = (char *) (value))
        ARG("--uid", uid);
        ARG("--gid", gid);
        ARG("--records-fd", "200");
        ARG("--streams", streams);
        ARG("--max-upload", o->max_upload ? o->max_upload : "1000000");
        ARG("--max-download", o->max_download ? o->max_download : "1000000");
        ARG("--idle-seconds", o->idle ? o->idle : "10");
        ARG("--max-seconds", o->max_seconds ? o->max_seconds : "30");
        if (o->head)
                ARG("--head-seconds", o->head);
        if (o->carries)
                ARG("--stream-carries", o->carries);
        for (size_t i = 0; i < ELEMENTSOF(o->allow) && o->allow[i]; i++)
                ARG("--allow", o->allow[i]);
#undef ARG
        argv[k] = NULL;
        Run *r = spawn(ctx, inner, n, argv);
        for (int i = 0; i < n; i++) {
                close(inner[i]);
                r->streams[i] = outer[i];
        }
        r->n = n;
        expect_ready(r);
        return r;
}

/* Close every stream the test still holds: the proxy must end by itself with status 0. Returns
 * how many records it wrote after those already read. */
static int proxy_finish(Run *r) {
        char *line = NULL;
        int extra = 0, status;

        for (int i = 0; i < r->n; i++)
                r->streams[i] = safe_close(r->streams[i]);
        while (read_line(r, &line) == 1) {
                json_decref(parse_line(line));
                free(line);
                extra++;
        }
        /* Its records fd closed: it has exited. */
        assert_int_equal(waitpid(r->pid, &status, 0), r->pid);
        r->pid = 0;
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        return extra;
}

/* ---- the job's side of a stream ------------------------------------------------------------- */

static void stream_send(int fd, const char *buf, size_t len) {
        assert_true(send_all(fd, buf, len));
}

static void stream_say(int fd, const char *s) {
        stream_send(fd, s, strlen(s));
}

/* Read until EOF (a reset after the data counts as EOF: the proxy cut) into buf[cap],
 * NUL-terminated; its length. */
static size_t stream_read_all(int fd, char *buf, size_t cap) {
        size_t n = 0;
        usec_t deadline = now_monotonic() + WAIT_MS * USEC_PER_MSEC;
        for (;;) {
                usec_t now = now_monotonic();
                if (now >= deadline)
                        fail_msg("no end of stream within %d ms (%zu bytes read)", WAIT_MS, n);
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                int k = poll(&pfd, 1, (int) ((deadline - now) / USEC_PER_MSEC) + 1);
                if (k <= 0)
                        continue;
                assert_true(n < cap);
                ssize_t m = recv(fd, buf + n, cap - 1 - n, MSG_DONTWAIT);
                if (m < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (m == 0 || (m < 0 && errno == ECONNRESET))
                        break;
                assert_true(m > 0);
                n += (size_t) m;
        }
        buf[n] = 0;
        return n;
}

static void stream_read_exact(int fd, char *buf, size_t want) {
        size_t n = 0;
        usec_t deadline = now_monotonic() + WAIT_MS * USEC_PER_MSEC;
        while (n < want) {
                usec_t now = now_monotonic();
                if (now >= deadline)
                        fail_msg("%zu of %zu bytes within %d ms", n, want, WAIT_MS);
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                if (poll(&pfd, 1, (int) ((deadline - now) / USEC_PER_MSEC) + 1) <= 0)
                        continue;
                ssize_t m = recv(fd, buf + n, want - n, MSG_DONTWAIT);
                if (m < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (m <= 0)
                        fail_msg("the stream ended after %zu of %zu bytes", n, want);
                n += (size_t) m;
        }
}

/* A refusal as the job reads it: status, headers, the body naming the reason. */
static void assert_refusal(const char *resp, const char *status, const char *reason) {
        char want[128];
        snprintf(want, sizeof want, "HTTP/1.1 %s\r\n", status);
        if (strncmp(resp, want, strlen(want)) != 0)
                fail_msg("want %s, got: %s", status, resp);
        assert_non_null(strstr(resp, "\r\nContent-Type: text/plain\r\n"));
        assert_non_null(strstr(resp, "\r\nConnection: close\r\n"));
        const char *cl = strstr(resp, "\r\nContent-Length: ");
        const char *body = strstr(resp, "\r\n\r\n");
        assert_non_null(cl);
        assert_non_null(body);
        body += 4;
        assert_int_equal(strtoul(cl + 18, NULL, 10), strlen(body));
        snprintf(want, sizeof want, "tentaflake-worker egress: %s: ", reason);
        if (strncmp(body, want, strlen(want)) != 0)
                fail_msg("body: %s", body);
        assert_int_equal(body[strlen(body) - 1], '\n');
}

static const char *jstr(json_t *o, const char *k) {
        return json_string_value(json_object_get(o, k));
}

static json_int_t jint(json_t *o, const char *k) {
        json_t *v = json_object_get(o, k);
        assert_true(json_is_integer(v));
        return json_integer_value(v);
}

static void assert_jstr(json_t *o, const char *k, const char *want) {
        json_t *v = json_object_get(o, k);
        if (!want) {
                if (!json_is_null(v))
                        fail_msg("%s: want null, got %s", k, json_string_value(v));
                return;
        }
        if (!json_is_string(v) || !streq(json_string_value(v), want))
                fail_msg("%s: want \"%s\", got \"%s\"", k, want, json_is_string(v) ? json_string_value(v) : "(not a string)");
}

static void assert_verdict(json_t *rec, const char *verdict, const char *reason) {
        assert_jstr(rec, "verdict", verdict);
        assert_jstr(rec, "reason", reason);
        if (reason)
                assert_non_null(jstr(rec, "detail"));
        assert_true(jint(rec, "duration_ms") >= 0);
}

/* A refused request on stream fd: the reply and the record. Returns the record. */
static json_t *expect_refused(Run *r, int fd, const char *request, const char *status, const char *reason) {
        char resp[4096];
        stream_say(fd, request);
        size_t n = stream_read_all(fd, resp, sizeof resp);
        assert_refusal(resp, status, reason);
        json_t *rec = next_record(r);
        assert_verdict(rec, "refused", reason);
        /* Nothing went upstream; a name that was resolved went to the resolver, and is charged. */
        const char *host = json_string_value(json_object_get(rec, "host"));
        unsigned char a6[16];
        bool resolved = host && (streq(reason, "address_refused") || streq(reason, "resolve_failed")) &&
                        inet_pton(AF_INET, host, a6) != 1 && inet_pton(AF_INET6, host, a6) != 1;
        assert_int_equal(jint(rec, "bytes_up"), resolved ? (json_int_t) strlen(host) : 0);
        assert_int_equal(jint(rec, "bytes_down"), (json_int_t) n);
        return rec;
}

static void allow_entry(char *buf, size_t size, const char *host, uint16_t port) {
        snprintf(buf, size, "%s:%u", host, (unsigned) port);
}

/* ---- the cases ------------------------------------------------------------------------------ */

static void test_connect_echo(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_ECHO);
        char allow[64], req[256], got[256];
        allow_entry(allow, sizeof allow, "127.0.0.1", s->port);
        Run *r = proxy_start(ctx, &(Opts) { .allow = { allow } });

        /* The first tunnel bytes in the same write as the head: sent on after the connect. */
        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\nhello", s->port, s->port);
        stream_say(r->streams[0], req);
        stream_read_exact(r->streams[0], got, CONNECT_REPLY_LEN + 5);
        assert_memory_equal(got, CONNECT_REPLY "hello", CONNECT_REPLY_LEN + 5);
        stream_say(r->streams[0], "world!");
        stream_read_exact(r->streams[0], got, 6);
        assert_memory_equal(got, "world!", 6);
        /* Half-close both ways: the job's EOF reaches the server, the server's comes back. */
        assert_int_equal(shutdown(r->streams[0], SHUT_WR), 0);
        assert_int_equal(stream_read_all(r->streams[0], got, sizeof got), 0);

        json_t *rec = next_record(r);
        assert_verdict(rec, "allowed", NULL);
        assert_jstr(rec, "kind", "connect");
        assert_jstr(rec, "host", "127.0.0.1");
        assert_int_equal(jint(rec, "port"), s->port);
        assert_jstr(rec, "address", "127.0.0.1");
        assert_jstr(rec, "detail", NULL);
        assert_int_equal(jint(rec, "bytes_up"), 11);
        assert_int_equal(jint(rec, "bytes_down"), CONNECT_REPLY_LEN + 11);
        json_decref(rec);
        server_wait(s, 1);
        assert_int_equal(proxy_finish(r), 0);
}

static void test_forward(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_HTTP);
        char allow[64], req[512], got[512], host[64];
        allow_entry(allow, sizeof allow, "127.0.0.1", s->port);
        Run *r = proxy_start(ctx, &(Opts) { .allow = { allow } });

        snprintf(req, sizeof req,
                 "GET http://127.0.0.1:%u/x HTTP/1.1\r\nHost: evil.example\r\nProxy-Authorization: Basic eA==\r\n"
                 "Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
                 s->port);
        stream_say(r->streams[0], req);
        size_t n = stream_read_all(r->streams[0], got, sizeof got);
        assert_string_equal(got, HTTP_REPLY);
        server_wait(s, 1);

        /* What the server saw: origin form, one Host from the target, no proxy header. */
        assert_true(strncmp(s->head, "GET /x HTTP/1.1\r\n", 17) == 0);
        snprintf(host, sizeof host, "\r\nHost: 127.0.0.1:%u\r\n", s->port);
        assert_non_null(strstr(s->head, host));
        int hosts = 0;
        for (const char *p = s->head; (p = strcasestr(p, "\nhost:")); p++)
                hosts++;
        assert_int_equal(hosts, 1);
        assert_non_null(strstr(s->head, "\r\nConnection: close\r\n"));
        assert_null(strcasestr(s->head, "proxy-"));
        assert_null(strstr(s->head, "keep-alive"));
        assert_non_null(strstr(s->head, "\r\nAccept: */*\r\n"));

        assert_int_equal(shutdown(r->streams[0], SHUT_WR), 0);
        json_t *rec = next_record(r);
        assert_verdict(rec, "allowed", NULL);
        assert_jstr(rec, "kind", "forward");
        assert_jstr(rec, "host", "127.0.0.1");
        assert_jstr(rec, "address", "127.0.0.1");
        assert_int_equal(jint(rec, "bytes_up"), (json_int_t) s->head_len);
        assert_int_equal(jint(rec, "bytes_down"), (json_int_t) n);
        json_decref(rec);
        assert_int_equal(proxy_finish(r), 0);
}

static void test_not_allowed_and_address_refused(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_ECHO);
        char a1[64], a2[64], req[256], got[256];
        allow_entry(a1, sizeof a1, "127.0.0.1", s->port == 2 ? 3 : 2);
        allow_entry(a2, sizeof a2, "localhost", s->port);
        Run *r = proxy_start(ctx, &(Opts) { .n = 4, .allow = { a1, a2 } });

        /* An unlisted port of a listed address. */
        json_t *rec = expect_refused(r, r->streams[0], "CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n", "403 Forbidden",
                                     "not_allowed");
        assert_jstr(rec, "kind", "connect");
        assert_jstr(rec, "host", "127.0.0.1");
        assert_int_equal(jint(rec, "port"), 1);
        assert_jstr(rec, "address", NULL);
        assert_non_null(strstr(jstr(rec, "detail"), "127.0.0.1:1 is not on network.allow"));
        json_decref(rec);

        /* An unlisted IP literal. */
        snprintf(req, sizeof req, "CONNECT 127.0.0.2:%u HTTP/1.1\r\n\r\n", s->port);
        rec = expect_refused(r, r->streams[1], req, "403 Forbidden", "not_allowed");
        assert_non_null(strstr(jstr(rec, "detail"), "IP literal"));
        json_decref(rec);

        /* A name on the list that resolves to loopback: never connected. */
        snprintf(req, sizeof req, "CONNECT localhost:%u HTTP/1.1\r\n\r\n", s->port);
        rec = expect_refused(r, r->streams[2], req, "403 Forbidden", "address_refused");
        assert_jstr(rec, "host", "localhost");
        assert_jstr(rec, "address", "127.0.0.1");
        assert_non_null(strstr(jstr(rec, "detail"), "loopback"));
        json_decref(rec);

        /* The same name as a forward request. */
        snprintf(req, sizeof req, "GET http://localhost:%u/ HTTP/1.1\r\n\r\n", s->port);
        rec = expect_refused(r, r->streams[3], req, "403 Forbidden", "address_refused");
        assert_jstr(rec, "kind", "forward");
        json_decref(rec);

        assert_int_equal(proxy_finish(r), 0);
        assert_int_equal(atomic_load(&s->accepted), 0);

        /* The loopback address:port listed literally as well is the operator's explicit choice:
         * then the name may lead there. */
        allow_entry(a1, sizeof a1, "127.0.0.1", s->port);
        r = proxy_start(ctx, &(Opts) { .allow = { a1, a2 } });
        snprintf(req, sizeof req, "CONNECT localhost:%u HTTP/1.1\r\n\r\n", s->port);
        stream_say(r->streams[0], req);
        stream_read_exact(r->streams[0], got, CONNECT_REPLY_LEN);
        assert_int_equal(shutdown(r->streams[0], SHUT_WR), 0);
        assert_int_equal(stream_read_all(r->streams[0], got, sizeof got), 0);
        rec = next_record(r);
        assert_verdict(rec, "allowed", NULL);
        assert_jstr(rec, "host", "localhost");
        assert_jstr(rec, "address", "127.0.0.1");
        json_decref(rec);
        assert_int_equal(proxy_finish(r), 0);
        assert_int_equal(atomic_load(&s->accepted), 1);
}

static void test_resolve_and_connect_failed(void **state) {
        Ctx *ctx = *state;
        char a2[64], req[256];

        /* A port nothing listens on: bound, then closed. */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t alen = sizeof a;
        assert_int_equal(bind(fd, (struct sockaddr *) &a, sizeof a), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *) &a, &alen), 0);
        close(fd);
        allow_entry(a2, sizeof a2, "127.0.0.1", ntohs(a.sin_port));
        Run *r = proxy_start(ctx, &(Opts) { .allow = { "nonexistent.invalid:80", a2 } });

        json_t *rec = expect_refused(r, r->streams[0], "CONNECT nonexistent.invalid:80 HTTP/1.1\r\n\r\n",
                                     "502 Bad Gateway", "resolve_failed");
        assert_jstr(rec, "host", "nonexistent.invalid");
        assert_jstr(rec, "address", NULL);
        json_decref(rec);

        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", ntohs(a.sin_port));
        rec = expect_refused(r, r->streams[1], req, "502 Bad Gateway", "connect_failed");
        assert_non_null(strstr(jstr(rec, "detail"), "refused"));
        json_decref(rec);
        assert_int_equal(proxy_finish(r), 0);
}

static void test_upload_limit(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_COUNT);
        char allow[64], req[8192], got[4096];
        allow_entry(allow, sizeof allow, "127.0.0.1", s->port);
        Run *r = proxy_start(ctx, &(Opts) { .max_upload = "1000", .allow = { allow } });

        /* 5000 bytes after the head, in the same write: 1000 of them go up, not one more. */
        int h = snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", s->port);
        memset(req + h, 'u', 5000);
        stream_send(r->streams[0], req, (size_t) h + 5000);
        size_t n = stream_read_all(r->streams[0], got, sizeof got);
        assert_int_equal(n, CONNECT_REPLY_LEN);
        json_t *rec = next_record(r);
        assert_verdict(rec, "allowed", "upload_limit");
        assert_int_equal(jint(rec, "bytes_up"), 1000);
        json_decref(rec);
        server_wait(s, 1);
        assert_int_equal(atomic_load(&s->received), 1000);

        /* The budget is the job's: the next connection is refused before it connects. */
        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", s->port);
        rec = expect_refused(r, r->streams[1], req, "403 Forbidden", "upload_limit");
        json_decref(rec);
        assert_int_equal(proxy_finish(r), 0);
        assert_int_equal(atomic_load(&s->accepted), 1);
        assert_int_equal(atomic_load(&s->received), 1000);
}

static void test_download_limit(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_SEND);
        char allow[64], req[256], got[8192];
        s->send_n = 5000;
        allow_entry(allow, sizeof allow, "127.0.0.1", s->port);
        Run *r = proxy_start(ctx, &(Opts) { .max_download = "1000", .allow = { allow } });

        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", s->port);
        stream_say(r->streams[0], req);
        size_t n = stream_read_all(r->streams[0], got, sizeof got);
        assert_int_equal(n, CONNECT_REPLY_LEN + 1000);
        assert_memory_equal(got, CONNECT_REPLY, CONNECT_REPLY_LEN);
        for (size_t i = CONNECT_REPLY_LEN; i < n; i++)
                assert_int_equal(got[i], 'd');
        json_t *rec = next_record(r);
        assert_verdict(rec, "allowed", "download_limit");
        assert_int_equal(jint(rec, "bytes_down"), CONNECT_REPLY_LEN + 1000);
        json_decref(rec);

        rec = expect_refused(r, r->streams[1], req, "403 Forbidden", "download_limit");
        json_decref(rec);
        server_wait(s, 1);
        assert_int_equal(proxy_finish(r), 0);
        assert_int_equal(atomic_load(&s->accepted), 1);
}

static void test_bad_heads(void **state) {
        Ctx *ctx = *state;
        char got[1024];
        Run *r = proxy_start(ctx, &(Opts) { .n = 5, .head = "1", .allow = { "example.com:443" } });

        /* Malformed. */
        json_t *rec = expect_refused(r, r->streams[0], "BREW coffee HTTP/1.1\r\n\r\n", "400 Bad Request",
                                     "bad_request");
        assert_jstr(rec, "kind", NULL);
        assert_jstr(rec, "host", NULL);
        assert_true(json_is_null(json_object_get(rec, "port")));
        assert_jstr(rec, "detail", "method not allowed");
        json_decref(rec);

        /* Never finished within --head-seconds. */
        rec = expect_refused(r, r->streams[1], "CONNECT example.com:443 HTTP/1.1\r\n", "408 Request Timeout",
                             "head_timeout");
        json_decref(rec);

        /* Half a head, then the end of the stream: nothing to answer, a record all the same. */
        stream_say(r->streams[2], "CONNECT example.com:443 HTTP/1.1\r\n");
        assert_int_equal(shutdown(r->streams[2], SHUT_WR), 0);
        assert_int_equal(stream_read_all(r->streams[2], got, sizeof got), 0);
        rec = next_record(r);
        assert_verdict(rec, "refused", "no_request");
        assert_jstr(rec, "kind", NULL);
        assert_int_equal(jint(rec, "bytes_down"), 0);
        json_decref(rec);

        /* Closed without a byte: never a connection, no record (the next record is stream 4's). */
        r->streams[3] = safe_close(r->streams[3]);
        rec = expect_refused(r, r->streams[4], "CONNECT example.com HTTP/1.1\r\n\r\n", "400 Bad Request",
                             "bad_request");
        assert_jstr(rec, "detail", "missing port");
        json_decref(rec);
        assert_int_equal(proxy_finish(r), 0);
}

static void test_idle_and_time_limit(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_ECHO);
        char allow[64], req[256], got[256];
        allow_entry(allow, sizeof allow, "127.0.0.1", s->port);
        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", s->port);

        /* An open tunnel where nobody sends. */
        Run *r = proxy_start(ctx, &(Opts) { .idle = "1", .allow = { allow } });
        stream_say(r->streams[0], req);
        assert_int_equal(stream_read_all(r->streams[0], got, sizeof got), CONNECT_REPLY_LEN);
        json_t *rec = next_record(r);
        assert_verdict(rec, "allowed", "idle_timeout");
        json_decref(rec);
        assert_int_equal(proxy_finish(r), 0);

        /* --max-seconds, long before the idle bound. */
        r = proxy_start(ctx, &(Opts) { .idle = "60", .max_seconds = "1", .allow = { allow } });
        stream_say(r->streams[0], req);
        assert_int_equal(stream_read_all(r->streams[0], got, sizeof got), CONNECT_REPLY_LEN);
        rec = next_record(r);
        assert_verdict(rec, "allowed", "time_limit");
        assert_true(jint(rec, "duration_ms") >= 1000);
        json_decref(rec);
        assert_int_equal(proxy_finish(r), 0);
}

/* The proxy ends by itself when every stream has ended, with one record per stream used. */
static void test_one_record_per_stream(void **state) {
        Ctx *ctx = *state;
        char got[1024];
        Run *r = proxy_start(ctx, &(Opts) { .n = 8 });

        stream_say(r->streams[1], "GET / HTTP/1.1\r\n\r\n");
        stream_say(r->streams[4], "CONNECT example.com:443 HTTP/1.1\r\n\r\n");
        stream_say(r->streams[6], "GARBAGE\r\n\r\n");
        (void) stream_read_all(r->streams[1], got, sizeof got);
        (void) stream_read_all(r->streams[4], got, sizeof got);
        assert_refusal(got, "403 Forbidden", "not_allowed");
        (void) stream_read_all(r->streams[6], got, sizeof got);
        assert_int_equal(proxy_finish(r), 3);
}

static void test_sigterm(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_ECHO);
        char allow[64], req[256], got[256];
        allow_entry(allow, sizeof allow, "127.0.0.1", s->port);
        Run *r = proxy_start(ctx, &(Opts) { .n = 4, .allow = { allow } });

        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", s->port);
        stream_say(r->streams[0], req);
        stream_read_exact(r->streams[0], got, CONNECT_REPLY_LEN);
        assert_int_equal(kill(r->pid, SIGTERM), 0);
        json_t *rec = next_record(r);
        assert_verdict(rec, "allowed", "stopped");
        json_decref(rec);
        /* Every stream, used or not, ends with it. */
        for (int i = 0; i < r->n; i++)
                (void) stream_read_all(r->streams[i], got, sizeof got);
        assert_int_equal(proxy_finish(r), 0);
}

/* ---- start-up ---------------------------------------------------------------------------------- */

/* Start the proxy with argv after the program name and the fds at 3..; its one line must be
 * {"error":...} containing want (NULL: no line at all), and its exit status non-zero: returned. */
static int expect_startup_error(Ctx *ctx, const int *fds, int n_fds, const char *const *args, const char *want) {
        char *argv[40];
        int k = 0, status;
        char *line = NULL;

        argv[k++] = proxy_path;
        for (; *args; args++)
                argv[k++] = (char *) *args;
        argv[k] = NULL;
        Run *r = spawn(ctx, fds, n_fds, argv);
        if (want) {
                assert_int_equal(read_line(r, &line), 1);
                json_t *j = parse_line(line);
                const char *e = jstr(j, "error");
                if (!e || json_object_size(j) != 1 || !strstr(e, want))
                        fail_msg("want an error naming \"%s\", got: %s", want, line);
                json_decref(j);
                free(line);
        }
        assert_int_equal(read_line(r, &line), 0);
        assert_int_equal(waitpid(r->pid, &status, 0), r->pid);
        r->pid = 0;
        assert_true(WIFEXITED(status));
        assert_int_not_equal(WEXITSTATUS(status), 0);
        return WEXITSTATUS(status);
}

static void test_startup_errors(void **state) {
        Ctx *ctx = *state;
        char uid[16], gid[16], other[16];
        int sp[2], pp[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        assert_int_equal(pipe2(pp, O_CLOEXEC), 0);
        snprintf(uid, sizeof uid, "%u", (unsigned) run_uid);
        snprintf(gid, sizeof gid, "%u", (unsigned) run_gid);
        snprintf(other, sizeof other, "%u", (unsigned) run_uid + 1);
#define COMMON "--uid", uid, "--gid", gid, "--records-fd", "200", "--max-upload", "1", "--max-download", "1", \
               "--idle-seconds", "1", "--max-seconds", "1"
        const char *bad_allow[] = { COMMON, "--streams", "3:1", "--allow", "example.com", NULL };
        expect_startup_error(ctx, &sp[1], 1, bad_allow, "--allow");
        const char *bad_allow2[] = { COMMON, "--streams", "3:1", "--allow", "*.x*:80", NULL };
        expect_startup_error(ctx, &sp[1], 1, bad_allow2, "--allow");
        const char *no_streams[] = { COMMON, NULL };
        expect_startup_error(ctx, &sp[1], 1, no_streams, "--streams");
        const char *not_open[] = { COMMON, "--streams", "3:3", NULL };
        expect_startup_error(ctx, &sp[1], 1, not_open, "--streams: fd 4 is not open");
        const char *not_socket[] = { COMMON, "--streams", "3:1", NULL };
        expect_startup_error(ctx, &pp[0], 1, not_socket, "not a stream socket");
        const char *unknown[] = { COMMON, "--streams", "3:1", "--bogus", "1", NULL };
        expect_startup_error(ctx, &sp[1], 1, unknown, "--bogus");
        const char *bad_number[] = { COMMON, "--streams", "3:1", "--head-seconds", "01", NULL };
        expect_startup_error(ctx, &sp[1], 1, bad_number, "--head-seconds");
        const char *twice[] = { COMMON, "--streams", "3:1", "--max-seconds", "2", NULL };
        expect_startup_error(ctx, &sp[1], 1, twice, "--max-seconds");
        const char *root[] = { "--uid", "0", "--gid", gid, "--records-fd", "200", "--max-upload", "1",
                               "--max-download", "1", "--idle-seconds", "1", "--max-seconds", "1", "--streams", "3:1",
                               NULL };
        expect_startup_error(ctx, &sp[1], 1, root, "--uid");
        /* No usable records fd: nothing to write to, but still a failure. */
        const char *no_records[] = { "--uid", uid, "--gid", gid, "--records-fd", "201", "--max-upload", "1",
                                     "--max-download", "1", "--idle-seconds", "1", "--max-seconds", "1",
                                     "--streams", "3:1", NULL };
        expect_startup_error(ctx, &sp[1], 1, no_records, NULL);
        if (mode != MODE_ROOT_DROPS) {
                /* Unprivileged, it cannot become anyone else. */
                const char *other_uid[] = { "--uid", other, "--gid", gid, "--records-fd", "200", "--max-upload", "1",
                                            "--max-download", "1", "--idle-seconds", "1", "--max-seconds", "1",
                                            "--streams", "3:1", NULL };
                expect_startup_error(ctx, &sp[1], 1, other_uid, "--uid");
        }
#undef COMMON
        close(sp[0]);
        close(sp[1]);
        close(pp[0]);
        close(pp[1]);
}

static bool status_line(pid_t pid, const char *key, char *ret, size_t size) {
        char path[64], buf[4096];
        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        assert_true(n > 0);
        buf[n] = 0;
        for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, key, strlen(key)) == 0 && l[strlen(key)] == ':') {
                        const char *v = l + strlen(key) + 1;
                        v += strspn(v, " \t");
                        size_t len = strcspn(v, "\n");
                        snprintf(ret, size, "%.*s", (int) len, v);
                        return true;
                }
        return false;
}

/* After {"ready":true}: the job's ids, no group, no capability, no new privileges. */
static void test_privileges(void **state) {
        Ctx *ctx = *state;
        char v[256], want[128];
        Run *r = proxy_start(ctx, &(Opts) { .n = 1 });

        snprintf(want, sizeof want, "%u\t%u\t%u\t%u", (unsigned) run_uid, (unsigned) run_uid, (unsigned) run_uid,
                 (unsigned) run_uid);
        assert_true(status_line(r->pid, "Uid", v, sizeof v));
        assert_string_equal(v, want);
        snprintf(want, sizeof want, "%u\t%u\t%u\t%u", (unsigned) run_gid, (unsigned) run_gid, (unsigned) run_gid,
                 (unsigned) run_gid);
        assert_true(status_line(r->pid, "Gid", v, sizeof v));
        assert_string_equal(v, want);
        assert_true(status_line(r->pid, "NoNewPrivs", v, sizeof v));
        assert_string_equal(v, "1");
#ifndef PROXY_UNDER_ASAN
        /* Its seccomp filter (egress-proxy.c, confine): loaded before it said ready. */
        assert_true(status_line(r->pid, "Seccomp", v, sizeof v));
        assert_string_equal(v, "2");
#endif
        if (mode != MODE_OWN_UID) {
                assert_true(status_line(r->pid, "Groups", v, sizeof v));
                assert_string_equal(v, "");
                assert_true(status_line(r->pid, "CapEff", v, sizeof v));
                assert_string_equal(v, "0000000000000000");
                assert_true(status_line(r->pid, "CapPrm", v, sizeof v));
                assert_string_equal(v, "0000000000000000");
        }
        assert_int_equal(proxy_finish(r), 0);
}

/* 64 connections at once, each 16 KiB of garbage or a head that never ends: each is answered,
 * the proxy stays up, and its peak memory stays bounded. One more stream, never used, keeps the
 * proxy running once the 64 have ended (a stream carries one connection: with all of them used
 * and done it would exit, as it should). */
static void test_hostile_volume(void **state) {
        Ctx *ctx = *state;
        static char garbage[EGRESS_HEAD_MAX], got[4096];
        char v[64];
        uint32_t x = 12345;
        Run *r = proxy_start(ctx, &(Opts) { .n = HOSTILE + 1, .head = "1", .allow = { "example.com:80" } });

        for (size_t i = 0; i < sizeof garbage; i++) {
                x = x * 1103515245u + 12345u;
                garbage[i] = (char) (x >> 16);
        }
        for (int i = 0; i < HOSTILE; i++) {
                if (i % 2 == 0)
                        stream_send(r->streams[i], garbage, sizeof garbage);
                else
                        stream_say(r->streams[i], "GET http://example.com/ HTTP/1.1\r\nX-Pad: aaaaaaaaaaaaaaaa");
        }
        for (int i = 0; i < HOSTILE; i++) {
                (void) stream_read_all(r->streams[i], got, sizeof got);
                assert_refusal(got, i % 2 == 0 ? "400 Bad Request" : "408 Request Timeout",
                               i % 2 == 0 ? "bad_request" : "head_timeout");
        }
        int bad = 0, timeout = 0;
        for (int i = 0; i < HOSTILE; i++) {
                json_t *rec = next_record(r);
                assert_jstr(rec, "verdict", "refused");
                const char *reason = jstr(rec, "reason");
                assert_non_null(reason);
                bad += streq(reason, "bad_request");
                timeout += streq(reason, "head_timeout");
                json_decref(rec);
        }
        assert_int_equal(bad, HOSTILE / 2);
        assert_int_equal(timeout, HOSTILE / 2);
        /* Alive, and its high-water mark covers the moment all 64 were open. */
        assert_int_equal(waitpid(r->pid, NULL, WNOHANG), 0);
        assert_true(status_line(r->pid, "VmHWM", v, sizeof v));
        unsigned long hwm = strtoul(v, NULL, 10);
        print_message("proxy VmHWM after %d hostile connections: %lu kB\n", HOSTILE, hwm);
        assert_true(hwm > 0 && hwm < HWM_BOUND_KIB);
        assert_int_equal(proxy_finish(r), 0);
}

/* ---- its identity against a notify hook's (issue 33 finding 4) ----------------------------- */

/* A process of its own as uid:gid with env as its whole environment, running sleep: returned
 * once it has exec'd (its close-on-exec pipe reads end of file), so /proc/PID/environ is env. */
static pid_t start_as(uid_t uid, gid_t gid, char *const *env) {
        int p[2];
        char b;
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char *argv[] = { (char *) "sleep", (char *) "120", NULL };
                close(p[0]);
                if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                        _exit(126);
                execve("/bin/sleep", argv, env);
                _exit(127);
        }
        close(p[1]);
        assert_int_equal(read(p[0], &b, 1), 0);
        close(p[0]);
        assert_int_equal(waitpid(pid, NULL, WNOHANG), 0);   /* exec'd and running */
        return pid;
}

static void end(pid_t pid) {
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
}

/* As uid:gid (no group), read /proc/PID/environ: 0 and what it holds in got, or the errno. */
static int read_environ_as(uid_t uid, gid_t gid, pid_t target, char *got, size_t size) {
        int p[2], status;
        char path[64];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        snprintf(path, sizeof path, "/proc/%d/environ", (int) target);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char buf[512];
                close(p[0]);
                if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                        _exit(126);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf);
                if (n < 0)
                        _exit(errno > 0 && errno < 126 ? errno : 125);
                for (ssize_t i = 0; i < n; i++)
                        if (!buf[i])
                                buf[i] = ' ';
                _exit(write(p[1], buf, (size_t) n) == n ? 0 : 125);
        }
        close(p[1]);
        ssize_t n = read(p[0], got, size - 1);
        got[n > 0 ? n : 0] = 0;
        close(p[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_true(WEXITSTATUS(status) != 126 && WEXITSTATUS(status) != 125);
        return WEXITSTATUS(status);
}

static void status_ids(pid_t pid, const char *key, unsigned *ret) {
        char v[128];
        assert_true(status_line(pid, key, v, sizeof v));
        assert_int_equal(sscanf(v, "%u", ret), 1);
}

static void test_ids_own_range(void **state) {
        Ctx *ctx = *state;
        char uid[16];
        int sp[2];

        if (mode != MODE_ROOT_DROPS)
                tfw_skip("needs root: the proxy drops its ids only when started as root");
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        snprintf(uid, sizeof uid, "%u", (unsigned) run_uid);
#define REST "--records-fd", "200", "--max-upload", "1", "--max-download", "1", "--idle-seconds", "1", \
             "--max-seconds", "1", "--streams", "3:1"
        /* nobody: the notify hook's and the artifact parser's uid. */
        const char *nobody[] = { "--uid", "65534", "--gid", "65534", REST, NULL };
        expect_startup_error(ctx, &sp[1], 1, nobody, "--uid/--gid 65534:65534: not in 2130706432..2130771967");
        const char *gid_out[] = { "--uid", uid, "--gid", "65534", REST, NULL };
        expect_startup_error(ctx, &sp[1], 1, gid_out, "the egress proxies' own ids");
        const char *below[] = { "--uid", "2130706431", "--gid", "2130706431", REST, NULL };
        expect_startup_error(ctx, &sp[1], 1, below, "not in 2130706432..2130771967");
#undef REST
        close(sp[0]);
        close(sp[1]);
}

/* A process it can see with its uid, or with its gid alone: it refuses with the status that
 * makes the worker start it again on another id. */
static void test_ids_not_shared(void **state) {
        Ctx *ctx = *state;
        char uid[16], gid[16], want[96];
        int sp[2];
        char *env[] = { NULL };

        if (mode != MODE_ROOT_DROPS)
                tfw_skip("needs root: the proxy checks its ids only when it drops to them");
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        snprintf(uid, sizeof uid, "%u", (unsigned) run_uid);
        snprintf(gid, sizeof gid, "%u", (unsigned) run_gid);
        const char *args[] = { "--uid", uid, "--gid", gid, "--records-fd", "200", "--max-upload", "1",
                               "--max-download", "1", "--idle-seconds", "1", "--max-seconds", "1", "--streams", "3:1",
                               NULL };
        pid_t other = start_as(run_uid, run_gid, env);
        snprintf(want, sizeof want, "--uid %u: process %d (sleep) has it too", (unsigned) run_uid, (int) other);
        assert_int_equal(expect_startup_error(ctx, &sp[1], 1, args, want), EGRESS_EXIT_ID_IN_USE);
        end(other);
        other = start_as(65534, run_gid, env);
        snprintf(want, sizeof want, "--gid %u: process %d (sleep) has it too", (unsigned) run_gid, (int) other);
        assert_int_equal(expect_startup_error(ctx, &sp[1], 1, args, want), EGRESS_EXIT_ID_IN_USE);
        end(other);
        /* Alone again: it starts. */
        Run *r = proxy_start(ctx, &(Opts) { .n = 1 });
        assert_int_equal(proxy_finish(r), 0);
        close(sp[0]);
        close(sp[1]);
}

/* The finding: a process as the notify hook's default identity, with a webhook's token in its
 * environment, and a process as a running proxy's identity (read from the proxy itself): neither
 * can read the other's /proc/PID/environ, and each can read one of its own identity's (so a
 * refusal is the identities', not the reader's). */
static void test_hook_and_proxy_apart(void **state) {
        Ctx *ctx = *state;
        static const char cfg[] = "{\"version\":1,\"name\":\"t\",\"workspace\":\"/srv/t\",\"container_uid\":10000,"
                                  "\"container_gid\":10000,\"notify\":{\"command\":[\"/bin/true\"]}}";
        char *hook_env[] = { (char *) "WEBHOOK_TOKEN=hook-secret-33", NULL };
        char *proxy_env[] = { (char *) "PROXY_SECRET=proxy-secret-33", NULL };
        _cleanup_config_ Config *c = NULL;
        TfwError e = {0};
        unsigned pu, pg;
        char got[512];

        if (mode != MODE_ROOT_DROPS)
                tfw_skip("needs root: the processes take other identities");
        assert_int_equal(config_parse_buffer(cfg, strlen(cfg), &c, &e), 0);
        uid_t hu = c->notify.uid;
        gid_t hg = c->notify.gid;
        Run *r = proxy_start(ctx, &(Opts) { .n = 1 });
        status_ids(r->pid, "Uid", &pu);
        status_ids(r->pid, "Gid", &pg);
        print_message("hook %u:%u, proxy %u:%u\n", (unsigned) hu, (unsigned) hg, pu, pg);
        assert_true(pu != hu && pg != hg);

        pid_t hook = start_as(hu, hg, hook_env);
        assert_int_equal(read_environ_as(pu, pg, hook, got, sizeof got), EACCES);
        assert_null(strstr(got, "hook-secret-33"));
        assert_int_equal(read_environ_as(hu, hg, hook, got, sizeof got), 0);
        assert_non_null(strstr(got, "hook-secret-33"));

        pid_t mine = start_as(pu, pg, proxy_env);
        assert_int_equal(read_environ_as(hu, hg, mine, got, sizeof got), EACCES);
        assert_null(strstr(got, "proxy-secret-33"));
        assert_int_equal(read_environ_as(pu, pg, mine, got, sizeof got), 0);
        assert_non_null(strstr(got, "proxy-secret-33"));
        /* The proxy itself: not dumpable, so not even its own identity reads it. */
        assert_int_equal(read_environ_as(pu, pg, r->pid, got, sizeof got), EACCES);
        end(mine);
        end(hook);
        assert_int_equal(proxy_finish(r), 0);
}

/* ---- --stream-carries socket (runc: init passes the job's TCP socket itself) ---------------- */

/* One byte on the stream with fd attached (SCM_RIGHTS), as init sends it (capsule-init). */
static void pass_fd(int stream, int fd) {
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
        memcpy(CMSG_DATA(h), &fd, sizeof(int));
        assert_int_equal(sendmsg(stream, &m, MSG_NOSIGNAL), 1);
}

/* A connected TCP pair on the loopback: *job the job's end (the test's), *accepted the one
 * init accepted (to be passed); *listener left listening, for a case that passes that. */
static void tcp_pair(int *job, int *accepted, int *listener) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof a;
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(l >= 0);
        assert_int_equal(bind(l, (struct sockaddr *) &a, sizeof a), 0);
        assert_int_equal(listen(l, 1), 0);
        assert_int_equal(getsockname(l, (struct sockaddr *) &a, &len), 0);
        *job = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(*job >= 0);
        assert_int_equal(connect(*job, (struct sockaddr *) &a, sizeof a), 0);
        *accepted = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        assert_true(*accepted >= 0);
        *listener = l;
}

/* A stream whose passed fd is refused: the record says so, nothing went upstream, and the
 * stream is closed (init's sign that the connection is over). */
static void expect_no_socket(Run *r, int stream) {
        char got[256];
        assert_int_equal(stream_read_all(stream, got, sizeof got), 0);
        json_t *rec = next_record(r);
        assert_verdict(rec, "refused", "no_request");
        assert_jstr(rec, "detail", "the stream passed no TCP socket");
        assert_int_equal(jint(rec, "bytes_up"), 0);
        json_decref(rec);
}

/* The job's own socket, passed: CONNECT through it with the echo, both half-closes, the
 * record as with bytes on the stream; the stream closed once the connection ended. */
static void test_take_socket(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_ECHO);
        char allow[64], req[256], got[256];
        int job, acc, l;
        allow_entry(allow, sizeof allow, "127.0.0.1", s->port);
        Run *r = proxy_start(ctx, &(Opts) { .carries = "socket", .allow = { allow } });

        tcp_pair(&job, &acc, &l);
        close(l);
        pass_fd(r->streams[0], acc);
        close(acc);
        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\nhello", s->port);
        stream_say(job, req);
        stream_read_exact(job, got, CONNECT_REPLY_LEN + 5);
        assert_memory_equal(got, CONNECT_REPLY "hello", CONNECT_REPLY_LEN + 5);
        assert_int_equal(shutdown(job, SHUT_WR), 0);
        assert_int_equal(stream_read_all(job, got, sizeof got), 0);
        close(job);
        /* Nothing ever comes on the stream itself: it ends with the connection. */
        assert_int_equal(stream_read_all(r->streams[0], got, sizeof got), 0);

        json_t *rec = next_record(r);
        assert_verdict(rec, "allowed", NULL);
        assert_jstr(rec, "kind", "connect");
        assert_int_equal(jint(rec, "bytes_up"), 5);
        assert_int_equal(jint(rec, "bytes_down"), CONNECT_REPLY_LEN + 5);
        json_decref(rec);
        server_wait(s, 1);
        assert_int_equal(proxy_finish(r), 0);
}

/* The download budget holds on a passed socket as on a stream. */
static void test_take_socket_download_limit(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_SEND);
        char allow[64], req[256], got[8192];
        int job, acc, l;
        s->send_n = 5000;
        allow_entry(allow, sizeof allow, "127.0.0.1", s->port);
        Run *r = proxy_start(ctx, &(Opts) { .carries = "socket", .max_download = "1000", .allow = { allow } });

        tcp_pair(&job, &acc, &l);
        close(l);
        pass_fd(r->streams[0], acc);
        close(acc);
        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", s->port);
        stream_say(job, req);
        size_t n = stream_read_all(job, got, sizeof got);
        assert_int_equal(n, CONNECT_REPLY_LEN + 1000);
        close(job);
        json_t *rec = next_record(r);
        assert_verdict(rec, "allowed", "download_limit");
        assert_int_equal(jint(rec, "bytes_down"), CONNECT_REPLY_LEN + 1000);
        json_decref(rec);
        server_wait(s, 1);
        assert_int_equal(proxy_finish(r), 0);
}

/* What the sandbox may attach instead: a pipe, a unix socket (another stream's end, say), a
 * listening TCP socket, two sockets at once, bytes with no fd. Each is refused and closed;
 * nothing reaches the upstream. */
static void test_take_socket_refuses_others(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_ECHO);
        char allow[64], req[256];
        int p[2], sp[2], job, acc, l;
        allow_entry(allow, sizeof allow, "127.0.0.1", s->port);
        Run *r = proxy_start(ctx, &(Opts) { .n = 5, .carries = "socket", .allow = { allow } });
        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", s->port);

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_true(write(p[1], req, strlen(req)) == (ssize_t) strlen(req));
        pass_fd(r->streams[0], p[0]);
        expect_no_socket(r, r->streams[0]);

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
        stream_say(sp[0], req);
        pass_fd(r->streams[1], sp[1]);
        expect_no_socket(r, r->streams[1]);

        tcp_pair(&job, &acc, &l);
        pass_fd(r->streams[2], l);
        expect_no_socket(r, r->streams[2]);

        /* Two fds in one message: neither is taken. */
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(2 * sizeof(int))];
        } u = {};
        int two[2] = { acc, acc };
        struct iovec iov = { .iov_base = (char[]) { 'c' }, .iov_len = 1 };
        struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf };
        CMSG_FIRSTHDR(&m)->cmsg_level = SOL_SOCKET;
        CMSG_FIRSTHDR(&m)->cmsg_type = SCM_RIGHTS;
        CMSG_FIRSTHDR(&m)->cmsg_len = CMSG_LEN(sizeof two);
        memcpy(CMSG_DATA(CMSG_FIRSTHDR(&m)), two, sizeof two);
        assert_int_equal(sendmsg(r->streams[3], &m, MSG_NOSIGNAL), 1);
        expect_no_socket(r, r->streams[3]);

        /* A request as bytes, the way a stream carries it under runsc. */
        stream_say(r->streams[4], req);
        expect_no_socket(r, r->streams[4]);

        close(p[0]);
        close(p[1]);
        close(sp[0]);
        close(sp[1]);
        close(job);
        close(acc);
        close(l);
        assert_int_equal(atomic_load(&s->accepted), 0);
        assert_int_equal(proxy_finish(r), 0);
}


/* The sender keeps a copy of the socket it passed and clears O_NONBLOCK on it, again and again
 * (a file's flags are shared by every copy), with small buffers: the proxy's splice into the
 * socket then waits for room inside the call, where neither its deadlines nor the stop eventfd
 * reach it. The job reads part of the download and stops; the proxy's SIGTERM must still end
 * the connection with its record ("stopped") and the proxy itself: the shutdown of the job's
 * socket wakes the call. Without it no record comes and the proxy never exits. */
typedef struct Toggler {
        int fd;
        _Atomic bool stop;
} Toggler;

static void *toggle_blocking(void *arg) {
        Toggler *t = arg;
        while (!atomic_load(&t->stop))
                (void) fcntl(t->fd, F_SETFL, 0);
        return NULL;
}

static void test_take_socket_shared_copy(void **state) {
        Ctx *ctx = *state;
        Server *s = server_start(ctx, SRV_SEND);
        char allow[64], req[256], got[CONNECT_REPLY_LEN];
        static char part[256 * 1024];
        int job, acc, l;
        s->send_n = 64 * 1024 * 1024;
        allow_entry(allow, sizeof allow, "127.0.0.1", s->port);
        Run *r = proxy_start(ctx, &(Opts) { .carries = "socket", .idle = "600", .max_seconds = "600",
                                            .max_download = "1000000000", .allow = { allow } });

        tcp_pair(&job, &acc, &l);
        close(l);
        assert_int_equal(setsockopt(acc, SOL_SOCKET, SO_SNDBUF, &(int) { 4096 }, sizeof(int)), 0);
        assert_int_equal(setsockopt(job, SOL_SOCKET, SO_RCVBUF, &(int) { 4096 }, sizeof(int)), 0);
        Toggler t = { .fd = acc };
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, toggle_blocking, &t), 0);
        pass_fd(r->streams[0], acc);
        snprintf(req, sizeof req, "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", s->port);
        stream_say(job, req);
        stream_read_exact(job, got, CONNECT_REPLY_LEN);
        stream_read_exact(job, part, sizeof part);
        assert_int_equal(kill(r->pid, SIGTERM), 0);
        json_t *rec = next_record(r);
        atomic_store(&t.stop, true);
        (void) pthread_join(th, NULL);
        assert_verdict(rec, "allowed", "stopped");
        json_decref(rec);
        close(job);
        close(acc);
        assert_int_equal(proxy_finish(r), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, ctx_setup, ctx_teardown)

int main(void) {
        const struct CMUnitTest tests[] = {
                T(test_connect_echo),
                T(test_forward),
                T(test_not_allowed_and_address_refused),
                T(test_resolve_and_connect_failed),
                T(test_upload_limit),
                T(test_download_limit),
                T(test_bad_heads),
                T(test_idle_and_time_limit),
                T(test_one_record_per_stream),
                T(test_sigterm),
                T(test_startup_errors),
                T(test_privileges),
                T(test_hostile_volume),
                T(test_take_socket),
                T(test_take_socket_download_limit),
                T(test_take_socket_refuses_others),
                T(test_take_socket_shared_copy),
        };
        const struct CMUnitTest id_tests[] = {
                T(test_ids_own_range),
                T(test_ids_not_shared),
                T(test_hook_and_proxy_apart),
        };
        const char *build = getenv("BUILD");
        EgressId id;
        TfwError e = {0};
        int failed = 0;

        snprintf(proxy_path, sizeof proxy_path, "%s/" EGRESS_PROXY_NAME, build && *build ? build : "build");
        if (access(proxy_path, X_OK) < 0) {
                fprintf(stderr, "%s: %m\n", proxy_path);
                return 1;
        }
        /* The servers write into connections the proxy may cut. */
        signal(SIGPIPE, SIG_IGN);
        if (geteuid() == 0) {
                /* An id of the proxies' range as the worker takes one: held by this test, so that
                 * no worker of the host gives it to a proxy of its own meanwhile. */
                if (egress_id_take(&id, &e) < 0) {
                        fprintf(stderr, "%s\n", e.message);
                        return 1;
                }
                run_uid = id.uid, run_gid = id.uid;
                mode = MODE_ROOT_DROPS;
                failed += cmocka_run_group_tests_name("egress proxy, root dropping to an id of its own", tests, NULL,
                                                      NULL);
                failed += cmocka_run_group_tests_name("egress proxy, its identity", id_tests, NULL, NULL);
                mode = MODE_STARTED_UNPRIVILEGED;
                failed += cmocka_run_group_tests_name("egress proxy, started unprivileged", tests, NULL, NULL);
                egress_id_release(&id);
        } else {
                mode = MODE_OWN_UID;
                run_uid = getuid(), run_gid = getgid();
                failed += cmocka_run_group_tests_name("egress proxy, as the test's uid", tests, NULL, NULL);
                failed += cmocka_run_group_tests_name("egress proxy, its identity", id_tests, NULL, NULL);
        }
        return failed;
}
