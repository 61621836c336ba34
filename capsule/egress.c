/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/egress-wire.h"
#include "capsule/egress.h"
#include "capsule/init-path.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "common/process.h"
#include "parser/egress-allow.h"

/* The records the proxy may write: the ready line and one per stream. */
#define RECORDS_MAX ((CAPSULE_EGRESS_STREAMS + 1) * EGRESS_RECORD_MAX)
/* The proxy's fds: 0..2 /dev/null, the records, then the streams. */
#define PROXY_RECORDS_FD 3
#define PROXY_STREAMS_FD 4

static const char *const refused_words[] = { EGRESS_REFUSED_WORDS, NULL };
static const char *const cut_words[] = { EGRESS_CUT_WORDS, NULL };

void egress_proxy_init(EgressProxy *p) {
        p->pid = 0;
        p->records = -EBADF;
        for (size_t i = 0; i < ELEMENTSOF(p->inside); i++)
                p->inside[i] = -EBADF;
        egress_id_init(&p->id);
}

void egress_proxy_close_inside(EgressProxy *p) {
        for (size_t i = 0; i < ELEMENTSOF(p->inside); i++)
                p->inside[i] = safe_close(p->inside[i]);
}

/* The proxy ended (reaped, or never started): its id may go to the next one. */
static void proxy_gone(EgressProxy *p) {
        p->pid = 0;
        p->records = safe_close(p->records);
        egress_id_release(&p->id);
}

/* The proxy was not reaped within its bound (the kernel holds it past SIGKILL): left, and its id
 * stays locked for as long as the worker lives, whatever is called on p later. */
static void proxy_left(EgressProxy *p) {
        p->pid = 0;
        p->records = safe_close(p->records);
        egress_id_abandon(&p->id);
}

void egress_proxy_kill(EgressProxy *p) {
        /* Bounded (threat 13): one the kernel holds past PROCESS_REAP_AFTER_KILL_USEC is left,
         * and keeps its id locked: no other proxy may run as an id a live process still has. */
        if (p->pid > 0 && process_kill_and_reap(p->pid, -EBADF, NULL) == -EBUSY)
                proxy_left(p);
        else
                proxy_gone(p);
        egress_proxy_close_inside(p);
}

/* ---- starting it ---------------------------------------------------------------------- */

typedef struct ProxyArgs {
        char *v[24 + 2 * CONFIG_NETWORK_ALLOW_MAX];
        char num[8][32];
} ProxyArgs;

static void proxy_args(ProxyArgs *a, const char *path, const Config *c, uint64_t max_seconds, uid_t id,
                       bool take_sockets) {
        size_t n = 0;
        snprintf(a->num[0], sizeof(a->num[0]), "%u", (unsigned) id);
        snprintf(a->num[1], sizeof(a->num[1]), "%u", (unsigned) id);
        snprintf(a->num[2], sizeof(a->num[2]), "%d", PROXY_RECORDS_FD);
        snprintf(a->num[3], sizeof(a->num[3]), "%d:%d", PROXY_STREAMS_FD, CAPSULE_EGRESS_STREAMS);
        snprintf(a->num[4], sizeof(a->num[4]), "%" PRIu64, c->network.max_upload_bytes);
        snprintf(a->num[5], sizeof(a->num[5]), "%" PRIu64, c->network.max_download_bytes);
        snprintf(a->num[6], sizeof(a->num[6]), "%d", EGRESS_IDLE_SECONDS);
        snprintf(a->num[7], sizeof(a->num[7]), "%" PRIu64, max_seconds);
        static const char *const flags[] = { "--uid", "--gid", "--records-fd", "--streams",
                                             "--max-upload", "--max-download", "--idle-seconds", "--max-seconds" };
        a->v[n++] = (char *) path;
        for (size_t i = 0; i < ELEMENTSOF(flags); i++) {
                a->v[n++] = (char *) flags[i];
                a->v[n++] = a->num[i];
        }
        if (take_sockets) {
                a->v[n++] = (char *) "--stream-carries";
                a->v[n++] = (char *) "socket";
        }
        for (size_t i = 0; i < c->network.n_allow; i++) {
                a->v[n++] = (char *) "--allow";
                a->v[n++] = c->network.allow[i];
        }
        a->v[n] = NULL;
}

