/* SPDX-License-Identifier: MIT */
/* Benchmark of the inbox plane end to end (issue 5), driven by tests/bench/orchestrator.sh
 * against a running daemon:
 *
 *   bench-orchestrator INBOX RESULTS BASE RUNS N
 *
 * 1. Latency: the rename of a /bin/true request into INBOX until RESULTS/<id>/ appears
 *    (inotify IN_MOVED_TO: the result directory is renamed in complete), against a bare
 *    `runsc run` of /bin/true with a minimal hand-written bundle; alternating, after one
 *    untimed warm-up of each; every sample, the medians and their ratio.
 * 2. Throughput: N such requests renamed in at once (the daemon runs `concurrency` 2) until
 *    the last result, against N bare runs two at a time.
 * N = 0 skips the throughput part. With BENCH_BARE_COPY=DIR and BENCH_BARE_TMPFS=MOUNTPOINT
 * (tests/bench/workspace.sh, issue 12) every bare run also pays for `cp -a DIR` into the tmpfs
 * (timed; the copy is removed untimed afterwards): what a user pays for a snapshot of the
 * workspace without the worker.
 * Needs root and runsc on PATH. BASE receives the bare bundle and its runsc root. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/time-util.h"
#include "parser/config.h"

static const char *inbox, *results, *base;
static char bundle[PATH_MAX], root[PATH_MAX];
static int ino = -1;
static unsigned seq;
/* The first letter of the request ids (BENCH_ID_PREFIX): a second run against the same results
 * uses other ids. */
static char idp = 'b';

static _noreturn_ void die(const char *what, int err) {
        fprintf(stderr, "bench-orchestrator: %s: %s\n", what, strerror(err));
        exit(1);
}

/* What the daemon's capsule has, by hand: read-only empty root, the default system mounts,
 * /bin/true as an unprivileged user, no capabilities, its own network namespace. */
static void write_bare_bundle(void) {
        static const char *const sys[] = { "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache",
                                           "/etc/alternatives", "/etc/ssl/certs" };
        char p[PATH_MAX + 32];
        FILE *f;

        snprintf(bundle, sizeof(bundle), "%s/bare", base);
        snprintf(root, sizeof(root), "%s/bare-root", base);
        snprintf(p, sizeof(p), "%s/rootfs", bundle);
        if (access(bundle, F_OK) == 0)
                return; /* a second run in the same BASE */
        if (mkdir(bundle, 0700) < 0 || mkdir(p, 0555) < 0 || mkdir(root, 0700) < 0)
                die("bare bundle", errno);
        snprintf(p, sizeof(p), "%s/config.json", bundle);
        f = fopen(p, "we");
        if (!f)
                die("bare config.json", errno);
        fprintf(f, "{\"ociVersion\":\"1.0.2\",\"process\":{\"user\":{\"uid\":12345,\"gid\":12345},"
                   "\"args\":[\"/bin/true\"],\"env\":[\"PATH=/usr/bin:/bin\"],\"cwd\":\"/\","
                   "\"capabilities\":{},\"noNewPrivileges\":true},"
                   "\"root\":{\"path\":\"rootfs\",\"readonly\":true},\"hostname\":\"bare\","
                   "\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"}");
        for (size_t i = 0; i < ELEMENTSOF(sys); i++)
                if (access(sys[i], F_OK) == 0)
                        fprintf(f, ",{\"destination\":\"%s\",\"type\":\"bind\",\"source\":\"%s\","
                                   "\"options\":[\"rbind\",\"ro\"]}", sys[i], sys[i]);
        fprintf(f, "],\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"ipc\"},"
                   "{\"type\":\"uts\"},{\"type\":\"mount\"},{\"type\":\"network\"}]}}\n");
        fclose(f);
}

static pid_t spawn_bare(unsigned i) {
        char id[64], rootflag[PATH_MAX + 16];
        snprintf(id, sizeof(id), "tfw-bench-bare-%u", i);
        snprintf(rootflag, sizeof(rootflag), "--root=%s", root);
        char logp[PATH_MAX];
        snprintf(logp, sizeof(logp), "%s/bare.log", base);
        pid_t pid = fork();
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR), log = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0600);
                dup2(null, 0);
                dup2(null, 1);
                dup2(log, 2);
                execlp("runsc", "runsc", rootflag, "--network=none", "--platform=" CONFIG_DEFAULT_PLATFORM, "run", "--bundle",
                       bundle, id, (char *) NULL);
                _exit(127);
        }
        if (pid < 0)
                die("fork", errno);
        return pid;
}

