/* SPDX-License-Identifier: MIT */
/* capsule/status.c: how a capsule's ending maps to contract section 7. Only a trailer
 * carrying the secret token may turn into succeeded/failed; without one, a job can at most
 * end itself as killed, and a runtime failure is an error, never the job's exit code. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "capsule/job.h"
#include "tests/unit/lib/tfw-test.h"

#define EXITED(c) ((c) << 8) /* a wait status for exit(c) */

static CapsuleEnding ending(void) {
        return (CapsuleEnding) {
                .started = true,
                .timeout_seconds = 300,
                .memory = 1 << 30,
                .pids = 512,
                .argv0 = "cargo",
                .runsc_error = "",
        };
}

static CapsuleEnding with_trailer(int exit_code, int sig) {
        CapsuleEnding e = ending();
        e.have_trailer = true;
        e.trailer = (CapsuleTrailer) { .exit_code = exit_code, .signal = sig,
                                       .init_error = CAPSULE_INIT_ERROR_NONE,
                                       .artifacts_ok = true };
        e.runsc_status = EXITED(exit_code);
        return e;
}

static void test_exit_codes(void **state) {
        (void) state;
        CapsuleResult r;
        CapsuleEnding e = with_trailer(0, 0);
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_SUCCEEDED);
        assert_int_equal(r.exit_code, 0);
        assert_string_equal(capsule_status_to_string(r.status), "succeeded");

        e = with_trailer(2, 0);
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_FAILED);
        assert_int_equal(r.exit_code, 2);
        assert_null(r.reason);
        assert_string_equal(capsule_status_to_string(r.status), "failed");
}

static void test_signal(void **state) {
        (void) state;
        CapsuleResult r;
        CapsuleEnding e = with_trailer(128 + SIGSEGV, SIGSEGV);
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_KILLED);
        assert_int_equal(r.signal, SIGSEGV);
        assert_int_equal(r.exit_code, -1);
        assert_string_equal(r.reason, "signal");
        /* A job that merely exits 139 is not "killed": only init's report of a signal is. */
        e = with_trailer(139, 0);
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_FAILED);
        assert_int_equal(r.exit_code, 139);
}

static void test_timeout_wins(void **state) {
        (void) state;
        CapsuleResult r;
        CapsuleEnding e = ending();
        e.timed_out = true;
        e.runsc_status = EXITED(137);
        e.events.oom_kills = 1; /* whatever else happened */
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_TIMED_OUT);
        assert_string_equal(r.reason, "timeout");
        assert_string_equal(capsule_status_to_string(r.status), "timed_out");
}

/* The worker's own kills for output and CPU name their limit, whatever else happened. */
static void test_output_and_cpu_limits(void **state) {
        (void) state;
        CapsuleResult r;
        CapsuleEnding e = ending();
        e.output_exceeded = true;
        e.output_bytes = 8 << 20;
        e.runsc_status = EXITED(137);
        e.events.oom_kills = 1;
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_KILLED);
        assert_string_equal(r.reason, "output_limit");
        assert_non_null(strstr(r.message, "8388608 bytes"));

        /* Even when init reported an exit: the run was cut, it did not pass. */
        e = with_trailer(0, 0);
        e.cpu_exceeded = true;
        e.cpu_seconds = 600;
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_KILLED);
        assert_string_equal(r.reason, "cpu_limit");
        assert_non_null(strstr(r.message, "600 s"));
        assert_int_equal(r.exit_code, -1);

        /* A CPU limit that could not be checked is the worker's failure, never a pass. */
        e = with_trailer(0, 0);
        e.cpu_unreadable = true;
        e.cpu_error = ENOENT;
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_ERROR);
        assert_string_equal(r.reason, "runtime_failed");
        assert_non_null(strstr(r.message, "CPU time could not be read"));
}

static void test_memory_and_pids(void **state) {
        (void) state;
        CapsuleResult r;
        CapsuleEnding e = ending();
        e.runsc_status = EXITED(137);
        e.events.oom_kills = 1;
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_KILLED);
        assert_string_equal(r.reason, "memory_limit");

        e = with_trailer(137, SIGKILL);
        e.events.oom_kills = 2;
        capsule_classify(&e, &r);
        assert_string_equal(r.reason, "memory_limit");

        /* A job that survived an OOM kill of a helper process keeps its own status. */
        e = with_trailer(0, 0);
        e.events.oom_kills = 1;
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_SUCCEEDED);
        assert_non_null(strstr(r.message, "memory limit"));

        e = ending();
        e.runsc_status = EXITED(2); /* the sentry could not make a thread */
        e.events.pids_max = 5;
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_KILLED);
        assert_string_equal(r.reason, "pids_limit");
}

