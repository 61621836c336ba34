/* SPDX-License-Identifier: MIT */
/* capsule/runc.c without a real runc: this binary, invoked through a symlink named "fake-runc",
 * plays runc and reports what it was given, so the tests can assert that exactly stdio and the
 * egress streams reach the runtime, each stream at the capsule's CAPSULE_EGRESS_FD_BASE + i
 * through --preserve-fds (a leaked host fd is CVE-2024-21626's way in), that the capsules'
 * roots are the user namespace root's and nothing more, that only this worker's containers
 * are found in runc's root, and that a Landlock refused by a seccomp filter stops the driver. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <seccomp.h>
#include <unistd.h>

#include "capsule/protocol.h"
#include "capsule/runc.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "parser/config.h"
#include "tests/unit/lib/tfw-test.h"

/* "run": every argument and every descriptor it holds on stdout; each stream told its number. */
static int fake_runc(int argc, char **argv) {
        for (int i = 1; i < argc; i++)
                printf("arg %s\n", argv[i]);
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        while (d && (de = readdir(d))) {
                int fd = atoi(de->d_name);
                struct stat st;
                if (de->d_name[0] == '.' || fd == dirfd(d))
                        continue;
                printf("fd %d\n", fd);
                if (fd > 2 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode))
                        dprintf(fd, "%d", fd);
        }
        if (d)
                closedir(d);
        return 0;
}

typedef struct Fake {
        TestDir *t;
        Config c;
        Runc rc;
        char root[PATH_MAX], bin[PATH_MAX];
} Fake;

static void fake_init(Fake *f, void **state) {
        TestDir *t = *state;
        TfwError e = {0};
        *f = (Fake) {.t = t, .c = {.name = (char *) "coder-1"}};
        if (geteuid() != 0)
                tfw_skip("the capsules' roots are chowned to the user namespace's root id: needs root");
        char exe[PATH_MAX];
        ssize_t k = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        assert_true(k > 0);
        exe[k] = 0;
        snprintf(f->bin, sizeof(f->bin), "%s/fake-runc", t->path);
        assert_int_equal(symlink(exe, f->bin), 0);
        f->c.runc = f->bin;
        assert_int_equal(mkdirat(t->fd, "run", 0755), 0);
        snprintf(f->root, sizeof(f->root), "%s/run/runsc", t->path);
        if (runc_init(&f->rc, &f->c, f->root, &e) < 0)
                fail_msg("runc_init: %s", e.message);
}

static char *read_all(int fd) {
        char *buf = NULL;
        size_t len = 0;
        assert_int_equal(read_full_fd_bounded(fd, 1 << 20, &buf, &len), 0);
        return buf;
}

static void test_spawn_streams(void **state) {
        Fake f;
        fake_init(&f, state);
        int out[2], pairs[2][2], s[2];
        pid_t pid;
        int status;

        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        for (int i = 0; i < 2; i++)
                assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pairs[i]), 0);
        int leak = open("/dev/null", O_RDONLY); /* no O_CLOEXEC: must not reach runc all the same */
        assert_true(leak >= 0);
        s[0] = pairs[0][1];
        s[1] = pairs[1][1];
        assert_int_equal(runc_spawn_run(&f.rc, "/b/c1", "c1", "/l/runc.log", 0, out[1], 2, s, 2, &pid), 0);
        close(out[1]);
        close(leak);
        _cleanup_free_ char *o = read_all(out[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        /* runc passes fds 3.. as they are: /dev/null up to the base, then the streams. */
        char want[64];
        snprintf(want, sizeof(want), "arg --preserve-fds=%d\n", CAPSULE_EGRESS_FD_BASE - 3 + 2);
        assert_non_null(strstr(o, want));
        assert_non_null(strstr(o, "arg --root\n"));
        /* --keep: the container's cgroup outlives its init until the worker has read it (the
         * memory and pids walls). */
        assert_non_null(strstr(o, "arg run\narg --keep\narg --bundle\narg /b/c1\n"));
        for (int fd = 0; fd < CAPSULE_EGRESS_FD_BASE + 2; fd++) {
                snprintf(want, sizeof(want), "fd %d\n", fd);
                if (!strstr(o, want))
                        fail_msg("fd %d did not reach runc:\n%s", fd, o);
        }
        snprintf(want, sizeof(want), "fd %d\n", CAPSULE_EGRESS_FD_BASE + 2);
        assert_null(strstr(o, want));
        for (int i = 0; i < 2; i++) {
                char got[16] = "", w[16];
                snprintf(w, sizeof(w), "%d", CAPSULE_EGRESS_FD_BASE + i);
                assert_true(read(pairs[i][0], got, sizeof(got) - 1) > 0);
                assert_string_equal(got, w);
                close(pairs[i][0]);
                close(pairs[i][1]);
        }
        /* Without streams nothing is preserved. */
        assert_int_equal(pipe2(out, O_CLOEXEC), 0);
        assert_int_equal(runc_spawn_run(&f.rc, "/b/c2", "c2", "/l/runc.log", 0, out[1], 2, NULL, 0, &pid), 0);
        close(out[1]);
        _cleanup_free_ char *o2 = read_all(out[0]);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_non_null(strstr(o2, "arg --preserve-fds=0\n"));
        assert_null(strstr(o2, "fd 3\n"));
        close(out[0]);
        runc_done(&f.rc);
}

/* The roots: their directory root's 0711 beside runc's root; a capsule's root the user
 * namespace root's, 0755, holding only etc/ (root's files, 0444, in a directory of that id). */
static void test_roots(void **state) {
        Fake f;
        fake_init(&f, state);
        struct stat st;
        char p[PATH_MAX];

        snprintf(p, sizeof(p), "%s/run/runc-roots", f.t->path);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0711);
        assert_int_equal(st.st_uid, 0);
        assert_int_equal(stat(f.root, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0700);

        assert_int_equal(mkdirat(f.t->fd, "etc", 0700), 0);
        _cleanup_close_ int etc = open_dir_at(f.t->fd, "etc");
        tfw_write_file(etc, "passwd", "root:x:0:0::/:/bin/false\n", (size_t) -1);
        char src[PATH_MAX];
        snprintf(src, sizeof(src), "%s/etc", f.t->path);
        umask(077); /* the worker's umask must not decide */
        assert_int_equal(runc_root_make(&f.rc, "c1", src), 0);
        umask(022);
        assert_int_equal(runc_root_path(&f.rc, "c1", p, sizeof(p)), 0);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_uid, CONFIG_CAPSULE_ROOT_ID);
        assert_int_equal(st.st_gid, CONFIG_CAPSULE_ROOT_ID);
        assert_int_equal(st.st_mode & 07777, 0755);
        strcat(p, "/etc");
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_uid, CONFIG_CAPSULE_ROOT_ID);
        assert_int_equal(st.st_mode & 07777, 0755);
        strcat(p, "/passwd");
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_uid, 0);
        assert_int_equal(st.st_mode & 07777, 0444);
        /* Made afresh, then gone with everything in it; a name that is not one is refused. */
        assert_int_equal(runc_root_make(&f.rc, "c1", src), 0);
        assert_int_equal(runc_root_remove(&f.rc, "c1"), 0);
        assert_int_equal(runc_root_path(&f.rc, "c1", p, sizeof(p)), 0);
        assert_int_equal(stat(p, &st), -1);
        assert_int_equal(runc_root_remove(&f.rc, "c1"), 0);
        assert_int_equal(runc_root_path(&f.rc, "../x", p, sizeof(p)), -EINVAL);
        runc_done(&f.rc);
}