static _noreturn_ void bare_failed(int st) {
        char cmd[PATH_MAX + 32];
        fprintf(stderr, "bench-orchestrator: bare runsc run failed (wait status 0x%x); its stderr:\n", (unsigned) st);
        snprintf(cmd, sizeof(cmd), "tail -n 20 '%s/bare.log' >&2", base);
        if (system(cmd) != 0)
                fprintf(stderr, "(no log)\n");
        exit(1);
}

static void reap_bare(pid_t pid) {
        int st = 0;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                bare_failed(st);
}

static void run_cmd(const char *const *argv) {
        pid_t pid = fork();
        int st = 0;
        if (pid == 0) {
                execvp(argv[0], (char *const *) argv);
                _exit(127);
        }
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                fprintf(stderr, "bench-orchestrator: %s %s failed\n", argv[0], argv[1]);
                exit(1);
        }
}

static usec_t run_bare(unsigned i) {
        const char *copy = getenv("BENCH_BARE_COPY"), *tmpfs = getenv("BENCH_BARE_TMPFS");
        char dst[PATH_MAX];
        usec_t t0 = now_monotonic();
        if (copy && tmpfs) {
                snprintf(dst, sizeof(dst), "%s/ws", tmpfs);
                run_cmd((const char *const[]) { "cp", "-a", copy, dst, NULL });
        }
        reap_bare(spawn_bare(i));
        usec_t t = now_monotonic() - t0;
        if (copy && tmpfs)
                run_cmd((const char *const[]) { "rm", "-rf", dst, NULL });
        return t;
}

/* N bare runs, two at a time. */
static usec_t run_bare_pairs(unsigned n, unsigned first) {
        usec_t t0 = now_monotonic();
        pid_t a = -1, b = -1;
        for (unsigned i = 0; i < n; i++) {
                if (a < 0)
                        a = spawn_bare(first + i);
                else if (b < 0)
                        b = spawn_bare(first + i);
                if (a >= 0 && b >= 0) {
                        int st;
                        pid_t w = wait(&st);
                        if (w < 0)
                                die("wait", errno);
                        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                                bare_failed(st);
                        if (w == a)
                                a = -1;
                        else
                                b = -1;
                }
        }
        if (a >= 0)
                reap_bare(a);
        if (b >= 0)
                reap_bare(b);
        return now_monotonic() - t0;
}

/* Prepare the request under a dot-name (ignored by the daemon); returns its id number. */
static unsigned prepare(void) {
        char p[PATH_MAX], body[256];
        unsigned n = seq++;
        snprintf(p, sizeof(p), "%s/.%c%u.tmp", inbox, idp, n);
        int len = snprintf(body, sizeof(body),
                           "{\"version\":1,\"id\":\"%c%u\",\"action_class\":\"local-reversible\",\"argv\":[\"/bin/true\"]}", idp, n);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, body, (size_t) len) != len || close(fd) < 0)
                die("request", errno);
        return n;
}

static void submit(unsigned n) {
        char from[PATH_MAX], to[PATH_MAX];
        snprintf(from, sizeof(from), "%s/.%c%u.tmp", inbox, idp, n);
        snprintf(to, sizeof(to), "%s/%c%u.json", inbox, idp, n);
        if (rename(from, to) < 0)
                die("rename into the inbox", errno);
}

/* Wait until `count` result directories named b<number> have been renamed into RESULTS. */
static void wait_results(unsigned count) {
        char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
        while (count > 0) {
                struct pollfd p = { .fd = ino, .events = POLLIN };
                if (poll(&p, 1, 300 * 1000) <= 0)
                        die("waiting for a result", ETIMEDOUT);
                ssize_t n = read(ino, buf, sizeof(buf));
                if (n < 0)
                        die("inotify read", errno);
                for (char *q = buf; q < buf + n;) {
                        struct inotify_event *ev = (struct inotify_event *) q;
                        q += sizeof(*ev) + ev->len;
                        if (ev->mask & IN_Q_OVERFLOW)
                                die("inotify overflow in the benchmark", EOVERFLOW);
                        if ((ev->mask & IN_MOVED_TO) && ev->len && ev->name[0] == idp && !strchr(ev->name, '.'))
                                count--;
                }
        }
}

