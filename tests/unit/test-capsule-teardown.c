/* SPDX-License-Identifier: MIT */
/* capsule/teardown.c (issue 11 item 7, threat 13): the teardown signals only processes of the
 * worker's uid whose argv names both the worker's runsc root and the container id, never
 * another worker's, another container's or another user's; with nothing of the container left
 * it does nothing, and it removes what runsc leaves of a container killed while created (a
 * state file cut while written too, which runsc itself cannot delete), but never a container
 * runsc still keeps a readable state for. Stand-ins for runsc are `sh -c 'read x'`
 * processes carrying the argv to match (they block on a pipe, have no child to orphan). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capsule/driver.h"
#include "capsule/teardown.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

#define CID "tfw-i11tunit-job1"

typedef struct Stand {
        pid_t pid;
        int in_w; /* its stdin: kept open so `read` blocks */
} Stand;

/* A process whose argv is "sh -c 'read x' i11t ARGS...", uid `uid` (-1: ours). Returns once its
 * argv is visible in /proc (bounded). */
static Stand stand_in(uid_t uid, const char *const *args) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char *argv[16] = {(char *) "sh", (char *) "-c", (char *) "read x", (char *) "i11t"};
                size_t n = 4;
                for (; *args && n < ELEMENTSOF(argv) - 1; args++)
                        argv[n++] = (char *) *args;
                argv[n] = NULL;
                if (dup2(p[0], 0) < 0)
                        _exit(126);
                if (uid != (uid_t) -1 && (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
                                          setresuid(uid, uid, uid) < 0))
                        _exit(126);
                execv("/bin/sh", argv);
                _exit(127);
        }
        close(p[0]);
        /* Until it has exec'd sh: its argv then holds "read x". */
        char path[64], buf[4096];
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int) pid);
        for (int i = 0; i < 5000; i++) {
                _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
                ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
                if (k > 0 && memmem(buf, (size_t) k, "read x", 6))
                        break;
                nanosleep(&(struct timespec) {.tv_nsec = 1000 * 1000}, NULL);
        }
        return (Stand) {.pid = pid, .in_w = p[1]};
}

