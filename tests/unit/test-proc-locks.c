/* SPDX-License-Identifier: MIT */
/* Whether a process holds an flock, read from /proc/locks (common/proc-locks.h): a lock held is
 * found by its inode, and by its device and inode; the same inode on another device is not
 * (flock_held_on, which the generation store's mirror asks about a lane's `wants`,
 * snapshot/gen-mirror.h); a lock let go is no longer found. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/proc-locks.h"

static void test_flock_found_by_device_and_inode(void **state) {
        (void) state;
        char path[] = "/dev/shm/tfw-test-proc-locks.XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(unlink(path), 0);
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        dev_t other = makedev(major(st.st_dev), minor(st.st_dev) + 1);

        assert_int_equal(flock_held_on(st.st_dev, st.st_ino), 0);
        assert_int_equal(flock(fd, LOCK_SH), 0);
        assert_int_equal(flock_held(st.st_ino), 1);
        assert_int_equal(flock_held_on(st.st_dev, st.st_ino), 1);
        assert_int_equal(flock_held_on(other, st.st_ino), 0);
        assert_int_equal(flock(fd, LOCK_UN), 0);
        assert_int_equal(flock_held_on(st.st_dev, st.st_ino), 0);
        close(fd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_flock_found_by_device_and_inode),
        };
        return cmocka_run_group_tests_name("proc-locks", tests, NULL, NULL);
}
