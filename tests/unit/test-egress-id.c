/* SPDX-License-Identifier: MIT */
/* Each egress proxy's identity (capsule/egress-id.h, issue 33 finding 4): an id held by one
 * proxy is never given to another, not even by another worker (another process, its own open of
 * the lock file); an id that names a user or group is never given; a released id, or one whose
 * holder died, is given again; one lock file for all; the range is the one the configuration
 * refuses. Each test in a fresh directory of its own as the lock directory, with ranges small
 * enough to fill. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/egress-id.h"
#include "common/macro.h"
#include "parser/config.h"
#include "tests/unit/lib/tfw-test.h"

/* Ids no user or group of a test machine has: the proxies' own range. */
#define FREE_ID CONFIG_EGRESS_ID_FIRST

/* Is the byte of uid locked, as another holder would find it (a file description of our own)? */
static bool id_locked(int dir_fd, uid_t uid) {
        int fd = openat(dir_fd, EGRESS_ID_LOCK, O_RDWR | O_CLOEXEC);
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = (off_t) (uid - FREE_ID), .l_len = 1 };
        assert_true(fd >= 0);
        assert_int_equal(fcntl(fd, F_OFD_GETLK, &fl), 0);
        close(fd);
        return fl.l_type != F_UNLCK;
}

/* Two takes from a range of two: each its own id; a third finds none and says why. */
static void test_each_its_own(void **state) {
        TestDir *d = *state;
        EgressId a, b, c;
        TfwError e = {0};

        egress_id_init(&c);
        assert_int_equal(egress_id_take_at(d->fd, FREE_ID, 2, &a, &e), 0);
        assert_int_equal(egress_id_take_at(d->fd, FREE_ID, 2, &b, &e), 0);
        assert_int_not_equal(a.uid, b.uid);
        assert_true(a.uid >= FREE_ID && a.uid <= FREE_ID + 1 && b.uid >= FREE_ID && b.uid <= FREE_ID + 1);
        assert_true(id_locked(d->fd, a.uid) && id_locked(d->fd, b.uid));
        assert_int_equal(egress_id_take_at(d->fd, FREE_ID, 2, &c, &e), -EBUSY);
        assert_string_equal(e.code, "capsule_setup");
        if (!strstr(e.message, "no free proxy id") || !strstr(e.message, "held by other proxies"))
                fail_msg("message: %s", e.message);
        assert_true(c.lock_fd < 0);
        /* Released: its lock goes, and the id is given again. */
        uid_t freed = a.uid;
        egress_id_release(&a);
        assert_false(id_locked(d->fd, freed));
        assert_true(id_locked(d->fd, b.uid));
        egress_id_release(&a);   /* idempotent */
        assert_int_equal(egress_id_take_at(d->fd, FREE_ID, 2, &c, &e), 0);
        assert_int_equal(c.uid, freed);
        egress_id_release(&b);
        egress_id_release(&c);
}

/* A proxy the kernel would not give back: its id abandoned stays locked, whatever releases it
 * later (egress.c's proxy_left, then egress_proxy_kill's release at the capsule's end). */
static void test_abandoned_stays_held(void **state) {
        TestDir *d = *state;
        EgressId a, c;
        TfwError e = {0};

        assert_int_equal(egress_id_take_at(d->fd, FREE_ID, 1, &a, &e), 0);
        uid_t held = a.uid;
        egress_id_abandon(&a);
        egress_id_release(&a);
        assert_true(id_locked(d->fd, held));
        assert_int_equal(egress_id_take_at(d->fd, FREE_ID, 1, &c, &e), -EBUSY);
}

/* Another worker: a process of its own holding the lock (its own open of the file) keeps the id;
 * when it dies without releasing anything its lock goes with it and the id is given again. */
static void test_other_worker(void **state) {
        TestDir *d = *state;
        int ready[2], hold[2];
        EgressId a;
        TfwError e = {0};

        assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
        assert_int_equal(pipe2(hold, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                EgressId mine;
                char b;
                close(ready[0]);
                close(hold[1]);
                if (egress_id_take_at(d->fd, FREE_ID, 1, &mine, NULL) < 0 || write(ready[1], "x", 1) != 1)
                        _exit(1);
                /* Until the parent closes its end (or kills it). */
                _exit(read(hold[0], &b, 1) < 0 ? 1 : 0);
        }
        close(ready[1]);
        close(hold[0]);
        char b;
        assert_int_equal(read(ready[0], &b, 1), 1);
        assert_int_equal(egress_id_take_at(d->fd, FREE_ID, 1, &a, &e), -EBUSY);
        assert_true(id_locked(d->fd, FREE_ID));
        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        assert_false(id_locked(d->fd, FREE_ID));
        assert_int_equal(egress_id_take_at(d->fd, FREE_ID, 1, &a, &e), 0);
        assert_int_equal(a.uid, FREE_ID);
        egress_id_release(&a);
        close(ready[0]);
        close(hold[1]);
}

/* An id some user or group has is never given, and its byte is not left locked. */
static void test_named_ids_refused(void **state) {
        TestDir *d = *state;
        EgressId a;
        TfwError e = {0};

        /* root: in every user database there is (byte 0 of a range that starts at 0). */
        assert_non_null(getpwuid(0));
        assert_int_equal(egress_id_take_at(d->fd, 0, 1, &a, &e), -EBUSY);
        if (!strstr(e.message, "1 tried, 0 held by other proxies, 1 the id of a user or group"))
                fail_msg("message: %s", e.message);
        int fd = openat(d->fd, EGRESS_ID_LOCK, O_RDWR | O_CLOEXEC);
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };
        assert_true(fd >= 0);
        assert_int_equal(fcntl(fd, F_OFD_GETLK, &fl), 0);
        assert_int_equal(fl.l_type, F_UNLCK);
        close(fd);
        /* A group alone is enough: find a gid that no user has. */
        gid_t only_group = 0;
        for (gid_t g = 1; g < 1000 && !only_group; g++)
                if (getgrgid(g) && !getpwuid(g))
                        only_group = g;
        if (!only_group)
                tfw_skip("no group below 1000 without a user of the same id on this machine");
        assert_int_equal(egress_id_take_at(d->fd, only_group, 1, &a, &e), -EBUSY);
        if (!strstr(e.message, "1 tried, 0 held by other proxies, 1 the id of a user or group"))
                fail_msg("message: %s", e.message);
}

