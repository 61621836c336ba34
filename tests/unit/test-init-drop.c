/* SPDX-License-Identifier: MIT */
/* capsule/init-drop.c: what the capsule's init gives up after mounting the job's layer, proved
 * on the host (root) in a child process each: mount(2) works before the filter and it and umount2(2) are refused
 * (EPERM) after it, in the process and in what it starts; the drop leaves the given ids, no
 * group, no capability in any set, not dumpable, and root cannot be had back; the layer
 * argument takes only "UID:GID" with neither 0; the bounding and ambient sets dropped first (while
 * a capsule started ahead waits) leave init its capabilities, an ambient one raised before is
 * gone, and the whole drop is still complete; the mount filter built ahead refuses nothing
 * until it is loaded. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/init-drop.h"
#include "capsule/protocol.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

static int try_mount(const char *dir) {
        if (mount("none", dir, "tmpfs", 0, "size=64k") < 0)
                return -errno;
        (void) umount2(dir, MNT_DETACH);
        return 0;
}

static int mount_refused_after_filter(void) {
        char dir[] = "/tmp/tfw-init-drop.XXXXXX";
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return 10;
        if (!mkdtemp(dir))
                return 11;
        int r = 0;
        /* Built ahead (a capsule started ahead does it while it waits), it refuses nothing yet. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || capsule_init_prepare_refuse_mount() < 0)
                r = 18;
        else if (try_mount(dir) != 0) /* root may mount in its own namespace: the test can tell */
                r = 12;
        else if (mount("none", dir, "tmpfs", 0, "size=64k") < 0)
                r = 16;
        else if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || capsule_init_refuse_mount() < 0)
                r = 13;
        else if (umount2(dir, MNT_DETACH) == 0 || errno != EPERM) /* umount2 too */
                r = 17;
        else if (try_mount(dir) != -EPERM)
                r = 14;
        else {
                /* ... and in a process it starts. */
                pid_t c = fork();
                if (c == 0)
                        _exit(try_mount(dir) == -EPERM ? 0 : 1);
                int st;
                if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                        r = 15;
        }
        (void) rmdir(dir);
        return r;
}

static void test_refuse_mount(void **state) {
        (void) state;
        if (geteuid() != 0)
                tfw_skip("needs root");
        assert_int_equal(tfw_in_child(mount_refused_after_filter), 0);
}

static int status_line_is(const char *key, const char *want) {
        char line[256];
        int found = 0;
        FILE *f = fopen("/proc/self/status", "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ':') {
                        char *v = line + strlen(key) + 1;
                        v += strspn(v, " \t");
                        v[strcspn(v, "\n")] = 0;
                        found = streq(v, want);
                }
        fclose(f);
        return found;
}

static int dropped(void) {
        if (capsule_init_drop(10000, 10001) != 0)
                return 20;
        if (!status_line_is("Uid", "10000\t10000\t10000\t10000") ||
            !status_line_is("Gid", "10001\t10001\t10001\t10001"))
                return 21;
        if (!status_line_is("Groups", ""))
                return 22;
        const char *sets[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
        for (size_t i = 0; i < ELEMENTSOF(sets); i++)
                if (!status_line_is(sets[i], "0000000000000000"))
                        return 23 + (int) i;
        if (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
                return 30;
        if (setresuid(0, 0, 0) == 0 || setuid(0) == 0)
                return 31;
        return 0;
}

static void test_drop(void **state) {
        (void) state;
        if (geteuid() != 0)
                tfw_skip("needs root");
        assert_int_equal(tfw_in_child(dropped), 0);
}

/* An ambient capability raised: one in the permitted set made inheritable too, then raised. */
static int raise_ambient(int cap) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2];
        if (syscall(SYS_capget, &h, d) < 0)
                return -errno;
        d[cap / 32].inheritable |= 1u << (cap % 32);
        if (syscall(SYS_capset, &h, d) < 0 || prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
                return -errno;
        return 0;
}

/* As a capsule started ahead does it: the bounding and ambient sets while it waits (init keeps
 * its own capabilities: it still mounts), then the whole drop, which ends where one drop ends. An
 * ambient capability raised before is gone at once. */
static int dropped_ahead_first(void) {
        char dir[] = "/tmp/tfw-init-drop.XXXXXX";
        if (raise_ambient(CAP_NET_RAW) < 0 || status_line_is("CapAmb", "0000000000000000"))
                return 54;
        if (capsule_init_drop_ahead() != 0)
                return 50;
        if (!status_line_is("CapBnd", "0000000000000000") || !status_line_is("CapAmb", "0000000000000000") ||
            status_line_is("CapEff", "0000000000000000"))
                return 51;
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || !mkdtemp(dir))
                return 52;
        int r = try_mount(dir);
        (void) rmdir(dir);
        if (r != 0)
                return 53;
        return dropped();
}

static void test_drop_ahead_first(void **state) {
        (void) state;
        if (geteuid() != 0)
                tfw_skip("needs root");
        assert_int_equal(tfw_in_child(dropped_ahead_first), 0);
}

static int zero_refused(void) {
        if (capsule_init_drop(0, 10001) != -EINVAL || capsule_init_drop(10000, 0) != -EINVAL)
                return 40;
        return geteuid() == 0 ? 0 : 41; /* nothing was given up */
}

static void test_drop_refuses_root(void **state) {
        (void) state;
        if (geteuid() != 0)
                tfw_skip("needs root");
        assert_int_equal(tfw_in_child(zero_refused), 0);
}

static void test_parse_layer_arg(void **state) {
        (void) state;
        uid_t u = 0;
        gid_t g = 0;
        assert_int_equal(capsule_init_parse_layer_arg(CAPSULE_LAYER_ARG "10000:10001", &u, &g), 0);
        assert_int_equal(u, 10000);
        assert_int_equal(g, 10001);
        const char *bad[] = { CAPSULE_LAYER_ARG "0:1", CAPSULE_LAYER_ARG "1:0", CAPSULE_LAYER_ARG "1",
                              CAPSULE_LAYER_ARG "1:", CAPSULE_LAYER_ARG ":1", CAPSULE_LAYER_ARG "-1:1",
                              CAPSULE_LAYER_ARG "1:2x", CAPSULE_LAYER_ARG "4294967295:1",
                              CAPSULE_LAYER_ARG "99999999999999999999:1", "--layer1:1", "1:1", "" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (capsule_init_parse_layer_arg(bad[i], &u, &g) != -EINVAL)
                        fail_msg("'%s' was taken", bad[i]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_refuse_mount),
                cmocka_unit_test(test_drop),
                cmocka_unit_test(test_drop_ahead_first),
                cmocka_unit_test(test_drop_refuses_root),
                cmocka_unit_test(test_parse_layer_arg),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
