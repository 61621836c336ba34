/* SPDX-License-Identifier: MIT */
/* capsule/docker.c: the `docker run` / `podman run` argument list of a job, asserted flag by
 * flag as the g1t runner's tests assert theirs: every wall present with its value, nothing
 * that widens the capsule (--privileged, a host namespace, a device, an added capability, the
 * engine's socket, a writable bind, an unconfined profile), the entrypoint and the image last
 * before the job's argv, and the job's argv never read as an engine flag. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/docker.h"
#include "capsule/oci-spec.h"
#include "capsule/protocol.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

#define IMAGE "sha256:0f423ac4e3a644cf27b9e0d37748d9e63167cf7f2330955cf733e4fa3f1f5ad7"

typedef struct Fixture {
        ConfigLimits limits;
        EngineRunPlan plan;
        char *argv[8];
} Fixture;

static void fixture_init(Fixture *f, RuntimeDriver d) {
        memset(f, 0, sizeof(*f));
        f->limits = (ConfigLimits) {
                .memory = 2ULL << 30,
                .memory_swap = 2ULL << 30,
                .cpus_milli = 1500,
                .cpus = "1.5",
                .pids = 512,
                .workspace_tmpfs = 1ULL << 30,
                .tmp_tmpfs = 256ULL << 20,
        };
        f->argv[0] = (char *) "cargo";
        f->argv[1] = (char *) "test";
        f->argv[2] = (char *) "--offline";
        f->plan = (EngineRunPlan) {
                .driver = d,
                .runtime = "runsc",
                .name = "tfw-coder-1-job_1",
                .worker_name = "coder-1",
                .job_id = "job_1",
                .image = IMAGE,
                .limits = &f->limits,
                .uid = 10000,
                .gid = 10001,
                .snapshot_dir = "/var/lib/tfw/scratch/job_1/snapshot",
                .init_path = "/usr/libexec/tentaflake-worker/tentaflake-capsule-init",
                .passwd_path = "/var/lib/tfw/scratch/job_1/tfw-coder-1-job_1/passwd",
                .group_path = "/var/lib/tfw/scratch/job_1/tfw-coder-1-job_1/group",
                .argv = f->argv,
        };
}

static size_t count(char **args) {
        size_t n = 0;
        while (args[n])
                n++;
        return n;
}

/* The values following each occurrence of flag, joined with '|' ("" when none), up to the
 * image: nothing after the image is an engine flag. */
static size_t image_index(char **args) {
        size_t n = count(args);
        for (size_t i = 0; i + 1 < n; i++)
                if (streq(args[i], "--entrypoint"))
                        return i + 2;
        fail_msg("no --entrypoint");
        return 0;
}

static char *values_of(char **args, const char *flag) {
        static char buf[4096];
        size_t end = image_index(args);
        buf[0] = 0;
        for (size_t i = 0; i + 1 < end; i++)
                if (streq(args[i], flag)) {
                        if (buf[0])
                                strcat(buf, "|");
                        strcat(buf, args[i + 1]);
                }
        return buf;
}

static bool has_flag(char **args, const char *flag) {
        size_t end = image_index(args);
        for (size_t i = 0; i < end; i++)
                if (streq(args[i], flag) || (strncmp(args[i], flag, strlen(flag)) == 0 &&
                                             args[i][strlen(flag)] == '='))
                        return true;
        return false;
}

static char **build(Fixture *f) {
        char **args = NULL;
        assert_int_equal(engine_run_args(&f->plan, &args), 0);
        assert_non_null(args);
        return args;
}

/* serve --engine-timeout-secs (issue 13): the bound on every housekeeping command of the
 * engine comes from the config; unset, the default. */
static void test_engine_command_timeout(void **state) {
        (void) state;
        Config c = { .driver = DRIVER_DOCKER, .name = (char *) "coder",
                     .image = (char *) "sha256:" "1111111111111111111111111111111111111111111111111111111111111111" };
        Engine en = {};
        TfwError e = {0};
        if (engine_init(&en, &c, NULL, &e) < 0)
                fail_msg("no docker CLI: %s (scripts/install-deps installs docker.io)", e.message);
        assert_int_equal(en.command_timeout, CONFIG_DEFAULT_ENGINE_TIMEOUT_SECONDS * USEC_PER_SEC);
        engine_done(&en);
        c.engine_timeout_seconds = 7;
        assert_int_equal(engine_init(&en, &c, NULL, &e), 0);
        assert_int_equal(en.command_timeout, 7 * USEC_PER_SEC);
        engine_done(&en);
}

