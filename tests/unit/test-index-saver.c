/* SPDX-License-Identifier: MIT */
/* A generation's index written on a thread of its own (snapshot/index-saver.h): the file is the
 * index given, whole; a lock handed over is closed by the thread once the index is written, and
 * not before; a child forked while the thread runs never waits for a thread it does not have
 * (it would hang), and says so. The thread is held back by the test's gate. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "snapshot/index-saver.h"
#include "tests/unit/lib/tfw-test.h"

static int gate[2] = { -EBADF, -EBADF };

static int setup(void **state) {
        if (pipe2(gate, O_CLOEXEC) < 0)
                return -1;
        index_saver_test_gate_fd = gate[0];
        return tfw_tmpdir_setup(state);
}

static int teardown(void **state) {
        /* A failed test must not leave the thread waiting. */
        gate[1] = safe_close(gate[1]);
        index_saver_test_gate_fd = -1;
        gate[0] = safe_close(gate[0]);
        return tfw_tmpdir_teardown(state);
}

/* An index of three entries: a file, a directory and a file in it. */
static GenIndex *small_index(void) {
        GenIndex *x = NULL;
        assert_int_equal(gen_index_new(1000, 12345, 12345, &x), 0);
        GenEntry *f = gen_dir_append(x, &x->root, "a", 1);
        assert_non_null(f);
        f->id.mode = S_IFREG | 0644;
        f->id.size = 3;
        GenEntry *d = gen_dir_append(x, &x->root, "d", 1);
        assert_non_null(d);
        d->id.mode = S_IFDIR | 0755;
        assert_int_equal(gen_entry_make_dir(d), 0);
        GenEntry *g = gen_dir_append(x, d->dir, "g", 1);
        assert_non_null(g);
        g->id.mode = S_IFREG | 0600;
        assert_int_equal(gen_dir_seal(d->dir), 0);
        assert_int_equal(gen_dir_seal(&x->root), 0);
        return x;
}

/* Has the far end of the pipe whose read end is fd been closed? (waits at most ms) */
static bool closed_within(int fd, int ms) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        return poll(&p, 1, ms) == 1 && (p.revents & POLLHUP);
}

static void test_written_then_lock_let_go(void **state) {
        TestDir *d = *state;
        TfwError e = {};
        IndexSaver *s = NULL;
        int lock[2];
        assert_int_equal(pipe2(lock, O_CLOEXEC), 0);
        assert_int_equal(index_saver_start(small_index(), d->fd, "index", &s, &e), 0);
        assert_non_null(s);
        index_saver_hand_lock(s, lock[1]);
        /* Held back: no index, the lock held. */
        assert_false(closed_within(lock[0], 0));
        assert_int_equal(faccessat(d->fd, "index", F_OK, 0), -1);
        assert_int_equal(write(gate[1], "x", 1), 1);
        /* The thread lets the lock go itself, before anyone waits for it. */
        assert_true(closed_within(lock[0], 30000));
        assert_int_equal(faccessat(d->fd, "index", F_OK, 0), 0);
        assert_int_equal(index_saver_finish(s, &e), 0);
        GenIndex *x = NULL;
        assert_int_equal(gen_index_load(d->fd, "index", 100, &x, &e), 0);
        assert_int_equal(x->entries, 3);
        assert_int_equal(x->owner_uid, 1000);
        assert_non_null(gen_dir_find(&x->root, "d", 1));
        gen_index_free(x);
        safe_close(lock[0]);
}

/* A child forked while the thread runs: finishing there returns ECHILD at once (no thread to
 * join: a join would hang on a thread id that is not the child's), the parent's save unharmed. */
static void test_child_does_not_wait(void **state) {
        TestDir *d = *state;
        TfwError e = {};
        IndexSaver *s = NULL;
        assert_int_equal(index_saver_start(small_index(), d->fd, "index", &s, &e), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                TfwError ce = {};
                _exit(index_saver_finish(s, &ce) == -ECHILD ? 0 : 1);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(write(gate[1], "x", 1), 1);
        assert_int_equal(index_saver_finish(s, &e), 0);
        assert_int_equal(faccessat(d->fd, "index", F_OK, 0), 0);
}

/* A write that fails (the directory is not one) is the finish's error; no index. */
static void test_failure_reported(void **state) {
        TestDir *d = *state;
        TfwError e = {};
        IndexSaver *s = NULL;
        assert_int_equal(mkdirat(d->fd, "gone", 0700), 0);
        int dfd = openat(d->fd, "gone", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        assert_int_equal(unlinkat(d->fd, "gone", AT_REMOVEDIR), 0);
        assert_int_equal(write(gate[1], "x", 1), 1);
        assert_int_equal(index_saver_start(small_index(), dfd, "index", &s, &e), 0);
        assert_int_equal(index_saver_finish(s, &e), -ENOENT);
        assert_non_null(e.code);
        assert_non_null(strstr(e.message, "'index'"));
        safe_close(dfd);
}

static void die_now(void) {
        raise(SIGKILL);
}

/* A process killed while it writes the index (the saver runs beside the job, which a cancel or
 * the daemon's death may kill) leaves nothing in the directory: the bytes go to an unnamed file
 * (O_TMPFILE), named only once whole. With a named temporary file, 9 MB would be left in the
 * store for every such kill. */
static void test_killed_while_writing_leaves_nothing(void **state) {
        TestDir *d = *state;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                TfwError ce = {};
                GenIndex *x = small_index();
                gen_index_test_saving = die_now;
                (void) gen_index_save(x, d->fd, "index", &ce);
                _exit(3);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        _cleanup_closedir_ DIR *dir = opendir(d->path);
        assert_non_null(dir);
        struct dirent *de;
        while ((de = readdir(dir)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
                        fail_msg("left in the directory: '%s'", de->d_name);
}

int main(void) {
        if (getenv("TFW_TEST_FILTER"))
                cmocka_set_test_filter(getenv("TFW_TEST_FILTER"));
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_written_then_lock_let_go, setup, teardown),
                cmocka_unit_test_setup_teardown(test_child_does_not_wait, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failure_reported, setup, teardown),
                cmocka_unit_test_setup_teardown(test_killed_while_writing_leaves_nothing, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
