/* SPDX-License-Identifier: MIT */
/* capsule/cgroup.c on the real cgroup filesystem (root): the limits land in the kernel's
 * files, a process entered into the cgroup is accounted there, an OOM kill and a refused fork
 * are read back from the kernel's own counters, and destroy leaves no cgroup and no process.
 * Threat 5 (limits that silently do not apply): every value is read back, not assumed. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/cgroup.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

/* "tentaflake-worker-cgtest-<pid>": this run's own group, never another run's or a real
 * worker's on the same host (the start-up cleanup below kills everything in its group). */
static char group[64];

/* The directory of job cgroup `name` in the v1 hierarchy of `ctrl`. */
static bool cgroup_dir(const char *ctrl, const char *name, char *buf, size_t n) {
        snprintf(buf, n, "/sys/fs/cgroup/%s/%s/%s", ctrl, group, name);
        return true;
}

static char *read_file(const char *dir, const char *file) {
        char p[PATH_MAX * 2];
        char *buf = NULL;
        size_t n;
        snprintf(p, sizeof(p), "%s/%s", dir, file);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                fail_msg("'%s': %s", p, strerror(errno));
        assert_int_equal(read_full_fd_bounded(fd, 1 << 20, &buf, &n), 0);
        buf[strcspn(buf, "\n")] = 0;
        return buf;
}

static void require_v1(void) {
        const char *m = cgroup_mode_string();
        if (!m)
                tfw_skip("no usable cgroup hierarchy");
        if (!streq(m, "v1"))
                tfw_skip("these checks read cgroup v1 files; this host runs %s", m);
}

static void test_limits_applied(void **state) {
        (void) state;
        require_v1();
        TfwError e = {};
        CgroupJob *j = NULL;
        CgroupLimits l = { .memory = 300ULL << 20, .memory_swap = 400ULL << 20, .pids = 77,
                           .cpu_quota_us = 50000, .cpu_period_us = 100000 };
        char mem[PATH_MAX], pids[PATH_MAX], cpu[PATH_MAX];

        assert_int_equal(cgroup_job_create(group, "tfw-cgtest-limits", &l, &j, &e), 0);
        assert_true(cgroup_dir("memory", "tfw-cgtest-limits", mem, sizeof(mem)));
        assert_true(cgroup_dir("pids", "tfw-cgtest-limits", pids, sizeof(pids)));
        assert_true(cgroup_dir("cpu", "tfw-cgtest-limits", cpu, sizeof(cpu)));
        _cleanup_free_ char *ml = read_file(mem, "memory.limit_in_bytes");
        assert_string_equal(ml, "314572800");
        struct stat st;
        char p[PATH_MAX * 2];
        snprintf(p, sizeof(p), "%s/memory.memsw.limit_in_bytes", mem);
        if (stat(p, &st) == 0) {
                _cleanup_free_ char *sw = read_file(mem, "memory.memsw.limit_in_bytes");
                assert_string_equal(sw, "419430400");
        }
        _cleanup_free_ char *pm = read_file(pids, "pids.max");
        assert_string_equal(pm, "77");
        _cleanup_free_ char *q = read_file(cpu, "cpu.cfs_quota_us");
        assert_string_equal(q, "50000");
        _cleanup_free_ char *per = read_file(cpu, "cpu.cfs_period_us");
        assert_string_equal(per, "100000");

        /* A second one of the same name is refused, not adopted. */
        CgroupJob *j2 = NULL;
        assert_int_equal(cgroup_job_create(group, "tfw-cgtest-limits", &l, &j2, &e), -EEXIST);
        assert_string_equal(e.code, "cgroup_exists");

        /* What runsc makes in a hierarchy the worker does not limit, and leaves when it is
         * killed: destroy sweeps it too. */
        char frz[PATH_MAX];
        snprintf(frz, sizeof(frz), "/sys/fs/cgroup/freezer/%s", group);
        bool have_freezer = stat("/sys/fs/cgroup/freezer", &st) == 0;
        if (have_freezer) {
                (void) mkdir(frz, 0755);
                snprintf(frz, sizeof(frz), "/sys/fs/cgroup/freezer/%s/tfw-cgtest-limits", group);
                assert_int_equal(mkdir(frz, 0755), 0);
        }

        assert_int_equal(cgroup_job_destroy(j), 0);
        assert_int_equal(stat(mem, &st), -1);
        assert_int_equal(stat(pids, &st), -1);
        assert_int_equal(stat(cpu, &st), -1);
        if (have_freezer)
                assert_int_equal(stat(frz, &st), -1);
}

/* A child that enters the cgroup and then runs fn. */
static pid_t spawn_in(CgroupJob *j, int (*fn)(void)) {
        int sync[2];
        assert_int_equal(pipe2(sync, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                /* Never outlive the test, never hold its output open. */
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
                (void) dup2(null, STDOUT_FILENO);
                (void) dup2(null, STDERR_FILENO);
                close(sync[0]);
                if (cgroup_job_enter(j) < 0)
                        _exit(90);
                if (write(sync[1], "x", 1) != 1)
                        _exit(91);
                _exit(fn());
        }
        close(sync[1]);
        char c;
        assert_int_equal(read(sync[0], &c, 1), 1);
        close(sync[0]);
        return pid;
}

static int eat_memory(void) {
        for (;;) {
                char *p = malloc(8 << 20);
                if (!p)
                        return 1;
                memset(p, 1, 8 << 20);
        }
}

static int fork_many(void) {
        int ok = 0;
        for (int i = 0; i < 1000; i++) {
                pid_t p = fork();
                if (p == 0) {
                        pause();
                        _exit(0);
                }
                if (p < 0)
                        return ok > 0 ? 0 : 1;
                ok++;
        }
        return 2;
}

static _noreturn_ int sleep_forever(void) {
        for (;;)
                pause();
}

static void test_oom_recorded(void **state) {
        (void) state;
        require_v1();
        TfwError e = {};
        CgroupJob *j = NULL;
        CgroupLimits l = { .memory = 64ULL << 20, .memory_swap = 64ULL << 20, .pids = 100 };
        CgroupEvents ev;
        int st;

        assert_int_equal(cgroup_job_create(group, "tfw-cgtest-oom", &l, &j, &e), 0);
        pid_t pid = spawn_in(j, eat_memory);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFSIGNALED(st));
        assert_int_equal(WTERMSIG(st), SIGKILL);
        assert_int_equal(cgroup_job_events(j, &ev), 0);
        assert_true(ev.oom_kills >= 1);
        assert_int_equal(ev.pids_max, 0);
        assert_int_equal(cgroup_job_destroy(j), 0);
}