static void test_no_trailer(void **state) {
        (void) state;
        CapsuleResult r;
        /* init killed (a job process can do that): killed, never succeeded. */
        CapsuleEnding e = ending();
        e.runsc_status = EXITED(128 + SIGKILL);
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_KILLED);
        assert_int_equal(r.signal, SIGKILL);

        /* Exit 0 without init's report is not a success: the runtime is at fault. */
        e.runsc_status = EXITED(0);
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_ERROR);
        assert_string_equal(r.reason, "runtime_failed");

        /* runsc's own failure (128) names runsc's message. */
        e.runsc_status = EXITED(128);
        e.runsc_error = "cannot create sandbox: boom";
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_ERROR);
        assert_non_null(strstr(r.message, "cannot create sandbox: boom"));
        assert_non_null(strstr(r.message, "runsc exited with status 128"));
        /* ... and under another engine, that engine's name: runc's failure is not runsc's. */
        e.runtime = "runc";
        capsule_classify(&e, &r);
        assert_true(strncmp(r.message, "runc exited with status 128 before the capsule reported: ", 57) == 0);
        e.runtime = NULL;

        e.runsc_status = SIGKILL; /* runsc itself killed */
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_ERROR);
        assert_string_equal(capsule_status_to_string(r.status), "error");
}

static void test_trailer_disagrees_with_runsc(void **state) {
        (void) state;
        CapsuleResult r;
        CapsuleEnding e = with_trailer(0, 0);
        e.runsc_status = EXITED(1);
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_ERROR);
        assert_string_equal(r.reason, "runtime_failed");
}

static void test_init_errors(void **state) {
        (void) state;
        CapsuleResult r;
        CapsuleEnding e = with_trailer(CAPSULE_EXIT_INIT_FAILED, 0);
        snprintf(e.trailer.init_error, sizeof(e.trailer.init_error), "%s",
                 CAPSULE_INIT_ERROR_SNAPSHOT);
        e.trailer.error = ENOSPC;
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_ERROR);
        assert_string_equal(r.reason, "snapshot_copy");
        assert_non_null(strstr(r.message, "workspace_tmpfs"));

        /* A job whose argv[0] cannot run failed (its request is at fault), exit 127. */
        e = with_trailer(CAPSULE_EXIT_NOT_FOUND, 0);
        snprintf(e.trailer.init_error, sizeof(e.trailer.init_error), "%s",
                 CAPSULE_INIT_ERROR_EXEC);
        e.trailer.error = ENOENT;
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_FAILED);
        assert_int_equal(r.exit_code, 127);
        assert_non_null(strstr(r.message, "cargo"));

        e = with_trailer(CAPSULE_EXIT_INIT_FAILED, 0);
        snprintf(e.trailer.init_error, sizeof(e.trailer.init_error), "%s",
                 CAPSULE_INIT_ERROR_SPAWN);
        e.trailer.error = EAGAIN;
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_ERROR);
        assert_string_equal(r.reason, "init_failed");

        /* The request's cwd is no directory of its snapshot: the request's fault, named. */
        e = with_trailer(CAPSULE_EXIT_INIT_FAILED, 0);
        snprintf(e.trailer.init_error, sizeof(e.trailer.init_error), "%s", CAPSULE_INIT_ERROR_CWD);
        e.trailer.error = ENOTDIR;
        e.cwd = "src/main.c";
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_ERROR);
        assert_string_equal(r.reason, "cwd_not_found");
        assert_non_null(strstr(r.message, "cwd 'src/main.c' is not a directory"));

        /* The layer could not be mounted, or init could not drop: the worker's fault. */
        e = with_trailer(CAPSULE_EXIT_INIT_FAILED, 0);
        snprintf(e.trailer.init_error, sizeof(e.trailer.init_error), "%s", CAPSULE_INIT_ERROR_LAYER);
        e.trailer.error = EPERM;
        capsule_classify(&e, &r);
        assert_int_equal(r.status, CAPSULE_ERROR);
        assert_string_equal(r.reason, "init_failed");
        assert_non_null(strstr(r.message, "(layer)"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exit_codes),
                cmocka_unit_test(test_signal),
                cmocka_unit_test(test_timeout_wins),
                cmocka_unit_test(test_output_and_cpu_limits),
                cmocka_unit_test(test_memory_and_pids),
                cmocka_unit_test(test_no_trailer),
                cmocka_unit_test(test_trailer_disagrees_with_runsc),
                cmocka_unit_test(test_init_errors),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
