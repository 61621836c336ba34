/* SPDX-License-Identifier: MIT */
/* capsule/runsc.c and capsule/bundle.c without a real runsc: this binary, invoked through a
 * symlink named "fake-runsc", plays runsc and reports what it was given, so the tests can
 * assert that exactly the three intended fds, an empty signal mask and a PATH-only
 * environment reach the runtime (CVE-2024-21626: a leaked host fd), and that the start-up
 * cleanup deletes only containers annotated as this worker's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/bundle.h"
#include "capsule/oci-spec.h"
#include "capsule/protocol.h"
#include "capsule/runsc.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "parser/config.h"
#include "tests/unit/lib/tfw-test.h"

/* ---- the fake runsc ------------------------------------------------------------------ */

static int fake_runsc(int argc, char **argv) {
        /* argv: fake-runsc --root ROOT ... */
        const char *root = argc > 2 ? argv[2] : ".";
        const char *cmd = NULL;
        for (int i = 3; i < argc && !cmd; i++)
                if (argv[i][0] != '-')
                        cmd = argv[i];
        if (cmd && streq(cmd, "list")) {
                char p[PATH_MAX];
                snprintf(p, sizeof(p), "%s/fake-list.json", root);
                int fd = open(p, O_RDONLY | O_CLOEXEC);
                char buf[65536];
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf)) : 0;
                if (n > 0)
                        (void) write_all(STDOUT_FILENO, buf, (size_t) n);
                else
                        (void) write_all(STDOUT_FILENO, "null\n", 5);
                return 0;
        }
        if (cmd && streq(cmd, "delete")) {
                char p[PATH_MAX];
                snprintf(p, sizeof(p), "%s/deleted", root);
                int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                (void) write_all(fd, argv[argc - 1], strlen(argv[argc - 1]));
                (void) write_all(fd, "\n", 1);
                snprintf(p, sizeof(p), "%s/%s_sandbox:%s.state", root, argv[argc - 1],
                         argv[argc - 1]);
                (void) unlink(p);
                return 0;
        }
        /* "run": report the descriptors, the signal state and the environment on stdout. */
        DIR *d = opendir("/proc/self/fd");
        int self = dirfd(d);
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' && atoi(de->d_name) != self) {
                        printf("fd %s\n", de->d_name);
                        /* An egress stream: say on it which fd it is here. */
                        struct stat st;
                        int fd = atoi(de->d_name);
                        if (fd > 2 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
                                dprintf(fd, "%d", fd);
                        /* A held file (runsc_hold): which one. */
                        char p[64], target[PATH_MAX];
                        snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
                        ssize_t k = fd > 2 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
                                            ? readlink(p, target, sizeof(target) - 1)
                                            : -1;
                        if (k > 0)
                                printf("file %d %.*s\n", fd, (int) k, target);
                }
        closedir(d);
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, "SigBlk:", 7) || !strncmp(line, "SigIgn:", 7))
                        fputs(line, stdout);
        if (f)
                fclose(f);
        for (char **e = environ; *e; e++)
                printf("env %s\n", *e);
        for (int i = 1; i < argc; i++)
                printf("arg %s\n", argv[i]);
        char in[64] = "";
        ssize_t n = read(STDIN_FILENO, in, sizeof(in) - 1);
        printf("stdin %s\n", n > 0 ? in : "");
        int sig = -1;
        (void) prctl(PR_GET_PDEATHSIG, &sig);
        printf("pdeathsig %d\n", sig);
        fprintf(stderr, "to-stderr\n");
        return 7;
}

/* ---- tests -------------------------------------------------------------------------- */

typedef struct Fake {
        TestDir *dir;
        char *root;
        Runsc rt;
} Fake;

static void fake_init(Fake *f, void **state) {
        char self[PATH_MAX], link[PATH_MAX];
        f->dir = *state;
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        assert_true(n > 0);
        self[n] = 0;
        snprintf(link, sizeof(link), "%s/fake-runsc", f->dir->path);
        assert_int_equal(symlink(self, link), 0);
        assert_true(asprintf(&f->root, "%s/root", f->dir->path) > 0);
        assert_int_equal(mkdir(f->root, 0700), 0);
        f->rt = (Runsc) { .binary = strdup(link), .root = strdup(f->root),
                          .platform = strdup("ptrace"), .worker_name = strdup("coder") };
}

static void fake_done(Fake *f) {
        runsc_done(&f->rt);
        free(f->root);
}