/* Between fork and exec: raw system calls only (common/process.h). */
static _noreturn_ void exec_proxy(char *const *argv, int null_fd, int records_w, const int *outside) {
        int fds[PROXY_STREAMS_FD + CAPSULE_EGRESS_STREAMS] = { null_fd, null_fd, null_fd, records_w };
        for (size_t i = 0; i < CAPSULE_EGRESS_STREAMS; i++)
                fds[PROXY_STREAMS_FD + i] = outside[i];
        if (child_setup_fds(fds, ELEMENTSOF(fds)) < 0)
                _exit(127);
        /* Nothing of the worker's environment: the resolver reads none of it. */
        char *env[] = { NULL };
        execve(argv[0], argv, env);
        _exit(127);
}

/* Its first line: {"ready":true}, or {"error":TEXT} (capsule/egress-wire.h), within
 * EGRESS_READY_USEC; read a byte at a time so nothing after it is taken here. */
static int await_ready(int fd, char *why, size_t size) {
        char line[EGRESS_RECORD_MAX + 1];
        size_t n = 0;
        usec_t deadline = now_monotonic() + EGRESS_READY_USEC;

        for (;;) {
                usec_t now = now_monotonic();
                struct pollfd pfd = { .fd = fd, .events = POLLIN };
                int k = now >= deadline ? 0 : poll(&pfd, 1, (int) ((deadline - now + 999) / 1000));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return snprintf(why, size, "it did not say it was ready within %d s",
                                        (int) (EGRESS_READY_USEC / USEC_PER_SEC)), -ETIMEDOUT;
                ssize_t m = read(fd, line + n, 1);
                if (m < 0 && errno == EINTR)
                        continue;
                if (m <= 0)
                        return snprintf(why, size, "it exited before it was ready"), -EIO;
                if (line[n] == '\n')
                        break;
                if (++n >= EGRESS_RECORD_MAX)
                        return snprintf(why, size, "its first line is too long"), -EBADMSG;
        }
        line[n] = 0;
        _cleanup_json_ json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
        if (o && json_is_true(json_object_get(o, "ready")) && json_object_size(o) == 1)
                return 0;
        const char *err = o ? json_string_value(json_object_get(o, "error")) : NULL;
        char shown[256];
        size_t i = 0;
        for (; err && err[i] && i < sizeof(shown) - 1; i++)
                shown[i] = (err[i] >= 0x20 && err[i] < 0x7f) ? err[i] : '?';
        shown[i] = 0;
        snprintf(why, size, "%s", err ? shown : "its first line is not its ready line");
        return -EIO;
}

/* One proxy on an id of its own, for the streams' outside ends (kept: a proxy that refuses its id
 * is started again on them), waited for until it is ready. 0; or a negative errno with e filled,
 * the proxy reaped and its id released, and *ret_id_in_use when it refused because some process
 * it can see has that id (EGRESS_EXIT_ID_IN_USE). */
