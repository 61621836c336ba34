/* SPDX-License-Identifier: MIT */
/* The notify hook's file must be one only root can change (orchestrator/notify.h): a hook in a
 * place someone else can write would run their code as notify.uid, outside any capsule. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "orchestrator/notify.h"
#include "tests/unit/lib/tfw-test.h"

static char path[512], dir[256];

static int setup(void **state) {
        if (tfw_tmpdir_setup(state) < 0)
                return -1;
        TestDir *d = *state;
        snprintf(dir, sizeof(dir), "%s/bin", d->path);
        snprintf(path, sizeof(path), "%s/hook", dir);
        if (mkdir(dir, 0755) < 0)
                return -1;
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        if (fd < 0 || write(fd, "#!/bin/sh\n", 10) != 10)
                return -1;
        close(fd);
        return chmod(path, 0755);
}

static int expect(int want_r, const char *want_why) {
        char why[512] = "";
        int r = notify_command_check(path, why, sizeof(why));
        assert_int_equal(r, want_r);
        if (want_why && !strstr(why, want_why))
                fail_msg("why: %s (wanted %s)", why, want_why);
        return 0;
}

static void test_root_file(void **state) {
        (void) state;
        if (geteuid() != 0)
                tfw_skip("needs root: the files must be root's");
        expect(0, NULL);
}

static void test_writable_by_others(void **state) {
        (void) state;
        if (geteuid() != 0)
                tfw_skip("needs root");
        assert_int_equal(chmod(path, 0775), 0);
        expect(-EPERM, "it must be a file of root's that nobody else can write");
        assert_int_equal(chmod(path, 0757), 0);
        expect(-EPERM, "mode 0757");
}

static void test_not_roots(void **state) {
        (void) state;
        if (geteuid() != 0)
                tfw_skip("needs root");
        assert_int_equal(chown(path, 10000, 10000), 0);
        expect(-EPERM, "owner 10000");
}

static void test_symlink(void **state) {
        (void) state;
        if (geteuid() != 0)
                tfw_skip("needs root");
        char link[512];
        snprintf(link, sizeof(link), "%s/link", dir);
        assert_int_equal(symlink(path, link), 0);
        snprintf(path, sizeof(path), "%s", link);
        expect(-EPERM, "a symbolic link");
}

static void test_directory_writable_by_others(void **state) {
        (void) state;
        if (geteuid() != 0)
                tfw_skip("needs root");
        assert_int_equal(chmod(dir, 0777), 0);
        expect(-EPERM, "someone else could put another hook there");
        assert_int_equal(chmod(dir, 0755), 0);
        assert_int_equal(chown(dir, 10000, 10000), 0);
        expect(-EPERM, "owner 10000");
}

static void test_relative(void **state) {
        (void) state;
        snprintf(path, sizeof(path), "hook");
        expect(-EINVAL, "not an absolute path");
}

int main(void) {
#define T(x) cmocka_unit_test_setup_teardown(x, setup, tfw_tmpdir_teardown)
        const struct CMUnitTest tests[] = {
                T(test_root_file), T(test_writable_by_others), T(test_not_roots), T(test_symlink),
                T(test_directory_writable_by_others), T(test_relative),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