static void test_walled_in(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f, DRIVER_DOCKER);
        _cleanup_strv_free_ char **args = build(&f);

        assert_string_equal(args[0], "run");
        assert_true(has_flag(args, "-i"));
        assert_string_equal(values_of(args, "--name"), "tfw-coder-1-job_1");
        assert_string_equal(values_of(args, "--label"),
                            "org.tentaflake.worker=coder-1|org.tentaflake.job=job_1");
        assert_string_equal(values_of(args, "--pull"), "never");
        assert_string_equal(values_of(args, "--log-driver"), "none");
        assert_string_equal(values_of(args, "--runtime"), "runsc");
        assert_string_equal(values_of(args, "--network"), "none");
        assert_string_equal(values_of(args, "--ipc"), "private");
        assert_string_equal(values_of(args, "--user"), "10000:10001");
        assert_string_equal(values_of(args, "--cap-drop"), "ALL");
        /* No AppArmor on the plan: only no-new-privileges; the default seccomp profile is
         * kept by never naming one. */
        assert_string_equal(values_of(args, "--security-opt"), "no-new-privileges");
        assert_true(has_flag(args, "--read-only"));
        /* The image's HEALTHCHECK never runs a command in the capsule. */
        assert_true(has_flag(args, "--no-healthcheck"));
        assert_string_equal(values_of(args, "--image-volume"), "");
        assert_string_equal(values_of(args, "--tmpfs"),
                            "/work:rw,exec,nosuid,nodev,size=1073741824,mode=0700,uid=10000,"
                            "gid=10001|/tmp:rw,exec,nosuid,nodev,size=268435456,mode=1777");
        assert_string_equal(values_of(args, "--memory"), "2147483648");
        assert_string_equal(values_of(args, "--memory-swap"), "2147483648");
        assert_string_equal(values_of(args, "--cpus"), "1.5");
        char pids[64];
        snprintf(pids, sizeof(pids), "%llu", (unsigned long long) capsule_host_pids_limit(512));
        assert_string_equal(values_of(args, "--pids-limit"), pids);
        assert_string_equal(values_of(args, "--ulimit"), "nproc=512:512|core=0:0|nofile=1024:1024");
        assert_string_equal(values_of(args, "--workdir"), "/work");
        assert_string_equal(values_of(args, "--hostname"), CAPSULE_HOSTNAME);
}

/* The validation plane (issue 13): CI=true and TENTAFLAKE_CHECK by value after the constant
 * environment; --open-files and --file-size-mb as the container's nofile and fsize ulimits. */
static void test_validation_env_and_ulimits(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f, DRIVER_PODMAN);
        f.plan.check = "unit tests";
        f.limits.open_files = 256;
        f.limits.file_size = 2 << 20;
        _cleanup_strv_free_ char **args = build(&f);
        assert_string_equal(values_of(args, "--ulimit"),
                            "nproc=512:512|core=0:0|nofile=256:256|fsize=2097152:2097152");
        assert_non_null(strstr(values_of(args, "--env"),
                               "|TENTAFLAKE_JOB=job_1|CI=true|TENTAFLAKE_CHECK=unit tests"));
}

