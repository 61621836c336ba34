/* SPDX-License-Identifier: MIT */
/* The controller's cancel as the worker takes it (orchestrator/cancel.h; issue 35 item 3;
 * threat 20): each state a request can be in, and each entry that must change nothing. Root:
 * the worker's directories are root-owned. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "orchestrator/cancel.h"
#include "orchestrator/start.h"
#include "tests/unit/lib/tfw-test.h"
#include "tests/unit/lib/worker-fixture.h"

static CancelOutcome take(Fixture *f, const char *name, char id[static REQUEST_ID_MAX + 1]) {
        CancelOutcome o;
        TfwError e = {0};
        if (cancel_take(&f->w, name, &o, id, &e) < 0)
                fail_msg("cancel '%s': %s", name, e.message);
        return o;
}

static bool inbox_has(Fixture *f, const char *name) {
        struct stat st;
        return fstatat(f->w.inbox_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static unsigned count_rejected(Fixture *f, const char *prefix) {
        unsigned n = 0;
        DIR *d = fdopendir(fcntl(f->w.dirs.rejected_fd, F_DUPFD_CLOEXEC, 3));
        struct dirent *de;
        rewinddir(d);
        while ((de = readdir(d)))
                n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
        closedir(d);
        return n;
}

static char *result_of(Fixture *f, const char *id) {
        char path[128];
        char *buf = NULL;
        snprintf(path, sizeof(path), "%s/result.json", id);
        _cleanup_close_ int fd = openat(f->w.dirs.results_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || read_full_fd_bounded(fd, 1 << 20, &buf, NULL) < 0)
                return NULL;
        return buf;
}

static void assert_cancelled(Fixture *f, const char *id, const char *words) {
        RequestRecord rec = fixture_load(f, id);
        assert_int_equal(rec.state, STATE_FINAL);
        assert_string_equal(rec.status, "cancelled");
        _cleanup_free_ char *res = result_of(f, id);
        assert_non_null(res);
        assert_non_null(strstr(res, "\"status\": \"cancelled\""));
        assert_non_null(strstr(res, "\"error\": \"" CANCEL_ERROR "\""));
        assert_non_null(strstr(res, words));
}

static void test_names(void **state) {
        (void) state;
        char id[REQUEST_ID_MAX + 1];
        assert_true(cancel_name_to_id("job-1.cancel", id, sizeof(id)));
        assert_string_equal(id, "job-1");
        assert_false(cancel_name_to_id(".cancel", NULL, 0));
        assert_false(cancel_name_to_id("Job.cancel", NULL, 0));
        assert_false(cancel_name_to_id("job.json", NULL, 0));
        assert_false(cancel_name_to_id("job.cancel.tmp", NULL, 0));
        assert_false(cancel_name_to_id("-job.cancel", NULL, 0));
}

static void test_pending_withdrawn(void **state) {
        Fixture *f = worker_fixture(state);
        char id[REQUEST_ID_MAX + 1] = "";
        fixture_submit(f, "pend", "irreversible");
        tfw_write_file(f->w.inbox_fd, "pend.cancel", "", 0);
        assert_int_equal(take(f, "pend.cancel", id), CANCEL_ENDED);
        assert_string_equal(id, "pend");
        assert_cancelled(f, "pend", "withdrawn by the controller while it was pending");
        assert_false(inbox_has(f, "pend.cancel"));
        assert_int_equal(faccessat(f->w.dirs.results_fd, "pend.state.json", F_OK, 0), -1);
}

static void test_queued_cancelled(void **state) {
        Fixture *f = worker_fixture(state);
        char id[REQUEST_ID_MAX + 1];
        TfwError e = {0};
        RequestRecord rec;
        fixture_submit(f, "q1", "local-reversible");
        tfw_write_file(f->w.inbox_fd, "q1.cancel", "", 0);
        assert_int_equal(take(f, "q1.cancel", id), CANCEL_ENDED);
        assert_cancelled(f, "q1", "while it was queued");
        /* The daemon's queue still names it: it is never started. */
        assert_int_equal(job_mark_started(&f->w, "q1", &rec, &e), -ESTALE);
}

static void test_running_handed_to_the_daemon(void **state) {
        Fixture *f = worker_fixture(state);
        char id[REQUEST_ID_MAX + 1];
        TfwError e = {0};
        RequestRecord rec;
        fixture_submit(f, "r1", "local-reversible");
        assert_int_equal(job_mark_started(&f->w, "r1", &rec, &e), 0);
        tfw_write_file(f->w.inbox_fd, "r1.cancel", "", 0);
        assert_int_equal(take(f, "r1.cancel", id), CANCEL_RUNNING);
        assert_string_equal(id, "r1");
        assert_int_equal(fixture_load(f, "r1").state, STATE_RUNNING);
        assert_false(inbox_has(f, "r1.cancel"));
}