static int proxy_spawn(EgressProxy *p, const char *path, const Config *config, uint64_t max_seconds,
                       bool take_sockets, int null_fd, const int *outside, bool *ret_id_in_use, TfwError *e) {
        int rec[2] = { -EBADF, -EBADF }, st = 0;
        char why[300];
        ProxyArgs a;

        *ret_id_in_use = false;
        int r = egress_id_take(&p->id, e);
        if (r < 0)
                return r;
        if (pipe2(rec, O_CLOEXEC) < 0) {
                r = tfw_error(e, errno, "capsule_setup", "egress: pipe: %m");
                proxy_gone(p);
                return r;
        }
        /* Every record fits, so the proxy never waits on a worker that reads them at the end. */
        (void) fcntl(rec[0], F_SETPIPE_SZ, RECORDS_MAX);
        proxy_args(&a, path, config, max_seconds, p->id.uid, take_sockets);
        r = safe_fork(FORK_DEATHSIG, &p->pid);
        if (r < 0) {
                safe_close(rec[0]);
                safe_close(rec[1]);
                proxy_gone(p);
                return tfw_error(e, -r, "capsule_setup", "egress: cannot start the proxy: %s", strerror(-r));
        }
        if (p->pid == 0)
                exec_proxy(a.v, null_fd, rec[1], outside);
        p->records = TAKE_FD(rec[0]);
        safe_close(rec[1]);
        r = await_ready(p->records, why, sizeof(why));
        if (r == 0)
                return 0;
        /* It exits by itself once it has said why; one that said nothing is killed. */
        if (waitpid_bounded(p->pid, EGRESS_END_USEC, &st) == -EBUSY) {
                proxy_left(p);
                return tfw_error(e, -r, "capsule_setup", "egress proxy '%s': %s (and it did not end)", path, why);
        }
        *ret_id_in_use = WIFEXITED(st) && WEXITSTATUS(st) == EGRESS_EXIT_ID_IN_USE;
        proxy_gone(p);
        return tfw_error(e, -r, "capsule_setup", "egress proxy '%s': %s", path, why);
}

int egress_proxy_start(const Config *config, uint64_t max_seconds, bool take_sockets, EgressProxy *p, TfwError *e) {
        int outside[CAPSULE_EGRESS_STREAMS];
        _cleanup_close_ int null_fd = -EBADF;
        char path[PATH_MAX];
        bool in_use = false;
        int r;

        egress_proxy_init(p);
        for (size_t i = 0; i < ELEMENTSOF(outside); i++)
                outside[i] = -EBADF;
        if (!config->network.allow || config->network.n_allow > CONFIG_NETWORK_ALLOW_MAX)
                return tfw_error(e, EINVAL, "capsule_setup", "egress: no allowlist");
        r = capsule_find_helper(EGRESS_PROXY_NAME, "egress proxy", path, sizeof(path), e);
        if (r < 0)
                return r;
        null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
                return tfw_error(e, errno, "capsule_setup", "egress: /dev/null: %m");
        for (size_t i = 0; i < CAPSULE_EGRESS_STREAMS; i++) {
                int sp[2];
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
                        r = tfw_error(e, errno, "capsule_setup", "egress: cannot make the capsule's streams: %m");
                        goto out;
                }
                /* gVisor reads a host socket in chunks as large as the send buffers of both ends
                 * allow: with the defaults (208 KiB) a 100 MB download took 1.5 s inside, with
                 * these 0.06 s (measured with runsc 0.0~20240729; capped by net.core.wmem_max). */
                for (int k = 0; k < 2; k++)
                        (void) setsockopt(sp[k], SOL_SOCKET, SO_SNDBUF, &(int) { EGRESS_STREAM_SNDBUF }, sizeof(int));
                outside[i] = sp[0];
                p->inside[i] = sp[1];
        }
        for (int attempt = 1;; attempt++) {
                r = proxy_spawn(p, path, config, max_seconds, take_sockets, null_fd, outside, &in_use, e);
                if (r >= 0 || !in_use)
                        break;
                if (attempt == EGRESS_START_TRIES) {
                        tfw_error_prefix(e, "on each of %d ids in turn: ", EGRESS_START_TRIES);
                        break;
                }
        }
out:
        for (size_t i = 0; i < ELEMENTSOF(outside); i++)
                safe_close(outside[i]);
        if (r < 0)
                egress_proxy_kill(p);
        return r;
}

