/* SPDX-License-Identifier: MIT */
/* tentaflake-egress-proxy (capsule/egress-wire.h), the only route from a capsule to any
 * network. main() parses the command line strictly, checks the fds it was given, collects the
 * host's own addresses, drops to --uid/--gid (ids of its own, capsule/egress-id.h), checks that
 * no process it can see shares them and hardens the process, all before it reads a byte from a
 * stream; then the main thread waits on every unused stream and hands each one, at its first
 * byte, to a connection thread of its own (conn.c). Also here: the records writer.
 * The proxy never execs, never logs (stderr is /dev/null) and opens nothing after start-up but
 * what getaddrinfo reads and the sockets of its connections. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <malloc.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/egress-wire.h"
#include "capsule/protocol.h"
#include "egress-proxy/proxy-internal.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "common/time-util.h"
#include "parser/config.h"
#include "parser/egress-allow.h"
#include "parser/egress-request.h"

#define EXIT_USAGE 2
#define ERROR_MAX 512
/* --allow entries: the configuration allows far fewer (CONFIG_NETWORK_ALLOW_MAX). */
#define PROXY_ALLOW_MAX 1024
/* Seconds of any bound: generous, but far from overflowing microseconds. */
#define PROXY_SECONDS_MAX (UINT64_C(1) << 31)

/* ---- the records writer ---------------------------------------------------------------------- */

void proxy_printable(char *dst, size_t size, const char *src) {
        size_t i = 0;

        if (size == 0)
                return;
        for (; src && src[i] && i + 1 < size; i++) {
                unsigned char ch = (unsigned char) src[i];
                dst[i] = ch >= 0x20 && ch < 0x7f ? (char) ch : '?';
        }
        dst[i] = 0;
}

/* One line, whole, with one write under the lock: lines of concurrent connections never mix.
 * -E2BIG when j does not fit EGRESS_RECORD_MAX. */
static int write_json_line(Proxy *p, json_t *j) {
        char line[EGRESS_RECORD_MAX];

        if (!j)
                return -ENOMEM;
        size_t n = json_dumpb(j, line, sizeof line - 1, JSON_COMPACT);
        if (n == 0)
                return -ENOMEM;
        if (n > sizeof line - 1)
                return -E2BIG;
        line[n++] = '\n';
        if (p->records_fd < 0)
                return -EBADF;
        pthread_mutex_lock(&p->records_lock);
        int r = write_all(p->records_fd, line, n);
        pthread_mutex_unlock(&p->records_lock);
        return r;
}

static json_t *record_json(const ProxyRecord *r, const char *host, const char *detail) {
        return json_pack("{s:s?, s:s?, s:o, s:s?, s:s, s:s?, s:s?, s:I, s:I, s:I}",
                         "kind", r->kind,
                         "host", r->host ? host : NULL,
                         "port", r->port >= 0 ? json_integer(r->port) : json_null(),
                         "address", r->address,
                         "verdict", r->allowed ? "allowed" : "refused",
                         "reason", r->reason,
                         "detail", r->detail ? detail : NULL,
                         "bytes_up", (json_int_t) MIN(r->bytes_up, (uint64_t) INT64_MAX),
                         "bytes_down", (json_int_t) MIN(r->bytes_down, (uint64_t) INT64_MAX),
                         "duration_ms", (json_int_t) MIN(r->duration_ms, (uint64_t) INT64_MAX));
}

int proxy_write_record(Proxy *p, const ProxyRecord *r) {
        char host[EGRESS_HOST_MAX + 1], detail[EGRESS_DETAIL_MAX + 1], address[64];
        ProxyRecord rec = *r;

        proxy_printable(host, sizeof host, r->host);
        proxy_printable(detail, sizeof detail, r->detail);
        if (r->address) {
                proxy_printable(address, sizeof address, r->address);
                rec.address = address;
        }
        /* Too long (escapes can double the detail): the detail gives way first, then the host. */
        for (;;) {
                _cleanup_(json_decrefp) json_t *j = record_json(&rec, host, detail);
                int q = write_json_line(p, j);
                if (q != -E2BIG)
                        return q;
                size_t dl = strlen(detail);
                if (rec.detail && dl > 0)
                        detail[dl > 64 ? dl - 64 : 0] = 0;
                else if (rec.host)
                        rec.host = NULL;
                else
                        return q;
        }
}