/* One lock file for every id, never unlinked: many ids held at once, one file, and what is not
 * a regular file is refused. */
static void test_one_lock_file(void **state) {
        TestDir *d = *state;
        EgressId ids[16];
        TfwError e = {0};
        struct stat st;

        for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                assert_int_equal(egress_id_take_at(d->fd, FREE_ID, 16, &ids[i], &e), 0);
        for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                for (size_t j = i + 1; j < ELEMENTSOF(ids); j++)
                        assert_int_not_equal(ids[i].uid, ids[j].uid);
        for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                egress_id_release(&ids[i]);
        assert_int_equal(fstatat(d->fd, EGRESS_ID_LOCK, &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISREG(st.st_mode) && st.st_size == 0 && (st.st_mode & 07777) == 0600);
        assert_int_equal(unlinkat(d->fd, EGRESS_ID_LOCK, 0), 0);
        assert_int_equal(symlinkat("/dev/null", d->fd, EGRESS_ID_LOCK), 0);
        assert_true(egress_id_take_at(d->fd, FREE_ID, 16, &ids[0], &e) < 0);
        assert_int_equal(unlinkat(d->fd, EGRESS_ID_LOCK, 0), 0);
        assert_int_equal(mkfifoat(d->fd, EGRESS_ID_LOCK, 0600), 0);
        assert_int_equal(egress_id_take_at(d->fd, FREE_ID, 16, &ids[0], &e), -EBADF);
        assert_non_null(strstr(e.message, "is not a regular file"));
}

/* The range: 65536 ids below 2^31, outside every range systemd names, and the configuration
 * refuses each of its ends and nothing beside them. */
/* A range no larger than the tries is tried whole: its last free id is always found (random
 * candidates missed it about a third of the time for 64 of 64). */
static void test_small_range_whole(void **state) {
        TestDir *d = *state;
        EgressId ids[EGRESS_ID_TRIES];
        TfwError e = {0};

        for (unsigned round = 0; round < 10; round++) {
                for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                        if (egress_id_take_at(d->fd, FREE_ID, EGRESS_ID_TRIES, &ids[i], &e) != 0)
                                fail_msg("round %u, id %zu of %d: %s", round, i + 1, EGRESS_ID_TRIES, e.message);
                assert_int_equal(egress_id_take_at(d->fd, FREE_ID, EGRESS_ID_TRIES, &ids[0], &e), -EBUSY);
                for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                        egress_id_release(&ids[i]);
        }
}

static void test_range(void **state) {
        (void) state;
        assert_true(CONFIG_EGRESS_ID_FIRST > 1879048191U);   /* above nspawn's container ranges */
        assert_true(CONFIG_EGRESS_ID_LAST < 2147352576U);    /* below systemd's foreign range and 2^31 */
        assert_int_equal(CONFIG_EGRESS_ID_COUNT, 65536);
        assert_true(config_id_is_egress(CONFIG_EGRESS_ID_FIRST) && config_id_is_egress(CONFIG_EGRESS_ID_LAST));
        assert_false(config_id_is_egress(CONFIG_EGRESS_ID_FIRST - 1) ||
                     config_id_is_egress(CONFIG_EGRESS_ID_LAST + 1));
        assert_false(config_id_is_egress(CONFIG_NOTIFY_DEFAULT_ID));
        TfwError e = {0};
        EgressId a;
        assert_int_equal(egress_id_take_at(-1, 1, 0, &a, &e), -EINVAL);
}

#define T(f) cmocka_unit_test_setup_teardown(f, tfw_tmpdir_setup, tfw_tmpdir_teardown)

int main(void) {
        const struct CMUnitTest tests[] = {
                T(test_each_its_own),
                T(test_abandoned_stays_held),
                T(test_other_worker),
                T(test_named_ids_refused),
                T(test_one_lock_file),
                T(test_small_range_whole),
                T(test_range),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