static void check_succeeded(unsigned n) {
        char p[PATH_MAX], buf[4096];
        snprintf(p, sizeof(p), "%s/%c%u/result.json", results, idp, n);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        ssize_t len = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (fd >= 0)
                close(fd);
        if (len <= 0)
                die(p, errno ? errno : EIO);
        buf[len] = 0;
        if (!strstr(buf, "\"status\": \"succeeded\"")) {
                fprintf(stderr, "bench-orchestrator: %c%u did not succeed:\n%s\n", idp, n, buf);
                exit(1);
        }
}

static usec_t run_daemon(void) {
        unsigned n = prepare();
        usec_t t0 = now_monotonic();
        submit(n);
        wait_results(1);
        usec_t t = now_monotonic() - t0;
        check_succeeded(n);
        return t;
}

static usec_t run_daemon_burst(unsigned count) {
        unsigned first = seq;
        for (unsigned i = 0; i < count; i++)
                (void) prepare();
        usec_t t0 = now_monotonic();
        for (unsigned i = 0; i < count; i++)
                submit(first + i);
        wait_results(count);
        usec_t t = now_monotonic() - t0;
        for (unsigned i = 0; i < count; i++)
                check_succeeded(first + i);
        return t;
}

static int cmp(const void *a, const void *b) {
        usec_t x = *(const usec_t *) a, y = *(const usec_t *) b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
        if (argc != 6) {
                fprintf(stderr, "usage: bench-orchestrator INBOX RESULTS BASE RUNS N\n");
                return 2;
        }
        inbox = argv[1];
        results = argv[2];
        base = argv[3];
        unsigned runs = (unsigned) atoi(argv[4]), burst = (unsigned) atoi(argv[5]);
        if (runs < 1 || runs > 1000 || burst == 1 || burst > 10000)
                die("RUNS 1..1000, N 0 or 2..10000", EINVAL);

        if (getenv("BENCH_ID_PREFIX") && getenv("BENCH_ID_PREFIX")[0] >= 'a' && getenv("BENCH_ID_PREFIX")[0] <= 'z')
                idp = getenv("BENCH_ID_PREFIX")[0];
        ino = inotify_init1(IN_CLOEXEC);
        if (ino < 0 || inotify_add_watch(ino, results, IN_MOVED_TO | IN_ONLYDIR) < 0)
                die("inotify on the results", errno);
        write_bare_bundle();

        usec_t *bare = calloc(runs, sizeof(usec_t)), *dmn = calloc(runs, sizeof(usec_t));
        if (!bare || !dmn)
                die("calloc", ENOMEM);
        (void) run_bare(100000);
        (void) run_daemon();
        for (unsigned i = 0; i < runs; i++) {
                if (i % 2 == 0) {
                        bare[i] = run_bare(i);
                        dmn[i] = run_daemon();
                } else {
                        dmn[i] = run_daemon();
                        bare[i] = run_bare(i);
                }
                printf("run %2u: bare runsc run %7.1f ms  inbox to result %7.1f ms\n", i, (double) bare[i] / 1000.0,
                       (double) dmn[i] / 1000.0);
                fflush(stdout);
        }
        qsort(bare, runs, sizeof(usec_t), cmp);
        qsort(dmn, runs, sizeof(usec_t), cmp);
        double mb = (double) bare[runs / 2] / 1000.0, md = (double) dmn[runs / 2] / 1000.0;
        const char *label = getenv("BENCH_LABEL");
        printf("%s: bare runsc run%s median %.1f ms, inbox to result median %.1f ms, ratio %.3f "
               "(target <= %s), %u runs each\n", label ? label : "latency",
               getenv("BENCH_BARE_COPY") ? " + cp -a into a tmpfs" : "", mb, md, md / mb,
               getenv("BENCH_TARGET") ?: "1.3", runs);
        fflush(stdout);
        if (burst == 0) {
                free(bare);
                free(dmn);
                return 0;
        }

        usec_t tb = run_bare_pairs(burst, 1000), td = run_daemon_burst(burst);
        printf("throughput: %u bare runs two at a time %.1f s (%.2f/s), %u requests at concurrency 2 %.1f s "
               "(%.2f/s), ratio %.3f (target <= 1.3)\n",
               burst, (double) tb / 1e6, burst / ((double) tb / 1e6), burst, (double) td / 1e6,
               burst / ((double) td / 1e6), (double) td / (double) tb);
        free(bare);
        free(dmn);
        return 0;
}