/* {"error":TEXT}, when the records fd is usable. */
static int fail(Proxy *p, int status, const char *text) {
        char t[ERROR_MAX];
        proxy_printable(t, sizeof t, text);
        _cleanup_(json_decrefp) json_t *j = json_pack("{s:s}", "error", t);
        (void) write_json_line(p, j);
        return status;
}

/* ---- the command line -------------------------------------------------------------------------- */

typedef enum Option {
        OPT_UID,
        OPT_GID,
        OPT_RECORDS_FD,
        OPT_STREAMS,
        OPT_MAX_UPLOAD,
        OPT_MAX_DOWNLOAD,
        OPT_IDLE_SECONDS,
        OPT_MAX_SECONDS,
        OPT_HEAD_SECONDS,
        OPT_STREAM_CARRIES,
        OPT_ALLOW,
        _OPT_MAX,
} Option;

static const struct {
        const char *name;
        bool required;
} options[_OPT_MAX] = {
        [OPT_UID] = { "--uid", true },
        [OPT_GID] = { "--gid", true },
        [OPT_RECORDS_FD] = { "--records-fd", true },
        [OPT_STREAMS] = { "--streams", true },
        [OPT_MAX_UPLOAD] = { "--max-upload", true },
        [OPT_MAX_DOWNLOAD] = { "--max-download", true },
        [OPT_IDLE_SECONDS] = { "--idle-seconds", true },
        [OPT_MAX_SECONDS] = { "--max-seconds", true },
        [OPT_HEAD_SECONDS] = { "--head-seconds", false },
        [OPT_STREAM_CARRIES] = { "--stream-carries", false },
        [OPT_ALLOW] = { "--allow", false },
};