/* A connection to a listener of our own on 127.0.0.1 completes at once, unless a packet filter
 * drops even loopback (systemd's IPAddressDeny=any, a cgroup BPF program): then it does not
 * complete within EGRESS_LOOPBACK_MS. */
#define EGRESS_LOOPBACK_MS 1000
static int loopback_check(char *buf, size_t size) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(a);
        _cleanup_close_ int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        _cleanup_close_ int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (l < 0 || c < 0 || bind(l, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(l, 1) < 0 ||
            getsockname(l, (struct sockaddr *) &a, &len) < 0) {
                int r = -errno;
                snprintf(buf, size, "cannot listen on 127.0.0.1 for the check: %s", strerror(-r));
                return r;
        }
        if (connect(c, (struct sockaddr *) &a, sizeof(a)) < 0 && errno != EINPROGRESS) {
                int r = -errno;
                snprintf(buf, size, "a connection to 127.0.0.1 failed (%s): an IPAddressDeny=?", strerror(-r));
                return r;
        }
        struct pollfd p = { .fd = c, .events = POLLOUT };
        int err = 0;
        socklen_t elen = sizeof(err);
        if (poll(&p, 1, EGRESS_LOOPBACK_MS) <= 0 || getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err) {
                snprintf(buf, size, "a connection to 127.0.0.1 did not complete within %d ms (%s): packets are "
                         "dropped, an IPAddressDeny=?", EGRESS_LOOPBACK_MS, err ? strerror(err) : "no answer");
                return err ? -err : -ETIMEDOUT;
        }
        return 0;
}

int egress_host_route_check(char *buf, size_t size) {
        struct ifaddrs *ifa = NULL;
        bool up = false;
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                int r = -errno;
                snprintf(buf, size, "this process may not open an IP socket (%s): a RestrictAddressFamilies= without "
                         "AF_INET and AF_INET6?", strerror(-r));
                return r;
        }
        close(fd);
        if (getifaddrs(&ifa) < 0) {
                int r = -errno;
                snprintf(buf, size, "cannot list the network interfaces (%s): a RestrictAddressFamilies= without "
                         "AF_NETLINK?", strerror(-r));
                return r;
        }
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
                if (i->ifa_addr && (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6) &&
                    (i->ifa_flags & IFF_UP) && !(i->ifa_flags & IFF_LOOPBACK))
                        up = true;
        freeifaddrs(ifa);
        if (!up) {
                snprintf(buf, size, "no network interface but loopback is up here: a PrivateNetwork=yes?");
                return -ENETUNREACH;
        }
        return loopback_check(buf, size);
}

/* ---- its records ---------------------------------------------------------------------------- */

static bool word_in(const char *w, const char *const *list) {
        for (; *list; list++)
                if (streq(w, *list))
                        return true;
        return false;
}

static bool printable(const char *s, size_t max) {
        size_t n = strlen(s);
        if (n > max)
                return false;
        for (size_t i = 0; i < n; i++)
                if (s[i] < 0x20 || s[i] > 0x7e)
                        return false;
        return true;
}

static bool count_ok(json_t *v) {
        return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= (INT64_C(1) << 53);
}

/* Security contract: see egress.h. A hostile proxy (one the job took over) can write any bytes
 * here; nothing of a line reaches a result, an audit line or a log unless it is one of the
 * shapes below. */