static char *read_all(int fd) {
        char *buf = NULL;
        size_t n;
        assert_true(lseek(fd, 0, SEEK_SET) == 0);
        assert_int_equal(read_full_fd_bounded(fd, 1 << 20, &buf, &n), 0);
        return buf;
}

static void test_spawn_only_stdio(void **state) {
        Fake f;
        fake_init(&f, state);
        int in[2], st;
        pid_t pid;

        /* Host descriptors deliberately left inheritable: none may reach runsc. */
        int leak1 = open("/dev/null", O_RDONLY);
        int leak2 = dup(leak1);
        assert_true(leak1 >= 0 && leak2 >= 0);
        /* And a blocked, an ignored signal in the parent: runsc starts clean. */
        sigset_t set, old;
        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        sigprocmask(SIG_BLOCK, &set, &old);
        struct sigaction ign = { .sa_handler = SIG_IGN }, oldsa;
        sigaction(SIGUSR2, &ign, &oldsa);

        assert_int_equal(pipe2(in, O_CLOEXEC), 0);
        assert_int_equal(write_all(in[1], "secret", 6), 0);
        close(in[1]);
        _cleanup_close_ int out = memfd_create("out", MFD_CLOEXEC);
        _cleanup_close_ int err = memfd_create("err", MFD_CLOEXEC);
        assert_int_equal(runsc_spawn_run(&f.rt, "/b/tfw-coder-j1", "tfw-coder-j1", "/b/runsc.log",
                                         in[0], out, err, NULL, 0, NULL, &pid),
                         0);
        close(in[0]);
        sigprocmask(SIG_SETMASK, &old, NULL);
        sigaction(SIGUSR2, &oldsa, NULL);
        close(leak1);
        close(leak2);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 7);

        _cleanup_free_ char *o = read_all(out), *e = read_all(err);
        const char *want =
                "fd 0\nfd 1\nfd 2\n"
                "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"
                "env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n";
        if (strncmp(o, want, strlen(want)) != 0)
                fail_msg("runsc was given:\n%s", o);
        assert_non_null(strstr(o, "arg --network=none\n"));
        assert_non_null(strstr(o, "arg --platform=ptrace\n"));
        assert_non_null(strstr(o, "arg --cpu-num-from-quota\n"));
        /* Without it runsc ignores the spec's seccomp profile (capsule/seccomp-profile.h). */
        assert_non_null(strstr(o, "arg --oci-seccomp\n"));
        assert_null(strstr(o, "--ignore-cgroups"));
        assert_null(strstr(o, "--overlay2")); /* init mounts the job's layer (capsule/protocol.h) */
        assert_non_null(strstr(o, "arg --log=/b/runsc.log\n"));
        assert_non_null(strstr(o, "arg run\narg --bundle\narg /b/tfw-coder-j1\narg tfw-coder-j1\n"));
        assert_non_null(strstr(o, "stdin secret\n"));
        /* Killed with the thread that started it (capsule.md, "No runtime process outlives its
         * caller"). */
        assert_non_null(strstr(o, "pdeathsig 9\n"));
        assert_string_equal(e, "to-stderr\n");
        fake_done(&f);
}

/* runtime.platform "kvm", end to end short of a KVM sandbox (it hangs under nested
 * virtualisation, docs/performance.md): the configuration's key reaches runsc as
 * --platform=kvm, with every other flag the capsule's walls need as on systrap. */