/* Decimal digits only: no sign, no space, no leading zero (but "0" itself), at most max. */
static int parse_u64(const char *s, uint64_t max, uint64_t *ret) {
        uint64_t v = 0;

        if (!s[0] || (s[0] == '0' && s[1]))
                return -EINVAL;
        for (const char *c = s; *c; c++) {
                if (*c < '0' || *c > '9')
                        return -EINVAL;
                unsigned d = (unsigned) (*c - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        if (v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

/* A value as it may appear in a message: printable and short. */
static const char *shown(const char *s, char buf[static 72]) {
        proxy_printable(buf, 68, s);
        if (strlen(s) > 67)
                strcpy(buf + 64, "...");
        return buf;
}

static int parse_streams(Proxy *p, const char *v) {
        char first[16];
        const char *colon = strchr(v, ':');
        uint64_t f, n;

        if (!colon || (size_t) (colon - v) >= sizeof first)
                return -EINVAL;
        memcpy(first, v, (size_t) (colon - v));
        first[colon - v] = 0;
        if (parse_u64(first, INT_MAX - CAPSULE_EGRESS_STREAMS, &f) < 0 || f < 3 ||
            parse_u64(colon + 1, CAPSULE_EGRESS_STREAMS, &n) < 0 || n < 1)
                return -EINVAL;
        p->first_stream = (int) f;
        p->n_streams = (unsigned) n;
        return 0;
}

static int parse_allow(Proxy *p, const char *v, char *err) {
        char b[72];
        const char *why = NULL;

        if (p->n_allow >= PROXY_ALLOW_MAX) {
                snprintf(err, ERROR_MAX, "--allow: more than %d entries", PROXY_ALLOW_MAX);
                return -E2BIG;
        }
        if (egress_allow_parse(v, &p->allow[p->n_allow], &why) < 0) {
                snprintf(err, ERROR_MAX, "--allow '%s': %s", shown(v, b), why ? why : "not a network.allow entry");
                return -EINVAL;
        }
        p->n_allow++;
        return 0;
}

static int parse_value(Proxy *p, Option o, const char *v, char *err) {
        uint64_t u = 0;
        int r = 0;
        char b[72];

        switch (o) {
        case OPT_UID:
        case OPT_GID:
                r = parse_u64(v, UINT32_MAX - 1, &u);
                if (r >= 0 && u == 0) {
                        snprintf(err, ERROR_MAX, "%s: 0 (root) is refused", options[o].name);
                        return -EPERM;
                }
                if (o == OPT_UID)
                        p->uid = (uid_t) u;
                else
                        p->gid = (gid_t) u;
                break;
        case OPT_RECORDS_FD:
                r = parse_u64(v, INT_MAX, &u);
                break;   /* taken by find_records_fd() */
        case OPT_STREAMS:
                r = parse_streams(p, v);
                if (r < 0) {
                        snprintf(err, ERROR_MAX, "--streams '%s': want FIRST:COUNT, FIRST >= 3, COUNT 1..%d",
                                 shown(v, b), CAPSULE_EGRESS_STREAMS);
                        return r;
                }
                break;
        case OPT_MAX_UPLOAD:
        case OPT_MAX_DOWNLOAD:
                r = parse_u64(v, INT64_MAX, &u);
                *(o == OPT_MAX_UPLOAD ? &p->max_upload : &p->max_download) = u;
                break;
        case OPT_IDLE_SECONDS:
        case OPT_MAX_SECONDS:
        case OPT_HEAD_SECONDS:
                r = parse_u64(v, PROXY_SECONDS_MAX, &u);
                if (r >= 0 && u == 0)
                        r = -ERANGE;
                *(o == OPT_IDLE_SECONDS ? &p->idle_usec : o == OPT_MAX_SECONDS ? &p->max_usec : &p->head_usec) =
                        u * USEC_PER_SEC;
                break;
        case OPT_STREAM_CARRIES:
                if (!streq(v, "bytes") && !streq(v, "socket")) {
                        snprintf(err, ERROR_MAX, "--stream-carries '%s': want bytes or socket", shown(v, b));
                        return -EINVAL;
                }
                p->take_sockets = streq(v, "socket");
                break;
        case OPT_ALLOW:
                return parse_allow(p, v, err);
        default:
                return -EINVAL;
        }
        if (r < 0)
                snprintf(err, ERROR_MAX, "%s '%s': not a decimal number in range", options[o].name, shown(v, b));
        return r;
}

/* Every flag is "--name VALUE"; each but --allow at most once; the required ones present. */
static int parse_args(int argc, char **argv, Proxy *p, char *err) {
        bool seen[_OPT_MAX] = {};
        char b[72];

        p->head_usec = EGRESS_HEAD_SECONDS * USEC_PER_SEC;
        for (int i = 1; i < argc; i += 2) {
                Option o = _OPT_MAX;
                for (Option k = 0; k < _OPT_MAX; k++)
                        if (streq(argv[i], options[k].name))
                                o = k;
                if (o == _OPT_MAX) {
                        snprintf(err, ERROR_MAX, "unknown argument '%s'", shown(argv[i], b));
                        return -EINVAL;
                }
                if (i + 1 >= argc) {
                        snprintf(err, ERROR_MAX, "%s: a value is required", options[o].name);
                        return -EINVAL;
                }
                if (seen[o] && o != OPT_ALLOW) {
                        snprintf(err, ERROR_MAX, "%s: given twice", options[o].name);
                        return -EINVAL;
                }
                seen[o] = true;
                int r = parse_value(p, o, argv[i + 1], err);
                if (r < 0)
                        return r;
        }
        for (Option k = 0; k < _OPT_MAX; k++)
                if (options[k].required && !seen[k]) {
                        snprintf(err, ERROR_MAX, "%s: required", options[k].name);
                        return -EINVAL;
                }
        return 0;
}

/* The records fd before anything else, so that every later refusal can be written there: the
 * first well-formed --records-fd naming an fd open for writing, else -1. */
static int find_records_fd(int argc, char **argv) {
        for (int i = 1; i + 1 < argc; i++) {
                uint64_t fd;
                if (!streq(argv[i], "--records-fd"))
                        continue;
                if (parse_u64(argv[i + 1], INT_MAX, &fd) < 0)
                        return -1;
                int fl = fcntl((int) fd, F_GETFL);
                if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
                        return -1;
                return (int) fd;
        }
        return -1;
}

/* ---- start-up --------------------------------------------------------------------------------- */

/* The records fd and every stream fd open (the streams connected stream sockets, none of them
 * the records fd), all close-on-exec; every other fd above stdio closed, so nothing the worker
 * may have leaked is held by a process that reads hostile bytes. */
static int check_fds(Proxy *p, char *err) {
        _cleanup_free_ int *keep = calloc(p->n_streams + 1, sizeof(int));

        if (!keep) {
                snprintf(err, ERROR_MAX, "out of memory");
                return -ENOMEM;
        }
        if (p->records_fd < 0) {
                snprintf(err, ERROR_MAX, "--records-fd: not an fd open for writing");
                return -EBADF;
        }
        for (unsigned i = 0; i < p->n_streams; i++) {
                int fd = p->first_stream + (int) i, type = 0;
                socklen_t len = sizeof type;
                struct stat st;
                if (fd == p->records_fd) {
                        snprintf(err, ERROR_MAX, "--streams: fd %d is the --records-fd", fd);
                        return -EINVAL;
                }
                if (fstat(fd, &st) < 0) {
                        snprintf(err, ERROR_MAX, "--streams: fd %d is not open", fd);
                        return -EBADF;
                }
                if (!S_ISSOCK(st.st_mode) || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 ||
                    type != SOCK_STREAM) {
                        snprintf(err, ERROR_MAX, "--streams: fd %d is not a stream socket", fd);
                        return -ENOTSOCK;
                }
                (void) fcntl(fd, F_SETFD, FD_CLOEXEC);
                keep[i] = fd;
        }
        (void) fcntl(p->records_fd, F_SETFD, FD_CLOEXEC);
        keep[p->n_streams] = p->records_fd;
        int r = close_all_fds_except(3, keep, p->n_streams + 1);
        if (r < 0)
                snprintf(err, ERROR_MAX, "closing the other fds: %s", strerrordesc_np(-r));
        return r;
}

/* The host's own addresses, for the address check (conn.c): a listed name must not lead to the
 * host itself through an address of the public class. */
static int collect_own_addresses(Proxy *p, char *err) {
        struct ifaddrs *ifs = NULL;

        if (getifaddrs(&ifs) < 0) {
                snprintf(err, ERROR_MAX, "getifaddrs: %s", strerrordesc_np(errno));
                return -errno;
        }
        for (struct ifaddrs *i = ifs; i && p->n_own < PROXY_OWN_ADDRESSES_MAX; i = i->ifa_next) {
                ProxyAddress *a = &p->own[p->n_own];
                if (!i->ifa_addr)
                        continue;
                if (i->ifa_addr->sa_family == AF_INET)
                        memcpy(a->addr, &((struct sockaddr_in *) (void *) i->ifa_addr)->sin_addr, 4);
                else if (i->ifa_addr->sa_family == AF_INET6)
                        memcpy(a->addr, &((struct sockaddr_in6 *) (void *) i->ifa_addr)->sin6_addr, 16);
                else
                        continue;
                a->family = i->ifa_addr->sa_family;
                p->n_own++;
        }
        freeifaddrs(ifs);
        return 0;
}

/* The privilege drop. Contract: on success the process runs as uid:gid, real, effective and
 * saved alike, with no supplementary group, and can no longer become root (setresuid(0, 0, 0)
 * is verified to fail); 1 when it dropped, 0 when it had nothing to drop. uid or gid 0 never
 * gets here (parse_value). Started as root it takes only ids of the proxies' own range
 * (parser/config.h), so that no worker can make it share nobody's uid with a notify hook or the
 * artifact parser. Not started as root (the unit tests), it changes nothing and accepts only a
 * uid:gid equal to its own ids. */
static int drop_privileges(const Proxy *p, char *err) {
        uid_t ru = 0, eu = 0, su = 0;
        gid_t rg = 0, eg = 0, sg = 0;
        bool root = geteuid() == 0;

        if (root && (!config_id_is_egress(p->uid) || !config_id_is_egress(p->gid))) {
                snprintf(err, ERROR_MAX, "--uid/--gid %u:%u: not in %" PRIu32 "..%" PRIu32 ", the egress proxies' own "
                         "ids (a proxy shares its ids with no other process)", (unsigned) p->uid, (unsigned) p->gid,
                         CONFIG_EGRESS_ID_FIRST, CONFIG_EGRESS_ID_LAST);
                return -EPERM;
        }
        if (root) {
                if (setgroups(0, NULL) < 0 || setresgid(p->gid, p->gid, p->gid) < 0 ||
                    setresuid(p->uid, p->uid, p->uid) < 0) {
                        snprintf(err, ERROR_MAX, "--uid/--gid: cannot become %u:%u: %s", (unsigned) p->uid,
                                 (unsigned) p->gid, strerrordesc_np(errno));
                        return -errno;
                }
                if (getgroups(0, NULL) != 0 || setresuid(0, 0, 0) == 0) {
                        snprintf(err, ERROR_MAX, "--uid/--gid: the privilege drop did not hold");
                        return -EPERM;
                }
        }
        if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 || ru != p->uid || eu != p->uid ||
            su != p->uid || rg != p->gid || eg != p->gid || sg != p->gid) {
                snprintf(err, ERROR_MAX, "--uid/--gid: running unprivileged as %u:%u, cannot become %u:%u",
                         (unsigned) eu, (unsigned) eg, (unsigned) p->uid, (unsigned) p->gid);
                return -EPERM;
        }
        return root;
}

/* After the drop. Contract: 0 when no process this one can see in /proc, but itself, has its uid
 * as its effective uid or its gid as its effective gid and is dumpable, which is what the owner
 * of /proc/PID says (a process that is not dumpable shows root); -EBUSY naming the first that
 * has (the worker then starts a proxy on another id); another negative errno when /proc cannot
 * be listed. Those are all the processes whose /proc/PID/environ, maps or fds these ids could
 * read: the kernel lets only a reader whose ids equal all of the target's (real, effective and
 * saved), and only a dumpable target, without CAP_SYS_PTRACE. What it sees is what it may read:
 * with hidepid (the units' ProtectProc=invisible) /proc lists no other. One stat per process
 * (reading each /proc/PID/status took 70 to 140 ms for 200 processes on a loaded host, the
 * stats 1 to 11 ms). A process that ends while it is looked at is passed over. The worker's
 * lock keeps every other proxy off the id (capsule/egress-id.h); this finds anything else. */
static int check_alone(const Proxy *p, char *err) {
        _cleanup_closedir_ DIR *d = opendir("/proc");
        pid_t self = getpid();
        struct dirent *de;

        if (!d) {
                snprintf(err, ERROR_MAX, "cannot list /proc to check its ids are its own: %s", strerrordesc_np(errno));
                return -errno;
        }
        while ((errno = 0, de = readdir(d))) {
                char comm[64] = "", path[96];
                struct stat st;
                uint64_t pid;
                if (parse_u64(de->d_name, INT_MAX, &pid) < 0 || (pid_t) pid == self)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, 0) < 0 || (st.st_uid != p->uid && st.st_gid != p->gid))
                        continue;   /* gone, or not its ids */
                snprintf(path, sizeof path, "%.20s/comm", de->d_name);
                _cleanup_close_ int fd = openat(dirfd(d), path, O_RDONLY | O_CLOEXEC);
                ssize_t n = fd < 0 ? -1 : read(fd, comm, sizeof comm - 1);
                comm[n > 0 ? n : 0] = 0;
                comm[strcspn(comm, "\n")] = 0;
                proxy_printable(comm, sizeof comm, comm);
                bool uid = st.st_uid == p->uid;
                snprintf(err, ERROR_MAX, "--%s %u: process %" PRIu64 " (%s) has it too: a proxy's ids must be its "
                         "alone, or it could read that process's /proc/PID/environ", uid ? "uid" : "gid",
                         uid ? (unsigned) p->uid : (unsigned) p->gid, pid, comm[0] ? comm : "?");
                return -EBUSY;
        }
        if (errno) {
                snprintf(err, ERROR_MAX, "cannot list /proc to check its ids are its own: %s", strerrordesc_np(errno));
                return -errno;
        }
        return 0;
}

/* After the drop: no way back up through exec (there is none anyway), no core or ptrace by
 * another process of its uid, a bound on fds, death with the worker. */
/* The system calls the proxy never makes, refused (EPERM) for the rest of its life: a flaw in it
 * would run with the host's network, as ids no other process has while it runs (check_alone),
 * and this holds even where they would be. Contract: after this no process can be signalled
 * but the proxy's own threads (kill, tkill, sigqueue refused,
 * tgkill only to its own pid), traced or read (ptrace, process_vm_*, pidfd_*), run (execve) or
 * made (clone only with CLONE_THREAD; clone3 reports ENOSYS so glibc's pthread_create falls
 * back to clone; fork and vfork refused); no socket of any family but AF_UNIX (the resolver's
 * nscd), AF_INET, AF_INET6 and AF_NETLINK (its interface list); no namespace, mount, keyring or
 * BPF. Not under AddressSanitizer, whose leak checker stops the process with ptrace. */
/* A comparison on the first argument, every field spelt out (libseccomp's SCMP_A0 leaves one to
 * the compiler, which clang's -Wmissing-field-initializers refuses). */
#define ARG0(o, a, b) ((struct scmp_arg_cmp) { .arg = 0, .op = (o), .datum_a = (a), .datum_b = (b) })

static int confine(char *err) {
#ifdef PROXY_UNDER_ASAN
        (void) err;
        return 0;
#else
        static const int refused[] = {
                SCMP_SYS(kill), SCMP_SYS(tkill), SCMP_SYS(rt_sigqueueinfo), SCMP_SYS(rt_tgsigqueueinfo),
                SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv), SCMP_SYS(process_vm_writev), SCMP_SYS(pidfd_open),
                SCMP_SYS(pidfd_send_signal), SCMP_SYS(pidfd_getfd), SCMP_SYS(execve), SCMP_SYS(execveat),
                SCMP_SYS(fork), SCMP_SYS(vfork), SCMP_SYS(unshare), SCMP_SYS(setns), SCMP_SYS(mount),
                SCMP_SYS(umount2), SCMP_SYS(pivot_root), SCMP_SYS(chroot), SCMP_SYS(bpf), SCMP_SYS(perf_event_open),
                SCMP_SYS(keyctl), SCMP_SYS(add_key), SCMP_SYS(request_key), SCMP_SYS(userfaultfd),
                SCMP_SYS(personality), SCMP_SYS(open_by_handle_at),
        };
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        int r = ctx ? 0 : -ENOMEM;
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(refused); i++)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), refused[i], 0);
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(tgkill), 1,
                                     ARG0(SCMP_CMP_NE, (scmp_datum_t) getpid(), 0));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                     ARG0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        /* Every family number but the four, one rule each (a rule compares an argument once). */
        for (int fam = 0; r >= 0 && fam <= AF_NETLINK; fam++)
                if (fam != AF_UNIX && fam != AF_INET && fam != AF_INET6 && fam != AF_NETLINK)
                        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                             ARG0(SCMP_CMP_EQ, (scmp_datum_t) fam, 0));
        if (r >= 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                     ARG0(SCMP_CMP_GT, (scmp_datum_t) AF_NETLINK, 0));
        if (r >= 0)
                r = seccomp_load(ctx);
        if (ctx)
                seccomp_release(ctx);
        if (r < 0)
                snprintf(err, ERROR_MAX, "cannot load its seccomp filter: %s", strerrordesc_np(-r));
        return r;