int egress_record_parse(const char *line, size_t len, json_t **ret) {
        static const char *const keys[] = { "kind", "host", "port", "address", "verdict", "reason",
                                            "detail", "bytes_up", "bytes_down", "duration_ms", NULL };
        char host[EGRESS_NAME_MAX + 1];
        uint8_t addr[16];

        if (len == 0 || len >= EGRESS_RECORD_MAX || memchr(line, 0, len))
                return -EBADMSG;
        _cleanup_json_ json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        if (!o || !json_is_object(o) || json_object_size(o) != ELEMENTSOF(keys) - 1)
                return -EBADMSG;
        for (const char *const *k = keys; *k; k++)
                if (!json_object_get(o, *k))
                        return -EBADMSG;
        json_t *kind = json_object_get(o, "kind"), *h = json_object_get(o, "host"), *port = json_object_get(o, "port"),
               *ad = json_object_get(o, "address"), *verdict = json_object_get(o, "verdict"),
               *reason = json_object_get(o, "reason"), *detail = json_object_get(o, "detail");
        if (!(json_is_null(kind) || (json_is_string(kind) && (streq(json_string_value(kind), "connect") ||
                                                              streq(json_string_value(kind), "forward")))))
                return -EBADMSG;
        /* A name or an IPv4 literal (egress_host_parse lets both through), or an IPv6 literal. */
        if (!(json_is_null(h) ||
              (json_is_string(h) && json_string_length(h) <= EGRESS_NAME_MAX &&
               (egress_host_parse(json_string_value(h), json_string_length(h), host) ||
                inet_pton(AF_INET6, json_string_value(h), addr) == 1))))
                return -EBADMSG;
        if (!(json_is_null(port) || (json_is_integer(port) && json_integer_value(port) >= 1 &&
                                     json_integer_value(port) <= 65535)))
                return -EBADMSG;
        if (!(json_is_null(ad) || (json_is_string(ad) && (inet_pton(AF_INET, json_string_value(ad), addr) == 1 ||
                                                          inet_pton(AF_INET6, json_string_value(ad), addr) == 1))))
                return -EBADMSG;
        if (!json_is_string(verdict))
                return -EBADMSG;
        bool allowed = streq(json_string_value(verdict), "allowed");
        if (!allowed && !streq(json_string_value(verdict), "refused"))
                return -EBADMSG;
        if (json_is_null(reason) ? !allowed
                                 : !json_is_string(reason) ||
                                           !word_in(json_string_value(reason), allowed ? cut_words : refused_words))
                return -EBADMSG;
        if (!(json_is_null(detail) || (json_is_string(detail) && printable(json_string_value(detail), EGRESS_DETAIL_MAX))))
                return -EBADMSG;
        if (!count_ok(json_object_get(o, "bytes_up")) || !count_ok(json_object_get(o, "bytes_down")) ||
            !count_ok(json_object_get(o, "duration_ms")))
                return -EBADMSG;
        /* An allowed connection went somewhere: its target and address are known. */
        if (allowed && (json_is_null(kind) || json_is_null(h) || json_is_null(port) || json_is_null(ad)))
                return -EBADMSG;
        /* Remade from the checked values: the worker's own serialisation, nothing else of the line. */
        json_t *n = json_pack("{s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O, s:O}", "kind", kind, "host", h, "port", port,
                              "address", ad, "verdict", verdict, "reason", reason, "detail", detail, "bytes_up",
                              json_object_get(o, "bytes_up"), "bytes_down", json_object_get(o, "bytes_down"),
                              "duration_ms", json_object_get(o, "duration_ms"));
        if (!n)
                return -ENOMEM;
        *ret = n;
        return 0;
}

static void summary_error(EgressSummary *s, const char *fmt, ...) _printf_(2, 3);
static void summary_error(EgressSummary *s, const char *fmt, ...) {
        va_list ap;
        if (s->error)
                return;
        s->error = "egress_records";
        va_start(ap, fmt);
        vsnprintf(s->message, sizeof(s->message), fmt, ap);
        va_end(ap);
}

/* A checked record (egress_record_parse) as a "network" wall, when the proxy refused the
 * connection by the job's policy or cut it at one of the job's bounds; a connection that failed
 * upstream (no such name, no answer) or that the capsule's end stopped is no wall. host is a
 * name or IP literal, detail printable ASCII: both checked. */