/* Only containers whose runc state carries this worker's owner label. */
static void test_list_own(void **state) {
        Fake f;
        fake_init(&f, state);
        _cleanup_close_ int root = open(f.root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        static const struct {
                const char *id, *labels;
        } c[] = {
                {"tfw-coder-1-a", "[\"bundle=/b\", \"org.tentaflake.worker=coder-1\"]"},
                {"tfw-coder-2-b", "[\"bundle=/b\", \"org.tentaflake.worker=coder-2\"]"},
                {"other", "[\"bundle=/b\", \"org.tentaflake.worker=coder-1x\"]"},
        };
        for (size_t i = 0; i < ELEMENTSOF(c); i++) {
                char text[512];
                assert_int_equal(mkdirat(root, c[i].id, 0700), 0);
                _cleanup_close_ int d = open_dir_at(root, c[i].id);
                snprintf(text, sizeof(text), "{\"id\":\"%s\",\"init_process_pid\":0,\"config\":{\"labels\":%s}}",
                         c[i].id, c[i].labels);
                tfw_write_file(d, "state.json", text, (size_t) -1);
        }
        /* A creation cut short: no state file, ours by its id. */
        assert_int_equal(mkdirat(root, "tfw-coder-1-cut", 0700), 0);
        _cleanup_free_ RunscOwnContainer *own = NULL;
        size_t n = 0;
        assert_int_equal(runc_list_own(&f.rc, NULL, &own, &n), 0);
        assert_int_equal(n, 2);
        for (size_t i = 0; i < n; i++) {
                if (streq(own[i].id, "tfw-coder-1-a"))
                        assert_string_equal(own[i].state, "stopped");
                else {
                        assert_string_equal(own[i].id, "tfw-coder-1-cut");
                        assert_string_equal(own[i].state, "creating");
                }
        }
        runc_done(&f.rc);
}

/* Landlock refused by a seccomp filter (a systemd unit's SystemCallFilter= without the runc
 * drop-in): runc_init fails, naming the wall, instead of running capsules without it. */
static const char *refused_bin, *refused_root;

static int landlock_refused_child(void) {
        Config c = {.name = (char *) "coder-1", .runc = (char *) refused_bin};
        Runc rc;
        TfwError e = {0};
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(landlock_create_ruleset), 0) < 0 ||
            seccomp_load(ctx) < 0)
                return 1;
        seccomp_release(ctx);
        if (runc_init(&rc, &c, refused_root, &e) != -EPERM)
                return 2;
        if (!strstr(e.message, "Landlock is refused to the worker") || !strstr(e.message, "runc drop-in"))
                return 3;
        return 0;
}

static void test_landlock_refused(void **state) {
        Fake f;
        fake_init(&f, state); /* with Landlock: it starts */
        if (f.rc.landlock_abi <= 0)
                tfw_skip("this kernel has no Landlock");
        runc_done(&f.rc);
        refused_bin = f.bin;
        refused_root = f.root;
        assert_int_equal(tfw_in_child(landlock_refused_child), 0);
}

int main(int argc, char **argv) {
        const char *base = strrchr(argv[0], '/');
        if (streq(base ? base + 1 : argv[0], "fake-runc"))
                return fake_runc(argc, argv);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_spawn_streams, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_roots, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_list_own, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_landlock_refused, tfw_tmpdir_setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