#endif
}

static int harden(const Proxy *p, pid_t ppid, char *err) {
        struct rlimit core = { 0, 0 }, nofile;
        /* A connection's stream, upstream and download pipe, and with --stream-carries socket
         * the job's own socket. */
        rlim_t want = 5 * (rlim_t) p->n_streams + 64;

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 ||
            setrlimit(RLIMIT_CORE, &core) < 0) {
                snprintf(err, ERROR_MAX, "prctl/setrlimit: %s", strerrordesc_np(errno));
                return -errno;
        }
        if (getrlimit(RLIMIT_NOFILE, &nofile) < 0)
                nofile.rlim_max = want;
        nofile.rlim_cur = nofile.rlim_max = MIN(want, nofile.rlim_max);
        if (setrlimit(RLIMIT_NOFILE, &nofile) < 0) {
                snprintf(err, ERROR_MAX, "setrlimit(RLIMIT_NOFILE): %s", strerrordesc_np(errno));
                return -errno;
        }
        /* The uid change cleared the parent-death signal: arm it again, and if the parent died
         * before that, nobody will ever read the records. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
                snprintf(err, ERROR_MAX, "prctl(PR_SET_PDEATHSIG): %s", strerrordesc_np(errno));
                return -errno;
        }
        if (getppid() != ppid)
                _exit(EXIT_FAILURE);
        (void) mallopt(M_ARENA_MAX, 2);
        if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
                snprintf(err, ERROR_MAX, "signal(SIGPIPE): %s", strerrordesc_np(errno));
                return -errno;
        }
        return 0;
}

/* ---- the stream dispatcher ------------------------------------------------------------------- */