static void test_platform_kvm_reaches_runsc(void **state) {
        TestDir *dir = *state;
        char self[PATH_MAX], link[PATH_MAX], root[PATH_MAX], json[2 * PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        assert_true(n > 0);
        self[n] = 0;
        snprintf(link, sizeof(link), "%s/fake-runsc", dir->path);
        snprintf(root, sizeof(root), "%s/root", dir->path);
        assert_int_equal(symlink(self, link), 0);
        snprintf(json, sizeof(json),
                 "{\"version\": 1, \"name\": \"coder\", \"workspace\": \"/var/lib/coder/ws\","
                 " \"container_uid\": 10000, \"container_gid\": 10000,"
                 " \"runtime\": {\"runsc\": \"%s\", \"platform\": \"kvm\"}}", link);
        _cleanup_config_ Config *c = NULL;
        TfwError e = {0};
        assert_int_equal(config_parse_buffer(json, strlen(json), &c, &e), 0);
        Runsc rt;
        assert_int_equal(runsc_init(&rt, c, root, &e), 0);
        assert_string_equal(rt.platform, "kvm");

        int in[2], st;
        pid_t pid;
        assert_int_equal(pipe2(in, O_CLOEXEC), 0);
        close(in[1]);
        _cleanup_close_ int out = memfd_create("out", MFD_CLOEXEC);
        _cleanup_close_ int err = memfd_create("err", MFD_CLOEXEC);
        assert_int_equal(runsc_spawn_run(&rt, "/b/tfw-coder-j1", "tfw-coder-j1", "/b/runsc.log", in[0], out, err,
                                         NULL, 0, NULL, &pid),
                         0);
        close(in[0]);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        _cleanup_free_ char *o = read_all(out);
        assert_non_null(strstr(o, "arg --platform=kvm\n"));
        assert_null(strstr(o, "arg --platform=systrap\n"));
        assert_non_null(strstr(o, "arg --network=none\n"));
        assert_non_null(strstr(o, "arg --oci-seccomp\n"));
        assert_non_null(strstr(o, "arg run\narg --bundle\narg /b/tfw-coder-j1\narg tfw-coder-j1\n"));
        runsc_done(&rt);
}

/* `run` given the egress streams (pairs[i][1]: the capsule's ends, made here) and an empty
 * stdin, waited for: what it reported. */
static char *run_with_streams(Fake *f, int pairs[][2]) {
        int in[2], st, inside[CAPSULE_EGRESS_STREAMS];
        pid_t pid;

        for (size_t i = 0; i < CAPSULE_EGRESS_STREAMS; i++) {
                assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pairs[i]), 0);
                inside[i] = pairs[i][1];
        }
        assert_int_equal(pipe2(in, O_CLOEXEC), 0);
        close(in[1]);
        _cleanup_close_ int out = memfd_create("out", MFD_CLOEXEC);
        _cleanup_close_ int err = memfd_create("err", MFD_CLOEXEC);
        assert_int_equal(runsc_spawn_run(&f->rt, "/b/x", "x", "/b/runsc.log", in[0], out, err, inside,
                                         CAPSULE_EGRESS_STREAMS, NULL, &pid),
                         0);
        close(in[0]);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        return read_all(out);
}

/* runsc_hold: every runsc started from then on holds the file, as its last descriptor (after
 * the egress streams), and nothing else more; `list` and the others too. */