/* Was it SIGKILLed (reaped), or is it still alive? */
static bool was_killed(Stand *s) {
        int st;
        pid_t w = waitpid(s->pid, &st, 0);
        assert_int_equal(w, s->pid);
        s->pid = 0;
        return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

static bool alive(const Stand *s) {
        int st;
        return waitpid(s->pid, &st, WNOHANG) == 0;
}

static void stand_end(Stand *s) {
        if (s->pid > 0) {
                (void) kill(s->pid, SIGKILL);
                (void) waitpid(s->pid, NULL, 0);
        }
        close(s->in_w);
}

static void test_kills_only_this_container(void **state) {
        TestDir *d = *state;
        char root[600], other[600], root_eq[620];
        snprintf(root, sizeof(root), "%s/runsc", d->path);
        snprintf(other, sizeof(other), "%s/runsc-other", d->path);
        snprintf(root_eq, sizeof(root_eq), "--root=%s", root);

        Stand front = stand_in((uid_t) -1, (const char *[]) {"--root", root, "run", "--bundle", "b", CID, NULL});
        Stand sandbox = stand_in((uid_t) -1, (const char *[]) {root_eq, "boot", "--bundle=b", CID, NULL});
        Stand other_root = stand_in((uid_t) -1, (const char *[]) {"--root", other, "run", CID, NULL});
        Stand other_id = stand_in((uid_t) -1, (const char *[]) {"--root", root, "run", CID "x", NULL});
        Stand no_flag = stand_in((uid_t) -1, (const char *[]) {root, CID, NULL});
        Stand prefix = stand_in((uid_t) -1, (const char *[]) {"--root", root, "run", "tfw-i11tunit-job", NULL});

        assert_int_equal(capsule_kill_runtime_processes(root, CID, 0), 2);
        assert_true(was_killed(&front));
        assert_true(was_killed(&sandbox));
        assert_true(alive(&other_root));
        assert_true(alive(&other_id));
        assert_true(alive(&no_flag));
        assert_true(alive(&prefix));
        /* Nothing of it is left: a second pass finds nothing. */
        assert_int_equal(capsule_kill_runtime_processes(root, CID, 0), 0);
        assert_true(alive(&other_root));

        Stand spared = stand_in((uid_t) -1, (const char *[]) {"--root", root, "delete", "--force", CID, NULL});
        assert_int_equal(capsule_kill_runtime_processes(root, CID, spared.pid), 0);
        assert_true(alive(&spared));

        Stand *all[] = {&front, &sandbox, &other_root, &other_id, &no_flag, &prefix, &spared};
        for (size_t i = 0; i < ELEMENTSOF(all); i++)
                stand_end(all[i]);
}

/* Another user's process with the same argv is never signalled. */
static void test_other_uid_untouched(void **state) {
        TestDir *d = *state;
        char root[600];
        if (geteuid() != 0)
                tfw_skip("needs root to start a process of another uid");
        snprintf(root, sizeof(root), "%s/runsc", d->path);
        Stand theirs = stand_in(65534, (const char *[]) {"--root", root, "run", CID, NULL});
        assert_true(alive(&theirs));
        assert_int_equal(capsule_kill_runtime_processes(root, CID, 0), 0);
        assert_true(alive(&theirs));
        stand_end(&theirs);
}

static bool exists_at(int dir_fd, const char *name) {
        return faccessat(dir_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The runsc driver's teardown with nothing to kill: the state runsc leaves of a container it was
 * killed while creating is removed (its lock and socket, a state file it was cut writing); a
 * container runsc still has a readable state file for is not touched (-EBUSY). The stand-in runsc is /bin/true: `delete` does nothing. */
static void test_teardown_leftovers(void **state) {
        TestDir *d = *state;
        char root[600];
        snprintf(root, sizeof(root), "%s/runsc", d->path);
        assert_int_equal(mkdirat(d->fd, "runsc", 0700), 0);
        _cleanup_close_ int rfd = open_dir_at(d->fd, "runsc");
        assert_true(rfd >= 0);
        char name[] = "i11tunit";
        Runsc rt = {.binary = (char *) "/bin/true", .root = root, .platform = (char *) "systrap",
                    .worker_name = name};
        CapsuleTeardown t = {};
        TfwError e = {0};

        assert_int_equal(capsule_teardown(NULL, NULL, CID, 0, &t, &e), -EINVAL);
        assert_int_equal(capsule_teardown(&rt, NULL, "../x", 0, &t, &e), -EINVAL);

        /* Nothing of it exists: nothing to do. */
        assert_int_equal(capsule_teardown(&rt, NULL, CID, 0, &t, &e), 0);
        assert_int_equal(t.killed, 0);
        assert_true(t.deleted);
        assert_true(t.cgroup_removed);

        tfw_write_file(rfd, CID "_sandbox:" CID ".lock", "", 0);
        tfw_write_file(rfd, "runsc-" CID ".sock", "", 0);
        tfw_write_file(rfd, "tfw-i11tunit-other_sandbox:x.lock", "", 0);
        assert_int_equal(capsule_teardown(&rt, NULL, CID, 0, &t, &e), 0);
        assert_false(exists_at(rfd, CID "_sandbox:" CID ".lock"));
        assert_false(exists_at(rfd, "runsc-" CID ".sock"));
        assert_true(exists_at(rfd, "tfw-i11tunit-other_sandbox:x.lock"));

        /* A state file runsc was killed while writing (it truncates, then writes): empty, or
         * cut. runsc's own delete fails on it for good and `runsc list` still lists it (the
         * stand-in's delete does nothing, as the real one then does): removed, with its lock. */
        static const char *const garbled[] = { "", "{\"id\":\"" CID "\",\"sta", "null" };
        for (size_t i = 0; i < ELEMENTSOF(garbled); i++) {
                tfw_write_file(rfd, CID "_sandbox:" CID ".lock", "", 0);
                tfw_write_file(rfd, CID "_sandbox:" CID ".state", garbled[i], strlen(garbled[i]));
                tfw_write_file(rfd, "tfw-i11tunit-other_sandbox:x.state", "", 0);
                assert_int_equal(capsule_teardown(&rt, NULL, CID, 0, &t, &e), 0);
                assert_true(t.found);
                assert_true(t.deleted);
                assert_false(exists_at(rfd, CID "_sandbox:" CID ".state"));
                assert_false(exists_at(rfd, CID "_sandbox:" CID ".lock"));
                /* Another container's, garbled too, is not this teardown's. */
                assert_true(exists_at(rfd, "tfw-i11tunit-other_sandbox:x.state"));
        }

        /* The runsc driver's removal of a record (a job's, once its result is out) too: its
         * `runsc delete` alone failed on such a file, which stayed listed while the worker ran. */
        CapsuleDriver drv = {.ops = capsule_driver_ops(DRIVER_RUNSC), .runsc = rt};
        tfw_write_file(rfd, CID "_sandbox:" CID ".lock", "", 0);
        tfw_write_file(rfd, CID "_sandbox:" CID ".state", "", 0);
        assert_int_equal(drv.ops->remove(&drv, CID), 0);
        assert_false(exists_at(rfd, CID "_sandbox:" CID ".state"));
        assert_false(exists_at(rfd, CID "_sandbox:" CID ".lock"));

        tfw_write_file(rfd, CID "_sandbox:" CID ".lock", "", 0);
        tfw_write_file(rfd, CID "_sandbox:" CID ".state", "{}", 2);
        assert_int_equal(capsule_teardown(&rt, NULL, CID, 0, &t, &e), -EBUSY);
        assert_string_equal(e.code, "capsule_teardown");
        assert_non_null(strstr(e.message, "runsc still keeps its state"));
        assert_false(t.deleted);
        assert_true(exists_at(rfd, CID "_sandbox:" CID ".lock"));
        assert_true(exists_at(rfd, CID "_sandbox:" CID ".state"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_kills_only_this_container, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_other_uid_untouched, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_teardown_leftovers, tfw_tmpdir_setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
