/* SPDX-License-Identifier: MIT */
/* capsule-init/landlock.c: the job's Landlock ruleset (runc's capsule), proved on the host in a
 * child process each, with directories of the test's own standing in for /work and /tmp:
 * everything may be written beneath those two and nowhere else (a file the child could write
 * otherwise, a new name, a removal, a truncation: EACCES), reads and executing still work
 * everywhere, /dev/null takes writes; and it fails closed: no Landlock in the kernel (its
 * syscall answered ENOSYS by a seccomp filter), a writable root that is not there, an
 * enforcement the kernel refuses, each returns an error naming the step. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule-init/landlock.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

typedef struct Dirs {
        char work[4096], tmp[4096], outside[4096];
} Dirs;

static Dirs dirs;

static bool landlock_present(void) {
        return syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) >= 1;
}

static int setup(void **state) {
        if (tfw_tmpdir_setup(state) < 0)
                return -1;
        TestDir *d = *state;
        snprintf(dirs.work, sizeof(dirs.work), "%s/work", d->path);
        snprintf(dirs.tmp, sizeof(dirs.tmp), "%s/tmp", d->path);
        snprintf(dirs.outside, sizeof(dirs.outside), "%s/outside", d->path);
        if (mkdirat(d->fd, "work", 0700) < 0 || mkdirat(d->fd, "tmp", 0700) < 0 || mkdirat(d->fd, "outside", 0700) < 0)
                return -1;
        tfw_write_file(d->fd, "outside/existing", "before", (size_t) -1);
        tfw_write_file(d->fd, "work/old", "old", (size_t) -1);
        return 0;
}

static int apply_work_tmp(void) {
        const char *w[] = { dirs.work, dirs.tmp };
        char err[256] = "";
        int r = capsule_landlock_apply(w, ELEMENTSOF(w), NULL, 0, err, sizeof(err));
        if (r < 0)
                fprintf(stderr, "landlock: %s: %s\n", err, strerror(-r));
        return r;
}

static int at(const char *dir, const char *name, int flags) {
        char p[8192];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        return open(p, flags | O_CLOEXEC, 0600);
}

static int path_op(int (*op)(const char *), const char *dir, const char *name) {
        char p[8192];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        return op(p);
}

static int mkdir0700(const char *p) {
        return mkdir(p, 0700);
}

/* A write and a new name work beneath root, a rename and a link within it. */
static int writable_works(const char *root) {
        int fd = at(root, "new", O_WRONLY | O_CREAT | O_EXCL);
        if (fd < 0 || write(fd, "x", 1) != 1)
                return 1;
        close(fd);
        char a[8192], b[8192];
        snprintf(a, sizeof(a), "%s/new", root);
        snprintf(b, sizeof(b), "%s/renamed", root);
        if (rename(a, b) < 0 || link(b, a) < 0 || path_op(mkdir0700, root, "d") < 0 || path_op(rmdir, root, "d") < 0 ||
            unlink(a) < 0 || unlink(b) < 0)
                return 2;
        return 0;
}

static int confined(void) {
        if (apply_work_tmp() < 1)
                return 10;
        if (writable_works(dirs.work) != 0)
                return 11;
        if (writable_works(dirs.tmp) != 0)
                return 12;
        /* a file of the job's given version, changed in place and truncated */
        int fd = at(dirs.work, "old", O_WRONLY | O_TRUNC);
        if (fd < 0)
                return 13;
        close(fd);
        /* nowhere else, whatever the mode says */
        if (at(dirs.outside, "new", O_WRONLY | O_CREAT) >= 0 || errno != EACCES)
                return 20;
        if (at(dirs.outside, "existing", O_WRONLY) >= 0 || errno != EACCES)
                return 21;
        if (path_op(unlink, dirs.outside, "existing") == 0 || errno != EACCES)
                return 22;
        if (path_op(mkdir0700, dirs.outside, "d") == 0 || errno != EACCES)
                return 23;
        char p[8192];
        snprintf(p, sizeof(p), "%s/existing", dirs.outside);
        if (truncate(p, 0) == 0 || errno != EACCES) /* ABI 3's right; this kernel has it */
                return 24;
        /* reading and executing still work everywhere */
        char buf[16] = "";
        fd = at(dirs.outside, "existing", O_RDONLY);
        if (fd < 0 || read(fd, buf, sizeof(buf)) != 6 || memcmp(buf, "before", 6) != 0)
                return 30;
        close(fd);
        if (access("/bin/sh", X_OK) < 0)
                return 31;
        pid_t pid = fork();
        if (pid == 0) {
                execl("/bin/sh", "sh", "-c", "exit 7", (char *) NULL);
                _exit(1);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 7)
                return 32;
        /* the harmless devices take writes */
        fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "x", 1) != 1)
                return 40;
        close(fd);
        return 0;
}

static void test_confined(void **state) {
        (void) state;
        if (!landlock_present())
                tfw_skip("this kernel has no Landlock");
        assert_int_equal(tfw_in_child(confined), 0);
        /* and the test's own process was never restricted */
        int fd = at(dirs.outside, "after", O_WRONLY | O_CREAT);
        assert_true(fd >= 0);
        close(fd);
}

/* Answer one syscall with err from now on, in this process (a stand-in kernel without it). */
static int refuse_syscall(int nr, int err) {
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(err), nr, 0);
        if (r == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                r = -errno;
        if (r == 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        return r;
}

/* The step named in the error, and no restriction: a write outside still works. */
static int failed_with(int want, const char *msg) {
        const char *w[] = { dirs.work, dirs.tmp };
        char err[256] = "";
        int r = capsule_landlock_apply(w, ELEMENTSOF(w), NULL, 0, err, sizeof(err));
        if (r != want)
                return fprintf(stderr, "returned %d (%s), not %d\n", r, err, want), 50;
        if (!strstr(err, msg))
                return fprintf(stderr, "said '%s'\n", err), 51;
        return 0;
}

static int no_landlock(void) {
        if (refuse_syscall(SCMP_SYS(landlock_create_ruleset), ENOSYS) < 0)
                return 60;
        return failed_with(-ENOSYS, "Landlock is not available");
}

static int disabled_landlock(void) {
        if (refuse_syscall(SCMP_SYS(landlock_create_ruleset), EOPNOTSUPP) < 0)
                return 60;
        return failed_with(-EOPNOTSUPP, "Landlock is not available");
}

static int no_restrict(void) {
        if (refuse_syscall(SCMP_SYS(landlock_restrict_self), EPERM) < 0)
                return 60;
        return failed_with(-EPERM, "cannot enforce");
}

static int missing_root(void) {
        const char *w[] = { dirs.work, "/nonexistent-tfw-landlock" };
        char err[256] = "";
        int r = capsule_landlock_apply(w, ELEMENTSOF(w), NULL, 0, err, sizeof(err));
        if (r != -ENOENT || !strstr(err, "'/nonexistent-tfw-landlock'"))
                return fprintf(stderr, "returned %d (%s)\n", r, err), 70;
        return 0;
}

static void test_fails_closed(void **state) {
        (void) state;
        assert_int_equal(tfw_in_child(no_landlock), 0);
        assert_int_equal(tfw_in_child(disabled_landlock), 0);
        if (!landlock_present())
                tfw_skip("this kernel has no Landlock");
        assert_int_equal(tfw_in_child(no_restrict), 0);
        assert_int_equal(tfw_in_child(missing_root), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_confined, setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_fails_closed, setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