static void test_forbidden_absent(void **state) {
        (void) state;
        const char *forbidden[] = { "--privileged", "--cap-add", "--device", "--pid", "--userns",
                                    "--uts", "--cgroupns", "--volumes-from", "--group-add",
                                    "--env-file", "--rm=false", "-v", "--volume", "-p",
                                    "--publish", "-P", "--add-host", "--dns", "-t", "--tty",
                                    "--init", "--sysctl", "--cgroup-parent", "--link" };
        for (int d = DRIVER_DOCKER; d <= DRIVER_PODMAN; d++) {
                Fixture f;
                fixture_init(&f, (RuntimeDriver) d);
                f.plan.apparmor = true;
                _cleanup_strv_free_ char **args = build(&f);
                size_t n = count(args);
                for (size_t i = 0; i < ELEMENTSOF(forbidden); i++)
                        if (has_flag(args, forbidden[i]))
                                fail_msg("%s in the arguments", forbidden[i]);
                for (size_t i = 0; i < n; i++) {
                        assert_null(strstr(args[i], "docker.sock"));
                        assert_null(strstr(args[i], "podman.sock"));
                        assert_null(strstr(args[i], "unconfined"));
                        assert_null(strstr(args[i], "=host"));
                        assert_false(streq(args[i], "host"));
                }
                /* Every mount read-only, and only the four the capsule needs. */
                assert_string_equal(
                        values_of(args, "--mount"),
                        "type=bind,source=/var/lib/tfw/scratch/job_1/snapshot,target=/snapshot,readonly|"
                        "type=bind,source=/usr/libexec/tentaflake-worker/tentaflake-capsule-init,"
                        "target=/.tentaflake/init,readonly|"
                        "type=bind,source=/var/lib/tfw/scratch/job_1/tfw-coder-1-job_1/passwd,"
                        "target=/etc/passwd,readonly|"
                        "type=bind,source=/var/lib/tfw/scratch/job_1/tfw-coder-1-job_1/group,"
                        "target=/etc/group,readonly");
                /* The constant environment, nothing else. */
                assert_string_equal(values_of(args, "--env"),
                                    CAPSULE_ENV_PATH "|" CAPSULE_ENV_HOME "|" CAPSULE_ENV_TMPDIR
                                    "|" CAPSULE_ENV_LANG "|TENTAFLAKE_JOB=job_1");
                assert_false(has_flag(args, "-e"));
                /* AppArmor: docker's profile named on docker only. */
                if (d == DRIVER_DOCKER)
                        assert_string_equal(values_of(args, "--security-opt"),
                                            "no-new-privileges|apparmor=docker-default");
                else
                        assert_string_equal(values_of(args, "--security-opt"),
                                            "no-new-privileges");
        }
}

static void test_image_and_entrypoint_last(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f, DRIVER_DOCKER);
        /* A job argv that looks like engine flags stays the job's. */
        f.argv[0] = (char *) "--privileged";
        f.argv[1] = (char *) "-v";
        f.argv[2] = (char *) "/var/run/docker.sock:/s";
        _cleanup_strv_free_ char **args = build(&f);
        size_t n = count(args), img = image_index(args);
        assert_int_equal(img + 5, n); /* image, "--", three argv */
        assert_string_equal(args[img - 2], "--entrypoint");
        assert_string_equal(args[img - 1], CAPSULE_INIT_PATH);
        assert_string_equal(args[img], IMAGE);
        assert_string_equal(args[img + 1], "--");
        assert_string_equal(args[img + 2], "--privileged");
        assert_string_equal(args[img + 3], "-v");
        assert_string_equal(args[img + 4], "/var/run/docker.sock:/s");
        /* Before the image: no flag of the job's. */
        assert_false(has_flag(args, "--privileged"));
        assert_false(has_flag(args, "-v"));
}

static void test_refusals(void **state) {
        (void) state;
        Fixture f;
        char **args = NULL;
        const char *bad_images[] = { "busybox", "busybox:latest", "sha256:abc",
                                     "sha256:0F423AC4E3A644CF27B9E0D37748D9E63167CF7F2330955CF733E4FA3F1F5AD7",
                                     "-x@sha256:0f423ac4e3a644cf27b9e0d37748d9e63167cf7f2330955cf733e4fa3f1f5ad7",
                                     "a b@sha256:0f423ac4e3a644cf27b9e0d37748d9e63167cf7f2330955cf733e4fa3f1f5ad7",
                                     "@sha256:0f423ac4e3a644cf27b9e0d37748d9e63167cf7f2330955cf733e4fa3f1f5ad7",
                                     NULL };
        for (size_t i = 0; bad_images[i]; i++) {
                fixture_init(&f, DRIVER_DOCKER);
                f.plan.image = bad_images[i];
                assert_int_equal(engine_run_args(&f.plan, &args), -EINVAL);
        }
        assert_true(engine_image_is_pinned(IMAGE));
        assert_true(engine_image_is_pinned(
                "registry.example/busybox:1.35@sha256:0f423ac4e3a644cf27b9e0d37748d9e63167cf7f2330955cf733e4fa3f1f5ad7"));

        /* Paths that would break out of a --mount value, or are not normalised. */
        const char *bad_paths[] = { "relative/snap", "/a/../etc", "/snap,readonly=false",
                                    "/snap,target=/etc", "/a:b", "/a=b", NULL };
        for (size_t i = 0; bad_paths[i]; i++) {
                fixture_init(&f, DRIVER_DOCKER);
                f.plan.snapshot_dir = bad_paths[i];
                assert_int_equal(engine_run_args(&f.plan, &args), -EINVAL);
        }
        fixture_init(&f, DRIVER_DOCKER);
        f.plan.uid = 0;
        assert_int_equal(engine_run_args(&f.plan, &args), -EINVAL);
        fixture_init(&f, DRIVER_DOCKER);
        f.plan.runtime = "--privileged";
        assert_int_equal(engine_run_args(&f.plan, &args), -EINVAL);
        fixture_init(&f, DRIVER_RUNSC);
        assert_int_equal(engine_run_args(&f.plan, &args), -EINVAL);
        fixture_init(&f, DRIVER_DOCKER);
        f.plan.job_id = "../x";
        assert_int_equal(engine_run_args(&f.plan, &args), -EINVAL);
        fixture_init(&f, DRIVER_DOCKER);
        f.limits.memory_swap = f.limits.memory - 1;
        assert_int_equal(engine_run_args(&f.plan, &args), -EINVAL);
        fixture_init(&f, DRIVER_DOCKER);
        f.argv[0] = NULL;
        assert_int_equal(engine_run_args(&f.plan, &args), -EINVAL);
        assert_null(args);
}