/* Written before its request was read: the request is taken first, then cancelled. */
static void test_cancel_before_its_request_was_read(void **state) {
        Fixture *f = worker_fixture(state);
        char id[REQUEST_ID_MAX + 1];
        tfw_write_file(f->w.inbox_fd, "early.json",
                       "{\"version\":1,\"id\":\"early\",\"action_class\":\"local-reversible\",\"argv\":[\"true\"]}",
                       (size_t) -1);
        tfw_write_file(f->w.inbox_fd, "early.cancel", "", 0);
        assert_int_equal(take(f, "early.cancel", id), CANCEL_ENDED);
        assert_cancelled(f, "early", "while it was queued");
        assert_false(inbox_has(f, "early.json"));
}

static void test_unknown_and_ended_refused(void **state) {
        Fixture *f = worker_fixture(state);
        char id[REQUEST_ID_MAX + 1];
        tfw_write_file(f->w.inbox_fd, "nosuch.cancel", "", 0);
        assert_int_equal(take(f, "nosuch.cancel", id), CANCEL_REFUSED);
        assert_int_equal(count_rejected(f, "nosuch.cancel-"), 1);
        assert_false(inbox_has(f, "nosuch.cancel"));

        fixture_submit(f, "q2", "local-reversible");
        tfw_write_file(f->w.inbox_fd, "q2.cancel", "", 0);
        assert_int_equal(take(f, "q2.cancel", id), CANCEL_ENDED);
        _cleanup_free_ char *before = result_of(f, "q2");
        /* Replayed: the request is final, the cancel refused, its result as it was. */
        tfw_write_file(f->w.inbox_fd, "q2.cancel", "", 0);
        assert_int_equal(take(f, "q2.cancel", id), CANCEL_REFUSED);
        assert_int_equal(count_rejected(f, "q2.cancel-"), 1);
        _cleanup_free_ char *after = result_of(f, "q2");
        assert_string_equal(before, after);
}

/* Not an empty regular file of its own: refused, the request untouched. */
static void test_bad_entries_change_nothing(void **state) {
        Fixture *f = worker_fixture(state);
        char id[REQUEST_ID_MAX + 1];
        fixture_submit(f, "keep", "local-reversible");
        tfw_write_file(f->w.inbox_fd, "keep.cancel", "x", 1);
        assert_int_equal(take(f, "keep.cancel", id), CANCEL_REFUSED);
        assert_false(inbox_has(f, "keep.cancel"));
        assert_int_equal(symlinkat("/etc/passwd", f->w.inbox_fd, "keep.cancel"), 0);
        assert_int_equal(take(f, "keep.cancel", id), CANCEL_REFUSED);
        assert_false(inbox_has(f, "keep.cancel"));
        tfw_write_file(f->w.dirs.state_fd, "outside", "", 0);
        assert_int_equal(linkat(f->w.dirs.state_fd, "outside", f->w.inbox_fd, "keep.cancel", 0), 0);
        assert_int_equal(take(f, "keep.cancel", id), CANCEL_REFUSED);
        assert_int_equal(mkfifoat(f->w.inbox_fd, "keep2.cancel", 0600), 0);
        assert_int_equal(take(f, "keep2.cancel", id), CANCEL_REFUSED);
        assert_int_equal(fixture_load(f, "keep").state, STATE_QUEUED);
        assert_int_equal(count_rejected(f, "keep.cancel-"), 3);
}

/* A cancel is never captured as a request (the daemon takes it). */
static void test_capture_leaves_cancels(void **state) {
        Fixture *f = worker_fixture(state);
        CaptureOutcome o;
        TfwError e = {0};
        tfw_write_file(f->w.inbox_fd, "x.cancel", "", 0);
        assert_int_equal(inbox_capture(&f->w, "x.cancel", &o, &e), 0);
        assert_int_equal(o, CAPTURE_IGNORED);
        assert_true(inbox_has(f, "x.cancel"));
}

int main(void) {
#define T(x) cmocka_unit_test_setup_teardown(x, worker_fixture_setup, worker_fixture_teardown)
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                T(test_pending_withdrawn),
                T(test_queued_cancelled),
                T(test_running_handed_to_the_daemon),
                T(test_cancel_before_its_request_was_read),
                T(test_unknown_and_ended_refused),
                T(test_bad_entries_change_nothing),
                T(test_capture_leaves_cancels),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
