/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "tfw-test.h"

int tfw_must_work(void) {
        const char *e = getenv("TENTAFLAKE_MUST_WORK");
        return e && streq(e, "1");
}

/* Where the test directories go. As root, below TFW_TEST_ROOT (default /run/tentaflake-tests,
 * made root's 0755): tests that open a worker's state_dir and results_dir there need ancestors
 * that only root can write, which /tmp is not (common/root-dir.h). Otherwise TMPDIR or /tmp. */
static const char *test_base(void) {
        const char *base = getenv("TFW_TEST_ROOT");
        if (geteuid() == 0) {
                if (!base || !*base)
                        base = "/run/tentaflake-tests";
                if (mkdir(base, 0755) < 0 && errno != EEXIST)
                        return NULL;
                if (chown(base, 0, 0) < 0 || chmod(base, 0755) < 0)
                        return NULL;
                return base;
        }
        base = getenv("TMPDIR");
        return base && *base ? base : "/tmp";
}

int tfw_tmpdir_setup(void **state) {
        TestDir *d = calloc(1, sizeof(*d));
        const char *base = test_base();
        if (!d || !base) {
                free(d);
                return -1;
        }
        d->fd = mkdtemp_fd(base, "tfw-test-", &d->path);
        if (d->fd < 0) {
                free(d);
                return -1;
        }
        *state = d;
        return 0;
}

int tfw_tmpdir_teardown(void **state) {
        TestDir *d = *state;
        if (!d)
                return 0;
        safe_close(d->fd);
        (void) rm_rf_at(AT_FDCWD, d->path);
        free(d->path);
        free(d);
        *state = NULL;
        return 0;
}

void tfw_write_file(int dir_fd, const char *name, const char *data, size_t len) {
        if (len == (size_t) -1)
                len = strlen(data);
        _cleanup_close_ int fd =
                openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write_all(fd, data, len), 0);
}

int tfw_open_fixture(const char *rel) {
        char path[4096];
        snprintf(path, sizeof(path), "tests/data/%s", rel);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                fail_msg("fixture '%s': %s", path, strerror(errno));
        return fd;
}

char *tfw_read_fixture(const char *rel, size_t *ret_len) {
        _cleanup_close_ int fd = tfw_open_fixture(rel);
        char *buf = NULL;
        size_t n = 0;
        int r = read_full_fd_bounded(fd, 16 << 20, &buf, &n);
        if (r < 0)
                fail_msg("fixture '%s': %s", rel, strerror(-r));
        if (ret_len)
                *ret_len = n;
        return buf;
}

int tfw_in_child(int (*fn)(void)) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(fn());
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        return WEXITSTATUS(st);
}