static void record_wall(const json_t *rec, Walls *w) {
        const char *verdict = json_string_value(json_object_get(rec, "verdict"));
        const char *reason = json_string_value(json_object_get(rec, "reason"));
        const char *host = json_string_value(json_object_get(rec, "host"));
        const char *detail = json_string_value(json_object_get(rec, "detail"));
        json_int_t port = json_integer_value(json_object_get(rec, "port"));
        char to[300];

        if (!reason)
                return;
        if (host)
                snprintf(to, sizeof(to), "%s:%lld", host, (long long) port);
        else
                snprintf(to, sizeof(to), "an unreadable request");
        bool refused = streq(verdict, "refused");
        if (refused && streq(reason, "not_allowed"))
                walls_add(w, WALL_NETWORK, 1, "connect to %s (not in network.allow)", to);
        else if (refused && streq(reason, "address_refused"))
                walls_add(w, WALL_NETWORK, 1, "connect to %s (its address is refused: %s)", to, detail ?: "");
        else if (refused && streq(reason, "bad_request"))
                walls_add(w, WALL_NETWORK, 1, "a request the proxy refused (%s)", detail ?: "");
        else if (streq(reason, "upload_limit"))
                walls_add(w, WALL_NETWORK, 1, "connect to %s (%s at network.max_upload_bytes)", to,
                          refused ? "refused" : "cut");
        else if (streq(reason, "download_limit"))
                walls_add(w, WALL_NETWORK, 1, "connect to %s (%s at network.max_download_bytes)", to,
                          refused ? "refused" : "cut");
        else if (!refused && streq(reason, "time_limit"))
                walls_add(w, WALL_NETWORK, 1, "connect to %s (cut at the job's timeout)", to);
}

static void take_records(const char *buf, size_t len, int out_fd, EgressSummary *s) {
        for (size_t at = 0; at < len;) {
                const char *nl = memchr(buf + at, '\n', len - at);
                if (!nl) {
                        summary_error(s, "the proxy's last record was cut off");
                        return;
                }
                size_t n = (size_t) (nl - (buf + at));
                json_t *rec = NULL;
                if (s->connections >= CAPSULE_EGRESS_STREAMS || egress_record_parse(buf + at, n, &rec) < 0) {
                        summary_error(s, "the proxy wrote an invalid record (record %u): the rest is not read",
                                      s->connections + 1);
                        return;
                }
                s->connections++;
                if (streq(json_string_value(json_object_get(rec, "verdict")), "allowed"))
                        s->allowed++;
                else
                        s->refused++;
                s->bytes_up += (uint64_t) json_integer_value(json_object_get(rec, "bytes_up"));
                s->bytes_down += (uint64_t) json_integer_value(json_object_get(rec, "bytes_down"));
                record_wall(rec, &s->walls);
                if (out_fd >= 0) {
                        _cleanup_free_ char *text = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
                        if (!text || write_all(out_fd, text, strlen(text)) < 0 || write_all(out_fd, "\n", 1) < 0)
                                summary_error(s, "cannot keep the records: %s", text ? strerror(errno) : "out of memory");
                }
                json_decref(rec);
                at += n + 1;
        }
}

/* What is in the pipe now, up to RECORDS_MAX + 1 bytes: its write end died with the proxy, and
 * a copy something else may still hold (a child forked meanwhile) is not waited for. */
static int read_records(int fd, char *buf, size_t *ret_len) {
        size_t n = 0;
        (void) fcntl(fd, F_SETFL, O_NONBLOCK);
        while (n <= RECORDS_MAX) {
                ssize_t k = read(fd, buf + n, RECORDS_MAX + 1 - n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno != EAGAIN)
                        return -errno;
                if (k <= 0)
                        break;
                n += (size_t) k;
        }
        *ret_len = n;
        return n > RECORDS_MAX ? -E2BIG : 0;
}