static void test_spawn_holds(void **state) {
        Fake f;
        fake_init(&f, state);
        int in[2], st, pairs[CAPSULE_EGRESS_STREAMS][2];
        pid_t pid;
        char held[PATH_MAX];

        snprintf(held, sizeof(held), "%s/jobs.lock", f.dir->path);
        _cleanup_close_ int lock = open(held, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        assert_true(lock >= 0);
        runsc_hold(&f.rt, lock);
        _cleanup_free_ char *o = run_with_streams(&f, pairs);
        char want[PATH_MAX + 64], extra[64];
        snprintf(want, sizeof(want), "fd %d\n", 3 + CAPSULE_EGRESS_STREAMS);
        if (!strstr(o, want))
                fail_msg("the held file did not reach runsc:\n%s", o);
        snprintf(want, sizeof(want), "file %d %s\n", 3 + CAPSULE_EGRESS_STREAMS, held);
        if (!strstr(o, want))
                fail_msg("runsc's last descriptor is not the held file:\n%s", o);
        snprintf(extra, sizeof(extra), "fd %d\n", 4 + CAPSULE_EGRESS_STREAMS);
        assert_null(strstr(o, extra));
        assert_non_null(strstr(o, "pdeathsig 9\n"));
        /* Nor is the held file a --pass-fd: runsc keeps it to itself. */
        snprintf(want, sizeof(want), "--pass-fd=%d:", 3 + CAPSULE_EGRESS_STREAMS);
        assert_null(strstr(o, want));
        for (size_t i = 0; i < CAPSULE_EGRESS_STREAMS; i++) {
                close(pairs[i][0]);
                close(pairs[i][1]);
        }
        /* Without a hold, none. */
        runsc_hold(&f.rt, -1);
        assert_int_equal(pipe2(in, O_CLOEXEC), 0);
        close(in[1]);
        _cleanup_close_ int out2 = memfd_create("out", MFD_CLOEXEC);
        _cleanup_close_ int err = memfd_create("err", MFD_CLOEXEC);
        assert_int_equal(runsc_spawn_run(&f.rt, "/b/x", "x", "/l", in[0], out2, err, NULL, 0, NULL, &pid), 0);
        close(in[0]);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        _cleanup_free_ char *o2 = read_all(out2);
        assert_null(strstr(o2, "fd 3\n"));
        fake_done(&f);
}

/* The egress streams (capsule/protocol.h): runsc holds exactly stdio and the streams, at 3.., and
 * names each with --pass-fd for the capsule's CAPSULE_EGRESS_FD_BASE..; nothing else leaks. */
static void test_spawn_pass_fds(void **state) {
        Fake f;
        fake_init(&f, state);
        int pairs[CAPSULE_EGRESS_STREAMS][2];
        pid_t pid;

        int leak = open("/dev/null", O_RDONLY);
        assert_true(leak >= 0);
        _cleanup_free_ char *o = run_with_streams(&f, pairs);
        close(leak);
        for (int i = 0; i < 3 + CAPSULE_EGRESS_STREAMS; i++) {
                char want[64];
                snprintf(want, sizeof(want), "fd %d\n", i);
                if (!strstr(o, want))
                        fail_msg("fd %d did not reach runsc:\n%s", i, o);
        }
        char extra[64];
        snprintf(extra, sizeof(extra), "fd %d\n", 3 + CAPSULE_EGRESS_STREAMS);
        assert_null(strstr(o, extra));
        /* --pass-fd belongs to "run" and names host 3+i as guest BASE+i. */
        char first[96], last[96];
        snprintf(first, sizeof(first), "arg run\narg --pass-fd=3:%d\n", CAPSULE_EGRESS_FD_BASE);
        snprintf(last, sizeof(last), "arg --pass-fd=%d:%d\narg --bundle\n", 2 + CAPSULE_EGRESS_STREAMS,
                 CAPSULE_EGRESS_FD_BASE + CAPSULE_EGRESS_STREAMS - 1);
        assert_non_null(strstr(o, first));
        assert_non_null(strstr(o, last));
        /* Each stream is in its place: the child's fd 3+i is the end of pair i. */
        for (size_t i = 0; i < CAPSULE_EGRESS_STREAMS; i++) {
                char got[16] = "", want[16];
                snprintf(want, sizeof(want), "%zu", 3 + i);
                assert_true(read(pairs[i][0], got, sizeof(got) - 1) > 0);
                assert_string_equal(got, want);
        }
        for (size_t i = 0; i < CAPSULE_EGRESS_STREAMS; i++) {
                close(pairs[i][0]);
                close(pairs[i][1]);
        }
        /* More than runsc can pass is refused before anything starts. */
        int many[RUNSC_PASS_FDS_MAX + 1];
        for (size_t i = 0; i < ELEMENTSOF(many); i++)
                many[i] = 0;
        assert_int_equal(runsc_spawn_run(&f.rt, "/b/x", "x", "/l", 0, 1, 2, many, ELEMENTSOF(many), NULL, &pid),
                         -E2BIG);
        fake_done(&f);
}

static void test_spawn_fds_in_low_slots(void **state) {
        /* The intended fds may already sit at 0..2 in a different order (a daemon started
         * with stdio closed): each must still land where it belongs. */
        Fake f;
        fake_init(&f, state);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int out = memfd_create("out", 0), err = memfd_create("err", 0);
                int in[2];
                if (pipe(in) < 0 || write(in[1], "x", 1) != 1)
                        _exit(90);
                close(in[1]);
                /* Put out at 0, err at 1, in at 2. */
                int t_out = fcntl(out, F_DUPFD, 10), t_err = fcntl(err, F_DUPFD, 10),
                    t_in = fcntl(in[0], F_DUPFD, 10);
                dup2(t_out, 0);
                dup2(t_err, 1);
                dup2(t_in, 2);
                close(t_out);
                close(t_err);
                close(t_in);
                close(out);
                close(err);
                close(in[0]);
                pid_t p;
                int st;
                if (runsc_spawn_run(&f.rt, "/b", "id", "/l", 2, 0, 1, NULL, 0, NULL, &p) < 0)
                        _exit(91);
                waitpid(p, &st, 0);
                char buf[4096] = "";
                ssize_t n = pread(0, buf, sizeof(buf) - 1, 0);
                if (n <= 0 || !strstr(buf, "stdin x\n"))
                        _exit(92);
                n = pread(1, buf, sizeof(buf) - 1, 0);
                if (n <= 0 || strncmp(buf, "to-stderr\n", 10) != 0)
                        _exit(93);
                _exit(0);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        fake_done(&f);
}

static void test_container_id_and_state(void **state) {
        Fake f;
        fake_init(&f, state);
        _cleanup_free_ char *id = NULL;
        assert_int_equal(capsule_container_id("coder", "cargo_test_1", &id), 0);
        assert_string_equal(id, "tfw-coder-cargo_test_1");
        /* And back: what capsule_container_id makes for this worker, nothing else. */
        assert_true(capsule_container_id_is_workers("coder", id));
        assert_false(capsule_container_id_is_workers("code", id));
        assert_false(capsule_container_id_is_workers("coder", "tfw-coder-"));
        assert_false(capsule_container_id_is_workers("coder", "tfw-coder-Bad"));
        assert_false(capsule_container_id_is_workers("coder", "xfw-coder-a"));
        assert_false(capsule_container_id_is_workers("coder", "tfw-codera"));

        assert_int_equal(runsc_state_exists(&f.rt, "tfw-coder-a"), 0);
        _cleanup_close_ int rfd = open(f.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        tfw_write_file(rfd, "tfw-coder-a_sandbox:tfw-coder-a.state", "{}", (size_t) -1);
        assert_int_equal(runsc_state_exists(&f.rt, "tfw-coder-a"), 1);
        /* A longer id sharing the prefix is another container. */
        assert_int_equal(runsc_state_exists(&f.rt, "tfw-coder"), 0);
        assert_int_equal(runsc_state_exists(&f.rt, "tfw-coder-ab"), 0);
        fake_done(&f);
}

static void write_state(int rfd, const char *id, const char *owner) {
        char name[256], body[512];
        snprintf(name, sizeof(name), "%s_sandbox:%s.state", id, id);
        if (owner)
                snprintf(body, sizeof(body),
                         "{\"id\":\"%s\",\"spec\":{\"annotations\":{\"org.tentaflake.worker\":"
                         "\"%s\"}}}",
                         id, owner);
        else
                snprintf(body, sizeof(body), "{\"id\":\"%s\",\"spec\":{}}", id);
        tfw_write_file(rfd, name, body, (size_t) -1);
}

static void test_cleanup_only_ours(void **state) {
        Fake f;
        fake_init(&f, state);
        TfwError e = {};
        unsigned removed = 99;
        _cleanup_close_ int rfd = open(f.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        /* An empty root. */
        assert_int_equal(runsc_cleanup_stale(&f.rt, &removed, &e), 0);
        assert_int_equal(removed, 0);

        /* Ours (by annotation), another worker's whose name shares our prefix, one without
         * annotation, and ours found through its bundle's config.json. */
        char bundle[PATH_MAX], list[PATH_MAX + 512];
        snprintf(bundle, sizeof(bundle), "%s/bundle-b", f.dir->path);
        assert_int_equal(mkdir(bundle, 0700), 0);
        _cleanup_close_ int bfd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        tfw_write_file(bfd, "config.json",
                       "{\"annotations\":{\"org.tentaflake.worker\":\"coder\"}}", (size_t) -1);
        write_state(rfd, "tfw-coder-a", "coder");
        write_state(rfd, "tfw-coder-x-b", "coder-x");
        write_state(rfd, "foreign", NULL);
        snprintf(list, sizeof(list),
                 "[{\"id\":\"tfw-coder-a\",\"bundle\":\"/nonexistent\"},"
                 "{\"id\":\"tfw-coder-x-b\",\"bundle\":\"/nonexistent\"},"
                 "{\"id\":\"foreign\",\"bundle\":\"/nonexistent\"},"
                 "{\"id\":\"tfw-coder-b\",\"bundle\":\"%s\"}]",
                 bundle);
        tfw_write_file(rfd, "fake-list.json", list, (size_t) -1);

        assert_int_equal(runsc_cleanup_stale(&f.rt, &removed, &e), 0);
        assert_int_equal(removed, 2);
        _cleanup_close_ int dfd = openat(rfd, "deleted", O_RDONLY | O_CLOEXEC);
        assert_true(dfd >= 0);
        _cleanup_free_ char *deleted = read_all(dfd);
        assert_string_equal(deleted, "tfw-coder-a\ntfw-coder-b\n");
        fake_done(&f);
}

/* runsc_list_own reads the root's files (a hung `runsc run` holds the lock `runsc list` waits
 * on; a creation cut short has no state file): ours by annotation, half-created ones by name,
 * another worker's never; states from the state file, a dead sandbox as "stopped". */
static void test_list_own(void **state) {
        Fake f;
        fake_init(&f, state);
        _cleanup_close_ int rfd = open(f.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        RunscOwnContainer *own = NULL;
        size_t n = 99;
        char body[512];

        assert_int_equal(runsc_list_own(&f.rt, "/nonexistent/root", &own, &n), 0);
        assert_int_equal(n, 0);
        assert_null(own);
        assert_int_equal(runsc_list_own(&f.rt, NULL, &own, &n), 0);
        assert_int_equal(n, 0);

        /* Created, its sandbox alive (this process); running with a dead sandbox; another
         * worker's; half-created ones of ours (lock only, socket only) and of a foreign name. */
        snprintf(body, sizeof(body),
                 "{\"status\":\"created\",\"sandbox\":{\"pid\":%d},"
                 "\"spec\":{\"annotations\":{\"org.tentaflake.worker\":\"coder\"}}}", (int) getpid());
        tfw_write_file(rfd, "tfw-coder-warm-1_sandbox:tfw-coder-warm-1.state", body, (size_t) -1);
        tfw_write_file(rfd, "tfw-coder-warm-1_sandbox:tfw-coder-warm-1.lock", "", 0);
        tfw_write_file(rfd, "runsc-tfw-coder-warm-1.sock", "", 0);
        tfw_write_file(rfd, "tfw-coder-j2_sandbox:tfw-coder-j2.state",
                       "{\"status\":\"running\",\"sandbox\":{\"pid\":2147483647},"
                       "\"spec\":{\"annotations\":{\"org.tentaflake.worker\":\"coder\"}}}", (size_t) -1);
        write_state(rfd, "tfw-coder-x-b", "coder-x");
        tfw_write_file(rfd, "tfw-coder-x-b_sandbox:tfw-coder-x-b.lock", "", 0);
        tfw_write_file(rfd, "tfw-coder-j3_sandbox:tfw-coder-j3.lock", "", 0);
        tfw_write_file(rfd, "runsc-tfw-coder-j4.sock", "", 0);
        tfw_write_file(rfd, "foreign_sandbox:foreign.lock", "", 0);
        tfw_write_file(rfd, "tfw-coder-Bad_sandbox:tfw-coder-Bad.lock", "", 0);

        assert_int_equal(runsc_list_own(&f.rt, NULL, &own, &n), 0);
        assert_int_equal(n, 4);
        const char *want[][2] = {{"tfw-coder-warm-1", "created"}, {"tfw-coder-j2", "stopped"},
                                 {"tfw-coder-j3", "creating"}, {"tfw-coder-j4", "creating"}};
        for (size_t w = 0; w < ELEMENTSOF(want); w++) {
                size_t i;
                for (i = 0; i < n && strcmp(own[i].id, want[w][0]) != 0; i++)
                        ;
                assert_true(i < n);
                assert_string_equal(own[i].state, want[w][1]);
        }
        free(own);
        /* The same through an explicit root (doctor's way: the worker's, not the driver's). */
        assert_int_equal(runsc_list_own(&f.rt, f.root, &own, &n), 0);
        assert_int_equal(n, 4);
        free(own);
        fake_done(&f);
}

static void test_bundle(void **state) {
        TestDir *d = *state;
        TfwError e = {};
        Config c = { .version = 1, .name = (char *) "coder", .container_uid = 1000,
                     .container_gid = 1001, .platform = (char *) "ptrace" };
        c.limits = (ConfigLimits) { .memory = 1 << 30, .memory_swap = 1 << 30, .cpus_milli = 1000,
                                    .pids = 100, .workspace_tmpfs = 1 << 20, .tmp_tmpfs = 1 << 20 };
        char *argv[] = { (char *) "true", NULL };
        CapsuleSpecParams p = { .config = &c, .job_id = "j1", .argv = argv, .timeout_seconds = 5,
                                .snapshot_dir = "/snap", .init_path = "/init" };
        CapsuleBundle *b = NULL;

        umask(077); /* the job must still be able to read passwd and group */
        assert_int_equal(capsule_bundle_create(d->fd, d->path, "tfw-coder-j1", &p, &b, &e), 0);
        umask(022);
        struct stat st;
        assert_int_equal(fstatat(d->fd, "tfw-coder-j1", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0700);
        assert_int_equal(fstatat(b->dir_fd, "config.json", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(fstatat(b->dir_fd, "passwd", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_int_equal(fstatat(b->dir_fd, "group", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_int_equal(fstatat(b->dir_fd, "root", &st, 0), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0555);
        /* The empty root holds the synthetic passwd and group, readable, nothing writable. */
        assert_int_equal(fstatat(b->dir_fd, "root/etc", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0555);
        assert_int_equal(fstatat(b->dir_fd, "root/etc/passwd", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_int_equal(fstatat(b->dir_fd, "root/etc/group", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0644);
        _cleanup_close_ int pfd = openat(b->dir_fd, "root/etc/passwd", O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *pw = read_all(pfd);
        assert_non_null(strstr(pw, "tentaflake:x:1000:1001:"));

        /* The spec names the bundle's own files. */
        _cleanup_close_ int cfd = openat(b->dir_fd, "config.json", O_RDONLY | O_CLOEXEC);
        _cleanup_free_ char *text = read_all(cfd);
        _cleanup_json_ json_t *spec = json_loads(text, 0, NULL);
        assert_non_null(spec);
        char want[PATH_MAX];
        snprintf(want, sizeof(want), "%s/tfw-coder-j1/root", d->path);
        assert_string_equal(json_string_value(json_object_get(json_object_get(spec, "root"), "path")),
                            want);
        assert_null(strstr(text, "/etc/passwd"));

        /* A second bundle of the same id is refused; removal leaves nothing. */
        CapsuleBundle *b2 = NULL;
        assert_int_equal(capsule_bundle_create(d->fd, d->path, "tfw-coder-j1", &p, &b2, &e),
                         -EEXIST);
        assert_int_equal(capsule_bundle_remove(b), 0);
        assert_int_equal(fstatat(d->fd, "tfw-coder-j1", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(errno, ENOENT);
}

static void test_runsc_error_message(void **state) {
        TestDir *d = *state;
        TfwError e = {};
        Config c = { .version = 1, .name = (char *) "coder", .container_uid = 1000,
                     .container_gid = 1001, .platform = (char *) "ptrace" };
        char *argv[] = { (char *) "true", NULL };
        CapsuleSpecParams p = { .config = &c, .job_id = "j2", .argv = argv, .timeout_seconds = 5,
                                .snapshot_dir = "/snap", .init_path = "/init" };
        CapsuleBundle *b = NULL;
        char msg[256];

        assert_int_equal(capsule_bundle_create(d->fd, d->path, "tfw-coder-j2", &p, &b, &e), 0);
        capsule_bundle_runsc_error(b, msg, sizeof(msg));
        assert_string_equal(msg, "");
        /* As runsc 20221219 writes it: JSON objects, the last one wins, escapes kept. */
        tfw_write_file(b->dir_fd, "runsc.log",
                       "{\"msg\":\"first\",\"level\":\"error\"}"
                       "{\"msg\":\"creating container: \\\"x\\\"\\nbad\",\"level\":\"error\"}",
                       (size_t) -1);
        capsule_bundle_runsc_error(b, msg, sizeof(msg));
        assert_string_equal(msg, "creating container: \\\"x\\\"\\nbad");
        /* Text lines: the last one, control characters replaced. */
        tfw_write_file(b->dir_fd, "runsc.log", "W1 one\nE2 two\tbad\x1b[0m\n\n", (size_t) -1);
        capsule_bundle_runsc_error(b, msg, sizeof(msg));
        assert_string_equal(msg, "E2 two bad [0m");
        assert_int_equal(capsule_bundle_remove(b), 0);
}

int main(int argc, char **argv) {
        const char *base = strrchr(argv[0], '/');
        if (streq(base ? base + 1 : argv[0], "fake-runsc"))
                return fake_runsc(argc, argv);

        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_spawn_only_stdio, tfw_tmpdir_setup,
                                                tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_platform_kvm_reaches_runsc, tfw_tmpdir_setup,
                                                tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_spawn_pass_fds, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_spawn_holds, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_spawn_fds_in_low_slots, tfw_tmpdir_setup,
                                                tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_container_id_and_state, tfw_tmpdir_setup,
                                                tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_cleanup_only_ours, tfw_tmpdir_setup,
                                                tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_list_own, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_bundle, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_runsc_error_message, tfw_tmpdir_setup,
                                                tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