typedef enum StreamState {
        STREAM_UNUSED,   /* polled by the main thread */
        STREAM_HANDED,   /* its connection thread owns the fd */
        STREAM_CLOSED,   /* ended before its first byte: no connection, no record */
} StreamState;

typedef struct Stream {
        Proxy *proxy;
        int fd;
        int done_fd;
        usec_t start;
        StreamState state;
        bool thread_started;
        pthread_t thread;
        ConnSocket sock;   /* its connection's socket (conn.c), shut down when the proxy stops */
} Stream;

static void *stream_thread(void *arg) {
        Stream *s = arg;
        conn_serve(s->proxy, s->fd, s->start, &s->sock);
        (void) eventfd_write(s->done_fd, 1);
        return NULL;
}

/* A connection thread on a small explicit stack with every signal blocked (the main thread
 * alone takes SIGTERM, through its signalfd). */
static int stream_start(Stream *s) {
        pthread_attr_t attr;
        sigset_t all, old;
        int r;

        r = pthread_attr_init(&attr);
        if (r != 0)
                return -r;
        r = pthread_attr_setstacksize(&attr, PROXY_THREAD_STACK);
        if (r == 0) {
                sigfillset(&all);
                (void) pthread_sigmask(SIG_SETMASK, &all, &old);
                r = pthread_create(&s->thread, &attr, stream_thread, s);
                (void) pthread_sigmask(SIG_SETMASK, &old, NULL);
        }
        (void) pthread_attr_destroy(&attr);
        if (r != 0)
                return -r;
        s->thread_started = true;
        return 0;
}