/* The caller's variables come after the constant ones, each with its '=' (a bare NAME would
 * copy the CLI's own variable); the constant ones cannot be replaced. */
static void test_extra_env(void **state) {
        (void) state;
        Fixture f;
        char **bad = NULL;
        char *extra[] = { (char *) "RUST_BACKTRACE=1", (char *) "MSG=a b=c", NULL };
        fixture_init(&f, DRIVER_DOCKER);
        f.plan.extra_env = extra;
        _cleanup_strv_free_ char **args = build(&f);
        assert_string_equal(values_of(args, "--env"),
                            CAPSULE_ENV_PATH "|" CAPSULE_ENV_HOME "|" CAPSULE_ENV_TMPDIR "|" CAPSULE_ENV_LANG
                            "|TENTAFLAKE_JOB=job_1|RUST_BACKTRACE=1|MSG=a b=c");

        char *refused[][2] = { { (char *) "TOKEN", NULL },      { (char *) "PATH=/tmp", NULL },
                               { (char *) "HOME=/", NULL },     { (char *) "TENTAFLAKE_JOB=x", NULL },
                               { (char *) "1X=y", NULL },       { (char *) "=y", NULL },
                               { (char *) "A-B=y", NULL },      { (char *) "TERM=xterm", NULL } };
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                fixture_init(&f, DRIVER_DOCKER);
                f.plan.extra_env = refused[i];
                assert_int_equal(engine_run_args(&f.plan, &bad), -EINVAL);
        }
        assert_null(bad);
}

static void test_podman_runsc_network_none(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f, DRIVER_PODMAN);
        _cleanup_strv_free_ char **args = build(&f);
        assert_string_equal(values_of(args, "--runtime-flag"), "network=none");
        assert_string_equal(values_of(args, "--unsetenv"), "TERM|container");
        assert_string_equal(values_of(args, "--tmpfs"),
                            "/work:rw,exec,nosuid,nodev,size=1073741824,mode=0700,U|"
                            "/tmp:rw,exec,nosuid,nodev,size=268435456,mode=1777");
        assert_string_equal(values_of(args, "--network"), "none");
        fixture_init(&f, DRIVER_DOCKER);
        _cleanup_strv_free_ char **dargs = build(&f);
        /* docker has no such flag: its daemon.json carries it (scripts/start-dockerd). */
        assert_false(has_flag(dargs, "--runtime-flag"));
        assert_false(has_flag(dargs, "--unsetenv"));
}

/* podman is told to ignore an image's VOLUME lines (docker refuses such an image instead,
 * engine_image_check). */
static void test_podman_ignores_image_volumes(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f, DRIVER_PODMAN);
        _cleanup_strv_free_ char **args = build(&f);
        assert_string_equal(values_of(args, "--image-volume"), "ignore");
        assert_true(has_flag(args, "--no-healthcheck"));
}

static void test_runtime_name_configurable(void **state) {
        (void) state;
        Fixture f;
        fixture_init(&f, DRIVER_PODMAN);
        f.plan.runtime = "runsc-ptrace";
        _cleanup_strv_free_ char **args = build(&f);
        assert_string_equal(values_of(args, "--runtime"), "runsc-ptrace");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_walled_in),
                cmocka_unit_test(test_engine_command_timeout),
                cmocka_unit_test(test_validation_env_and_ulimits),
                cmocka_unit_test(test_forbidden_absent),
                cmocka_unit_test(test_image_and_entrypoint_last),
                cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_extra_env),
                cmocka_unit_test(test_podman_runsc_network_none),
                cmocka_unit_test(test_podman_ignores_image_volumes),
                cmocka_unit_test(test_runtime_name_configurable),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
