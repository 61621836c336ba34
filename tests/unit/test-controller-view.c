/* SPDX-License-Identifier: MIT */
/* The controller's view (orchestrator/controller-view.h; issue 23 items 1 and 2): what the
 * controller can reach is checked as the controller, and that look is bounded, because the agent
 * is the controller and can stop the process that looks. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "orchestrator/controller-view.h"
#include "tests/unit/lib/worker-fixture.h"

typedef struct Seen {
        char text[4096];
        unsigned failed;
} Seen;

static void keep(void *userdata, const char *check, bool ok, const char *detail) {
        Seen *s = userdata;
        size_t n = strlen(s->text);
        snprintf(s->text + n, sizeof(s->text) - n, "%s %s: %s\n", ok ? "ok" : "FAIL", check, detail);
        s->failed += !ok;
}

static Seen look(Fixture *f) {
        Seen s = {};
        controller_view_check(&f->config, true, keep, &s);
        return s;
}

/* The fixture's directory is mkdtemp's 0700: open it to the controller as a real parent is. */
static Fixture *opened(void **state) {
        Fixture *f = worker_fixture(state);
        assert_int_equal(chmod(f->dir->path, 0755), 0);
        return f;
}

static void test_reachable(void **state) {
        Fixture *f = opened(state);
        Seen s = look(f);
        assert_int_equal(s.failed, 0);
        assert_non_null(strstr(s.text, "ok workspace: "));
        assert_non_null(strstr(s.text, "ok inbox: uid 10000 can write requests into "));
        assert_non_null(strstr(s.text, "ok results_view: uid 10000 can read "));
}

static void test_parent_locks_the_controller_out(void **state) {
        Fixture *f = opened(state);
        assert_int_equal(chmod(f->dir->path, 0750), 0); /* root:root 0750, as umask 0027 makes it */
        Seen s = look(f);
        assert_int_equal(chmod(f->dir->path, 0755), 0);
        assert_int_equal(s.failed, 2); /* the inbox below the workspace below it too */
        char want[1024];
        snprintf(want, sizeof(want), "FAIL results_view: uid 10000 cannot reach '%s': '%s' (owner 0:0, mode 0750) cannot be searched",
                 f->results, f->dir->path);
        assert_non_null(strstr(s.text, want));
}

static void test_inbox_not_writable(void **state) {
        Fixture *f = opened(state);
        char inbox[600];
        snprintf(inbox, sizeof(inbox), "%s/.tentaflake-worker/inbox", f->ws);
        assert_int_equal(chmod(inbox, 0500), 0);
        Seen s = look(f);
        assert_int_equal(s.failed, 1);
        assert_non_null(strstr(s.text, "FAIL inbox: uid 10000 cannot write requests into "));
}

static void test_workspace_missing(void **state) {
        Fixture *f = opened(state);
        char gone[600];
        snprintf(gone, sizeof(gone), "%s/nowhere", f->dir->path);
        f->config.workspace = gone;
        Seen s = look(f);
        f->config.workspace = f->ws;
        assert_int_equal(s.failed, 1);
        assert_non_null(strstr(s.text, "does not exist (make it, owned by container_uid"));
        assert_null(strstr(s.text, "results_view")); /* nothing more is looked at */
}

static void test_workspace_not_the_controllers(void **state) {
        Fixture *f = opened(state);
        assert_int_equal(chown(f->ws, 0, 0), 0);
        Seen s = look(f);
        assert_int_equal(chown(f->ws, FIXTURE_UID, FIXTURE_GID), 0);
        assert_non_null(strstr(s.text, "is owned by uid 0, not by container_uid 10000"));
}

/* The agent stops the looking child: the look ends at its bound, says so, and leaves nothing. */
static void test_stopped_look_is_bounded(void **state) {
        Fixture *f = opened(state);
        controller_view_test_stop_child = true;
        controller_view_test_timeout_usec = 300 * USEC_PER_MSEC;
        usec_t t0 = now_monotonic();
        Seen s = look(f);
        usec_t took = now_monotonic() - t0;
        controller_view_test_stop_child = false;
        controller_view_test_timeout_usec = 10 * USEC_PER_SEC;
        assert_non_null(strstr(s.text, "FAIL results_view: the check as uid 10000 did not finish within 0.3 s"));
        assert_true(took < 5 * USEC_PER_SEC);
        /* reaped: no child of this process is left, stopped or not */
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
}

int main(void) {
#define T(x) cmocka_unit_test_setup_teardown(x, worker_fixture_setup, worker_fixture_teardown)
        const struct CMUnitTest tests[] = {
                T(test_reachable), T(test_parent_locks_the_controller_out), T(test_inbox_not_writable),
                T(test_workspace_missing), T(test_workspace_not_the_controllers), T(test_stopped_look_is_bounded),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