/* An unused stream's first event: its first byte starts a connection; an end (or error) before
 * any byte was never a connection and leaves no record. 1: handed on, -1: closed, 0: neither
 * yet. */
static int stream_event(Stream *s) {
        char b;
        ssize_t k = recv(s->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (k <= 0) {
                s->fd = safe_close(s->fd);
                s->state = STREAM_CLOSED;
                return -1;
        }
        s->start = now_monotonic();
        s->state = STREAM_HANDED;
        int r = stream_start(s);
        if (r < 0) {
                char detail[EGRESS_DETAIL_MAX];
                s->fd = safe_close(s->fd);
                snprintf(detail, sizeof detail, "the proxy could not start a thread: %s", strerrordesc_np(-r));
                ProxyRecord rec = { .port = -1, .reason = "connect_failed", .detail = detail };
                (void) proxy_write_record(s->proxy, &rec);
                return -1;
        }
        return 1;
}

/* SIGTERM: no new connection; every live one is cut (stopped) through the stop eventfd and
 * writes its record (one waiting inside a call on the job's socket woken by its shutdown);
 * unused streams are closed without one. */
static void stop_all(Proxy *p, Stream *streams, unsigned *n_unused) {
        (void) eventfd_write(p->stop_fd, 1);
        for (unsigned i = 0; i < p->n_streams; i++)
                if (streams[i].state == STREAM_HANDED)
                        conn_socket_shutdown(&streams[i].sock);
                else if (streams[i].state == STREAM_UNUSED) {
                        streams[i].fd = safe_close(streams[i].fd);
                        streams[i].state = STREAM_CLOSED;
                }
        *n_unused = 0;
}

static void join_all(Stream *streams, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                if (streams[i].thread_started)
                        (void) pthread_join(streams[i].thread, NULL);
}

/* Until every stream has ended or been handed on and every connection has written its record.
 * The main thread's poll has no timeout: it waits on the sandbox, which ends by itself; each
 * connection has its own deadlines, and the worker's SIGTERM or death (PR_SET_PDEATHSIG) ends
 * the wait. */
static int serve(Proxy *p, int signal_fd, int done_fd) {
        unsigned n = p->n_streams, n_unused = n, n_running = 0;
        _cleanup_free_ Stream *streams = calloc(n, sizeof(Stream));
        _cleanup_free_ struct pollfd *pfd = calloc(n + 2, sizeof(struct pollfd));
        int status = EXIT_SUCCESS;

        if (!streams || !pfd)
                return EXIT_FAILURE;
        for (unsigned i = 0; i < n; i++)
                streams[i] = (Stream) { .proxy = p, .fd = p->first_stream + (int) i, .done_fd = done_fd,
                                        .sock = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 } };
        while (n_unused > 0 || n_running > 0) {
                pfd[0] = (struct pollfd) { .fd = signal_fd, .events = POLLIN };
                pfd[1] = (struct pollfd) { .fd = done_fd, .events = POLLIN };
                /* No more at once than init relays (a backstop: init keeps the others waiting). */
                bool room = n_running < CAPSULE_EGRESS_LIVE_MAX;
                for (unsigned i = 0; i < n; i++)
                        pfd[2 + i] = (struct pollfd) {
                                .fd = room && streams[i].state == STREAM_UNUSED ? streams[i].fd : -1,
                                .events = POLLIN | POLLRDHUP,
                        };
                if (poll(pfd, n + 2, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        /* Cannot wait on the streams any more: end as on SIGTERM, but fail. */
                        stop_all(p, streams, &n_unused);
                        status = EXIT_FAILURE;
                        break;
                }
                if (pfd[0].revents) {
                        struct signalfd_siginfo si;
                        while (read(signal_fd, &si, sizeof si) > 0)
                                ;
                        stop_all(p, streams, &n_unused);
                }
                if (pfd[1].revents) {
                        eventfd_t v = 0;
                        if (eventfd_read(done_fd, &v) == 0)
                                n_running -= (unsigned) MIN(v, (eventfd_t) n_running);
                }
                for (unsigned i = 0; i < n; i++) {
                        if (!pfd[2 + i].revents || streams[i].state != STREAM_UNUSED)
                                continue;
                        int r = stream_event(&streams[i]);
                        if (r != 0)
                                n_unused--;
                        if (r > 0)
                                n_running++;
                }
        }
        join_all(streams, n);
        for (unsigned i = 0; i < n; i++)
                safe_close(streams[i].state == STREAM_UNUSED ? streams[i].fd : -EBADF);
        return status;
}

/* ---- main --------------------------------------------------------------------------------------- */

/* Signals, the stop and done eventfds: before the privilege drop, like every fd. */
static int setup_events(Proxy *p, int *ret_signal_fd, int *ret_done_fd, char *err) {
        sigset_t set;

        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) {
                snprintf(err, ERROR_MAX, "pthread_sigmask failed");
                return -EINVAL;
        }
        _cleanup_close_ int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        _cleanup_close_ int stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        _cleanup_close_ int done = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (sfd < 0 || stop < 0 || done < 0) {
                snprintf(err, ERROR_MAX, "signalfd/eventfd: %s", strerrordesc_np(errno));
                return -errno;
        }
        p->stop_fd = TAKE_FD(stop);
        *ret_signal_fd = TAKE_FD(sfd);
        *ret_done_fd = TAKE_FD(done);
        return 0;
}