static void test_pids_recorded(void **state) {
        (void) state;
        require_v1();
        TfwError e = {};
        CgroupJob *j = NULL;
        CgroupLimits l = { .memory = 256ULL << 20, .memory_swap = 256ULL << 20, .pids = 10 };
        CgroupEvents ev;
        int st;

        assert_int_equal(cgroup_job_create(group, "tfw-cgtest-pids", &l, &j, &e), 0);
        pid_t pid = spawn_in(j, fork_many);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0); /* some forks worked, then one was refused */
        assert_int_equal(cgroup_job_events(j, &ev), 0);
        assert_true(ev.pids_max >= 1);
        /* Its children are still in the cgroup; destroy kills them. */
        assert_int_equal(cgroup_job_populated(j), 1);
        assert_int_equal(cgroup_job_destroy(j), 0);
}

static void test_kill_spares_and_destroy(void **state) {
        (void) state;
        require_v1();
        TfwError e = {};
        CgroupJob *j = NULL;
        CgroupLimits l = { .memory = 256ULL << 20, .memory_swap = 256ULL << 20, .pids = 10 };
        int st;

        assert_int_equal(cgroup_job_create(group, "tfw-cgtest-kill", &l, &j, &e), 0);
        pid_t a = spawn_in(j, sleep_forever), b = spawn_in(j, sleep_forever);
        assert_int_equal(cgroup_job_kill(j, a), 1);
        assert_int_equal(waitpid(b, &st, 0), b);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        /* a was spared. */
        assert_int_equal(waitpid(a, &st, WNOHANG), 0);
        assert_int_equal(cgroup_job_populated(j), 1);
        assert_int_equal(kill(a, SIGKILL), 0);
        assert_int_equal(waitpid(a, &st, 0), a);
        assert_int_equal(cgroup_job_destroy(j), 0);

        /* Start-up cleanup of a leftover that still holds a process. */
        assert_int_equal(cgroup_job_create(group, "tfw-cgtest-stale", &l, &j, &e), 0);
        pid_t c = spawn_in(j, sleep_forever);
        /* Forget j as a killed worker would (leak its fds on purpose), then clean up. */
        j = NULL;
        assert_int_equal(cgroup_job_remove_stale(group, "tfw-cgtest-stale"), 0);
        assert_int_equal(waitpid(c, &st, 0), c);
        assert_true(WIFSIGNALED(st));
        char mem[PATH_MAX];
        struct stat sb;
        assert_true(cgroup_dir("memory", "tfw-cgtest-stale", mem, sizeof(mem)));
        assert_int_equal(stat(mem, &sb), -1);
        assert_int_equal(cgroup_job_remove_stale(group, "tfw-cgtest-stale"), 0); /* already gone */

        /* The whole group at start-up: every job cgroup in it, whatever its name. */
        pid_t d1, d2;
        assert_int_equal(cgroup_job_create(group, "a", &l, &j, &e), 0);
        d1 = spawn_in(j, sleep_forever);
        j = NULL;
        assert_int_equal(cgroup_job_create(group, "b", &l, &j, &e), 0);
        d2 = spawn_in(j, sleep_forever);
        j = NULL;
        unsigned removed = 0;
        assert_int_equal(cgroup_group_remove_stale(group, &removed), 0);
        assert_int_equal(removed, 2);
        assert_int_equal(waitpid(d1, &st, 0), d1);
        assert_int_equal(waitpid(d2, &st, 0), d2);
        assert_true(cgroup_dir("pids", "a", mem, sizeof(mem)));
        assert_int_equal(stat(mem, &sb), -1);
        assert_int_equal(cgroup_group_remove_stale("tentaflake-worker-nonexistent", &removed), 0);
        assert_int_equal(removed, 0);
}

static int group_teardown(void **state) {
        (void) state;
        DIR *h = opendir("/sys/fs/cgroup");
        struct dirent *de;
        while (h && (de = readdir(h))) {
                char p[PATH_MAX];
                if (de->d_name[0] == '.')
                        continue;
                snprintf(p, sizeof(p), "/sys/fs/cgroup/%s/%s", de->d_name, group);
                (void) rmdir(p);
        }
        if (h)
                closedir(h);
        return 0;
}

int main(void) {
        if (geteuid() != 0) {
                printf("SKIP: cgroup tests need root\n");
                return 77;
        }
        snprintf(group, sizeof(group), "tentaflake-worker-cgtest-%d", (int) getpid());
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_limits_applied),
                cmocka_unit_test(test_oom_recorded),
                cmocka_unit_test(test_pids_recorded),
                cmocka_unit_test(test_kill_spares_and_destroy),
        };
        return cmocka_run_group_tests(tests, NULL, group_teardown);
}
