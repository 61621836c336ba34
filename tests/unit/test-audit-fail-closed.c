/* SPDX-License-Identifier: MIT */
/* Issue 11 item 9: the audit fails closed for decisions. approve, deny and a job's start write
 * their audit line under the store lock before the state is committed; when the line cannot be
 * written (here: an audit file whose last line is not a record, which stops every append, as
 * root cannot be kept from writing by file modes) the decision is refused with a message and
 * nothing changes: the request stays pending, the job stays queued and is not run. Root. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "approve/decide.h"
#include "orchestrator/expire.h"
#include "common/fd-util.h"
#include "orchestrator/inbox.h"
#include "orchestrator/start.h"
#include "orchestrator/store.h"
#include "tests/unit/lib/tfw-test.h"
#include "tests/unit/lib/worker-fixture.h"

#define AUDIT_FILE "audit/audit.jsonl"


static char *read_audit(Fixture *f, size_t *ret_len) {
        _cleanup_close_ int fd = openat(f->w.dirs.state_fd, AUDIT_FILE, O_RDONLY | O_CLOEXEC);
        char *buf = NULL;
        assert_true(fd >= 0);
        assert_int_equal(read_full_fd_bounded(fd, 16 << 20, &buf, ret_len), 0);
        return buf;
}

/* Break the audit log: a last line that is not a record. Returns what it held, to restore. */
static char *break_audit(Fixture *f, size_t *ret_len) {
        char *old = read_audit(f, ret_len);
        _cleanup_free_ char *bad = malloc(*ret_len + 9);
        assert_non_null(bad);
        memcpy(bad, old, *ret_len);
        memcpy(bad + *ret_len, "garbage\n", 8);
        tfw_write_file(f->w.dirs.state_fd, AUDIT_FILE, bad, *ret_len + 8);
        return old;
}

static void restore_audit(Fixture *f, const char *old, size_t len) {
        tfw_write_file(f->w.dirs.state_fd, AUDIT_FILE, old, len);
}

static unsigned count_event(Fixture *f, const char *event, const char *id) {
        size_t len;
        _cleanup_free_ char *buf = read_audit(f, &len);
        char ev[64], ident[96];
        unsigned n = 0;
        snprintf(ev, sizeof(ev), "\"event\":\"%s\"", event);
        snprintf(ident, sizeof(ident), "\"id\":\"%s\"", id);
        for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                nl = strchr(line, '\n');
                if (nl)
                        *nl = 0;
                if (strstr(line, ev) && strstr(line, ident))
                        n++;
        }
        return n;
}

static bool has_result(Fixture *f, const char *id) {
        char path[128];
        snprintf(path, sizeof(path), "%s/result.json", id);
        return faccessat(f->w.dirs.results_fd, path, F_OK, 0) == 0;
}

static void test_approve_refused(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        size_t len;
        fixture_submit(f, "ap1", "irreversible");
        _cleanup_free_ char *old = break_audit(f, &len);

        assert_true(decide_approve(&f->w, "ap1", NULL, "alice", &e) < 0);
        assert_string_equal(e.code, "audit_failed");
        assert_non_null(strstr(e.message, "approve 'ap1': refused, the request stays pending: "
                                          "cannot record 'approved' in the audit log: "));
        RequestRecord r = fixture_load(f, "ap1");
        assert_int_equal(r.state, STATE_PENDING);
        assert_string_equal(r.decision, "");
        assert_string_equal(r.approver, "");

        /* Once the log can be written again, the same approval goes through, recorded once. */
        restore_audit(f, old, len);
        assert_int_equal(decide_approve(&f->w, "ap1", NULL, "alice", &e), 0);
        assert_int_equal(fixture_load(f, "ap1").state, STATE_QUEUED);
        assert_int_equal(count_event(f, "approved", "ap1"), 1);
}

static void test_deny_refused(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        size_t len;
        fixture_submit(f, "dn1", "production");
        _cleanup_free_ char *old = break_audit(f, &len);

        assert_true(decide_deny(&f->w, "dn1", "no", "carol", &e) < 0);
        assert_string_equal(e.code, "audit_failed");
        assert_non_null(strstr(e.message, "deny 'dn1': refused, the request stays pending: "
                                          "cannot record 'denied' in the audit log: "));
        RequestRecord r = fixture_load(f, "dn1");
        assert_int_equal(r.state, STATE_PENDING);
        assert_string_equal(r.decision, "");
        assert_false(has_result(f, "dn1"));

        restore_audit(f, old, len);
        assert_int_equal(decide_deny(&f->w, "dn1", "no", "carol", &e), 0);
        assert_int_equal(fixture_load(f, "dn1").state, STATE_FINAL);
        assert_true(has_result(f, "dn1"));
        assert_int_equal(count_event(f, "denied", "dn1"), 1);
}

/* The daemon forks a job only when job_mark_started succeeded (orchestrator/daemon.c). */
static void test_start_refused(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        RequestRecord rec;
        size_t len;
        fixture_submit(f, "st1", "local-reversible");
        assert_int_equal(fixture_load(f, "st1").state, STATE_QUEUED);
        _cleanup_free_ char *old = break_audit(f, &len);

        assert_true(job_mark_started(&f->w, "st1", &rec, &e) < 0);
        assert_string_equal(e.code, "audit_failed");
        assert_non_null(strstr(e.message, "cannot record 'started' in the audit log: "));
        assert_int_equal(fixture_load(f, "st1").state, STATE_QUEUED);

        restore_audit(f, old, len);
        assert_int_equal(count_event(f, "started", "st1"), 0);
        assert_int_equal(job_mark_started(&f->w, "st1", &rec, &e), 0);
        assert_int_equal(rec.state, STATE_RUNNING);
        assert_int_equal(fixture_load(f, "st1").state, STATE_RUNNING);
        assert_int_equal(count_event(f, "started", "st1"), 1);

        /* Started once only; a pending request is never started. */
        assert_int_equal(job_mark_started(&f->w, "st1", &rec, &e), -ESTALE);
        fixture_submit(f, "st2", "financial");
        assert_int_equal(job_mark_started(&f->w, "st2", &rec, &e), -ESTALE);
        assert_int_equal(fixture_load(f, "st2").state, STATE_PENDING);
        assert_int_equal(count_event(f, "started", "st2"), 0);
}

/* An expiry stays best effort: the request ends expired even when its line cannot be written
 * (nothing runs). */
static void test_expiry_best_effort(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        size_t len;
        fixture_submit(f, "ex1", "financial");
        RequestRecord r = fixture_load(f, "ex1");
        _cleanup_free_ char *old = break_audit(f, &len);
        usec_t ttl = 72ULL * 3600 * USEC_PER_SEC;
        assert_int_equal(expire_pending(&f->w, r.submitted_at + ttl, &e), 1);
        assert_int_equal(fixture_load(f, "ex1").state, STATE_FINAL);
        restore_audit(f, old, len);
}

int main(void) {
#define T(x) cmocka_unit_test_setup_teardown(x, worker_fixture_setup, worker_fixture_teardown)
        const struct CMUnitTest tests[] = {
                T(test_approve_refused),
                T(test_deny_refused),
                T(test_start_refused),
                T(test_expiry_best_effort),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