static Proxy proxy = {
        .records_fd = -EBADF,
        .stop_fd = -EBADF,
        .records_lock = PTHREAD_MUTEX_INITIALIZER,
};

int main(int argc, char **argv) {
        pid_t ppid = getppid();
        Proxy *p = &proxy;
        char err[ERROR_MAX] = "";
        _cleanup_close_ int signal_fd = -EBADF, done_fd = -EBADF;
        _cleanup_free_ EgressAllow *allow = NULL;

        /* Until the drop, the parent's death kills the proxy as the worker's fork arranged. */
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        p->records_fd = find_records_fd(argc, argv);
        allow = calloc(PROXY_ALLOW_MAX, sizeof(EgressAllow));
        if (!allow)
                return fail(p, EXIT_FAILURE, "out of memory");
        p->allow = allow;
        if (parse_args(argc, argv, p, err) < 0 || check_fds(p, err) < 0)
                return fail(p, EXIT_USAGE, err);
        if (collect_own_addresses(p, err) < 0 || setup_events(p, &signal_fd, &done_fd, err) < 0)
                return fail(p, EXIT_FAILURE, err);
        int dropped = drop_privileges(p, err);
        if (dropped < 0)
                return fail(p, EXIT_FAILURE, err);
        int alone = dropped > 0 ? check_alone(p, err) : 0;
        if (alone < 0)
                return fail(p, alone == -EBUSY ? EGRESS_EXIT_ID_IN_USE : EXIT_FAILURE, err);
        if (harden(p, ppid, err) < 0 || confine(err) < 0)
                return fail(p, EXIT_FAILURE, err);
        atomic_store(&p->upload_left, p->max_upload);
        atomic_store(&p->download_left, p->max_download);

        _cleanup_(json_decrefp) json_t *ready = json_pack("{s:b}", "ready", 1);
        if (write_json_line(p, ready) < 0)
                return EXIT_FAILURE;
        int status = serve(p, signal_fd, done_fd);
        p->stop_fd = safe_close(p->stop_fd);
        return status;
}
