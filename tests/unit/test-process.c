/* SPDX-License-Identifier: MIT */
/* common/process.c's waits (threat 13, issue 33 finding 5: a lane waited forever in waitpid on
 * a runtime its teardown had missed): a wait ends by its bound whatever the child does, a child
 * is killed only where the caller asks for it, and by its pidfd when one is given. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/process.h"
#include "common/time-util.h"
#include "tests/unit/lib/tfw-test.h"

/* A child that exits with `code` at once, or (code < 0) pauses until killed. */
static pid_t child(int code) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (code >= 0)
                        _exit(code);
                for (;;)
                        pause();
        }
        return pid;
}

static bool is_killed(int st) {
        return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

static void test_wait_reaps(void **state) {
        (void) state;
        int st = -1;

        /* With a pidfd (the wait sleeps until the child ends) and without (it looks). */
        pid_t pid = child(3);
        _cleanup_close_ int fd = pidfd_open_pid(pid);
        assert_true(fd >= 0);
        assert_int_equal(process_wait(pid, fd, 30 * USEC_PER_SEC, &st), 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);

        pid = child(4);
        assert_int_equal(process_wait(pid, -EBADF, 30 * USEC_PER_SEC, &st), 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 4);

        /* Not (or no longer) a child of ours: said, not waited for. */
        assert_int_equal(process_wait(pid, -EBADF, 30 * USEC_PER_SEC, &st), -ECHILD);
}

static void test_wait_bounded_and_harmless(void **state) {
        (void) state;
        int st = -1;
        pid_t pid = child(-1);
        _cleanup_close_ int fd = pidfd_open_pid(pid);
        assert_true(fd >= 0);

        /* A child that does not end: the wait ends by its bound and sends it nothing. */
        assert_int_equal(process_wait(pid, fd, 0, &st), -ETIMEDOUT);
        assert_int_equal(process_wait(pid, fd, 50 * USEC_PER_MSEC, &st), -ETIMEDOUT);
        assert_int_equal(process_wait(pid, -EBADF, 50 * USEC_PER_MSEC, &st), -ETIMEDOUT);
        assert_int_equal(waitpid(pid, &st, WNOHANG), 0);

        /* Killed through its pidfd and reaped. */
        assert_int_equal(process_kill_and_reap(pid, fd, &st), 0);
        assert_true(is_killed(st));
}

static void test_kill_by_pid(void **state) {
        (void) state;
        int st = -1;
        /* Without a pidfd: by its pid (a child not reaped keeps its number). */
        pid_t pid = child(-1);
        assert_int_equal(process_kill_and_reap(pid, -EBADF, &st), 0);
        assert_true(is_killed(st));
}

static void test_waitpid_bounded(void **state) {
        (void) state;
        int st = -1;

        pid_t pid = child(0);
        assert_int_equal(waitpid_bounded(pid, 30 * USEC_PER_SEC, &st), 0);
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

        /* Past its time: killed and reaped, and said so. */
        pid = child(-1);
        assert_int_equal(waitpid_bounded(pid, 50 * USEC_PER_MSEC, &st), -ETIMEDOUT);
        assert_true(is_killed(st));
        assert_int_equal(waitpid(pid, &st, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
}

/* A pidfd names the process it was opened on and no other: once that one is reaped, a signal
 * through it fails rather than reach whoever gets its number. */
static void test_pidfd_names_one_process(void **state) {
        (void) state;
        int st;
        pid_t pid = child(0);
        _cleanup_close_ int fd = pidfd_open_pid(pid);
        assert_true(fd >= 0);
        assert_int_equal(process_wait(pid, fd, 30 * USEC_PER_SEC, &st), 0);
        assert_int_equal(pidfd_signal(fd, SIGKILL), -ESRCH);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_wait_reaps),
                cmocka_unit_test(test_wait_bounded_and_harmless),
                cmocka_unit_test(test_kill_by_pid),
                cmocka_unit_test(test_waitpid_bounded),
                cmocka_unit_test(test_pidfd_names_one_process),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