void egress_proxy_finish(EgressProxy *p, int out_fd, EgressSummary *ret) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int st = 0;
        bool reaped = true;

        if (p->pid <= 0 && p->records < 0)
                return;
        ret->enabled = true;
        egress_proxy_close_inside(p);
        if (p->pid > 0) {
                /* The capsule is gone, but an upstream may keep a connection open (a long poll,
                 * a server that holds half-closed connections): SIGTERM cuts every connection
                 * still open, each writing its record ("stopped"), so none goes unrecorded. Only
                 * one stuck in the resolver, which has sent nothing, can miss the bound. */
                (void) kill(p->pid, SIGTERM);
                int w = waitpid_bounded(p->pid, EGRESS_END_USEC, &st);
                if (w == -ETIMEDOUT)
                        summary_error(ret, "the proxy did not end within %d s of the capsule and was killed",
                                      (int) (EGRESS_END_USEC / USEC_PER_SEC));
                else if (w < 0)
                        summary_error(ret, "the proxy (pid %d) did not end within %d s of the capsule nor of "
                                      "SIGKILL: %s", (int) p->pid, (int) (EGRESS_END_USEC / USEC_PER_SEC), strerror(-w));
                else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                        summary_error(ret, "the proxy ended %s %d: its records may not be whole",
                                      WIFSIGNALED(st) ? "by signal" : "with status",
                                      WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
                p->pid = 0;
                if (w != 0 && w != -ETIMEDOUT)
                        reaped = false;
        }
        /* Reaped: nothing runs as its id any more. One left alive keeps it locked for good. */
        if (reaped)
                egress_id_release(&p->id);
        else
                egress_id_abandon(&p->id);
        buf = malloc(RECORDS_MAX + 1);
        int r = buf ? read_records(p->records, buf, &len) : -ENOMEM;
        if (r == -E2BIG)
                summary_error(ret, "the proxy wrote more than its %d records", CAPSULE_EGRESS_STREAMS);
        else if (r < 0)
                summary_error(ret, "cannot read the proxy's records: %s", strerror(-r));
        if (r >= 0)
                take_records(buf, len, out_fd, ret);
        p->records = safe_close(p->records);
}

json_t *egress_result_json(const Config *config, const EgressSummary *s, int records_fd) {
        _cleanup_json_ json_t *conns = json_array(), *allow = json_array();
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;

        if (!conns || !allow)
                return NULL;
        for (size_t i = 0; i < config->network.n_allow; i++)
                if (json_array_append_new(allow, json_string(config->network.allow[i])) < 0)
                        return NULL;
        /* Written by egress_proxy_finish: our own serialisation of checked records. */
        if (records_fd >= 0 && lseek(records_fd, 0, SEEK_SET) == 0 &&
            read_full_fd_bounded(records_fd, (size_t) CAPSULE_EGRESS_STREAMS * 2 * EGRESS_RECORD_MAX, &buf, &len) >= 0)
                for (char *line = buf, *nl; line < buf + len && (nl = memchr(line, '\n', (size_t) (buf + len - line)));
                     line = nl + 1) {
                        json_t *rec = json_loadb(line, (size_t) (nl - line), 0, NULL);
                        if (rec && json_array_append_new(conns, rec) < 0)
                                return NULL;
                }
        return json_pack("{s:O, s:I, s:I, s:I, s:O, s:I, s:I, s:I, s:I, s:s?}", "allow", allow, "max_upload_bytes",
                         (json_int_t) config->network.max_upload_bytes, "max_download_bytes",
                         (json_int_t) config->network.max_download_bytes, "max_connections",
                         (json_int_t) CAPSULE_EGRESS_STREAMS, "connections", conns, "allowed", (json_int_t) s->allowed,
                         "refused", (json_int_t) s->refused, "bytes_up", (json_int_t) s->bytes_up, "bytes_down",
                         (json_int_t) s->bytes_down, "error", s->error ? s->message : NULL);
}
