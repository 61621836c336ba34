/* SPDX-License-Identifier: MIT */
/* approve / deny / expiry on the captured copy (contract section 5; threat 9). Root. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "approve/decide.h"
#include "orchestrator/expire.h"
#include "common/fd-util.h"
#include "orchestrator/inbox.h"
#include "orchestrator/store.h"
#include "tests/unit/lib/tfw-test.h"
#include "tests/unit/lib/worker-fixture.h"



static char *result_of(Fixture *f, const char *id) {
        char path[128];
        char *buf = NULL;
        snprintf(path, sizeof(path), "%s/result.json", id);
        _cleanup_close_ int fd = openat(f->w.dirs.results_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        assert_int_equal(read_full_fd_bounded(fd, 1 << 20, &buf, NULL), 0);
        return buf;
}

static void test_approve_queues(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        fixture_submit(f, "a1", "irreversible");
        assert_int_equal(decide_approve(&f->w, "a1", NULL, "alice", &e), 0);
        RequestRecord r = fixture_load(f, "a1");
        assert_int_equal(r.state, STATE_QUEUED);
        assert_string_equal(r.decision, "approved");
        assert_string_equal(r.approver, "alice");
        assert_true(r.decided_at > 0);
        /* Approving twice is refused with what happened. */
        assert_true(decide_approve(&f->w, "a1", NULL, "bob", &e) < 0);
        assert_string_equal(e.code, "not_pending");
        assert_non_null(strstr(e.message, "approve 'a1': it was already approved by alice"));
}

static void test_approve_unknown(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        assert_int_equal(decide_approve(&f->w, "nope", NULL, "alice", &e), -ENOENT);
        assert_string_equal(e.message, "approve 'nope': no pending request with that id");
        assert_int_equal(decide_deny(&f->w, "nope", NULL, "alice", &e), -ENOENT);
        /* A queued (auto-run) request is not pending: nothing to approve. */
        fixture_submit(f, "auto1", "local-reversible");
        assert_true(decide_approve(&f->w, "auto1", NULL, "alice", &e) < 0);
        assert_string_equal(e.code, "not_pending");
}

static void test_expect_sha256(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        fixture_submit(f, "s1", "financial");
        RequestRecord r = fixture_load(f, "s1");
        const char *wrong = "0000000000000000000000000000000000000000000000000000000000000000";
        assert_true(decide_approve(&f->w, "s1", wrong, "alice", &e) < 0);
        assert_string_equal(e.code, "sha256_mismatch");
        assert_int_equal(fixture_load(f, "s1").state, STATE_PENDING);
        assert_int_equal(decide_approve(&f->w, "s1", r.sha256, "alice", &e), 0);
        assert_int_equal(fixture_load(f, "s1").state, STATE_QUEUED);
}

/* Threat 9: tampering with the private copy after capture is caught at approval. */
static void test_tampered_copy_refused(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        fixture_submit(f, "t1", "production");
        const char *evil = "{\"version\":1,\"id\":\"t1\",\"action_class\":\"production\",\"argv\":[\"evil\"]}";
        _cleanup_close_ int dfd = openat(f->w.dirs.requests_fd, "t1", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_int_equal(write_file_atomic_at(dfd, "request.json", evil, strlen(evil), 0600, -1, -1), 0);
        assert_true(decide_approve(&f->w, "t1", NULL, "alice", &e) < 0);
        assert_string_equal(e.code, "sha256_mismatch");
        assert_int_equal(fixture_load(f, "t1").state, STATE_PENDING);
}

static void test_deny_publishes(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        fixture_submit(f, "d1", "communicative");
        assert_int_equal(decide_deny(&f->w, "d1", "not today", "carol", &e), 0);
        RequestRecord r = fixture_load(f, "d1");
        assert_int_equal(r.state, STATE_FINAL);
        assert_string_equal(r.status, "denied");
        _cleanup_free_ char *res = result_of(f, "d1");
        assert_non_null(res);
        assert_non_null(strstr(res, "\"status\": \"denied\""));
        assert_non_null(strstr(res, "\"by\": \"carol\""));
        assert_non_null(strstr(res, "\"reason\": \"not today\""));
        /* approve after deny, deny after deny: refused, result untouched. */
        assert_true(decide_approve(&f->w, "d1", NULL, "alice", &e) < 0);
        assert_non_null(strstr(e.message, "already denied by carol"));
        assert_true(decide_deny(&f->w, "d1", NULL, "alice", &e) < 0);
        /* deny after approve */
        fixture_submit(f, "d2", "privileged");
        assert_int_equal(decide_approve(&f->w, "d2", NULL, "alice", &e), 0);
        assert_true(decide_deny(&f->w, "d2", NULL, "carol", &e) < 0);
        assert_non_null(strstr(e.message, "already approved by alice"));
        assert_int_equal(fixture_load(f, "d2").state, STATE_QUEUED);
}

/* Threat 9: approve and deny racing: exactly one wins, every time. */
static void test_approve_deny_race(void **state) {
        Fixture *f = worker_fixture(state);
        for (int round = 0; round < 30; round++) {
                char id[16];
                pid_t pids[4];
                int wins = 0;
                snprintf(id, sizeof(id), "race%d", round);
                fixture_submit(f, id, "irreversible");
                for (int i = 0; i < 4; i++) {
                        pids[i] = fork();
                        assert_true(pids[i] >= 0);
                        if (pids[i] == 0) {
                                TfwError ce = {0};
                                int r = (i & 1) ? decide_deny(&f->w, id, "race", "d", &ce)
                                                : decide_approve(&f->w, id, NULL, "a", &ce);
                                if (r < 0 && !(ce.code && streq(ce.code, "not_pending")))
                                        fprintf(stderr, "racer %d: %s: %s\n", i, ce.code, ce.message);
                                _exit(r == 0 ? 0 : (ce.code && streq(ce.code, "not_pending")) ? 1 : 2);
                        }
                }
                for (int i = 0; i < 4; i++) {
                        int status;
                        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
                        assert_true(WIFEXITED(status));
                        assert_true(WEXITSTATUS(status) <= 1);
                        wins += WEXITSTATUS(status) == 0;
                }
                assert_int_equal(wins, 1);
                RequestRecord r = fixture_load(f, id);
                _cleanup_free_ char *res = result_of(f, id);
                if (streq(r.decision, "denied"))
                        assert_non_null(res);
                else {
                        assert_string_equal(r.decision, "approved");
                        assert_null(res);
                }
        }
}

/* The worker's event lines, kept for the assertions. */
static char said[8192];
static void keep_line(void *userdata, int level, const char *line) {
        (void) userdata;
        (void) level;
        size_t n = strlen(said);
        snprintf(said + n, sizeof(said) - n, "%s\n", line);
}

static void test_expiry(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        said[0] = 0;
        f->w.report = keep_line;
        fixture_submit(f, "old1", "financial");
        fixture_submit(f, "auto2", "local-reversible");
        /* The operator is told, with the command that approves it (issue 23 item 3). */
        assert_non_null(strstr(said, "request 'old1' (financial) waits for approval until "));
        assert_non_null(strstr(said, "; approve with: tentaflake-worker --name "));
        assert_null(strstr(said, "request 'auto2'"));
        RequestRecord r = fixture_load(f, "old1");
        usec_t ttl = 72ULL * 3600 * USEC_PER_SEC;
        assert_int_equal(expire_pending(&f->w, r.submitted_at + ttl - 1, &e), 0);
        assert_int_equal(fixture_load(f, "old1").state, STATE_PENDING);
        assert_null(strstr(said, "expired"));
        assert_int_equal(expire_pending(&f->w, r.submitted_at + ttl, &e), 1);
        assert_non_null(strstr(said, "request 'old1': expired: not approved within pending_ttl_hours (72)"));
        r = fixture_load(f, "old1");
        assert_int_equal(r.state, STATE_FINAL);
        assert_string_equal(r.status, "expired");
        _cleanup_free_ char *res = result_of(f, "old1");
        assert_non_null(strstr(res, "\"status\": \"expired\""));
        assert_int_equal(fixture_load(f, "auto2").state, STATE_QUEUED);
        assert_true(decide_approve(&f->w, "old1", NULL, "alice", &e) < 0);
}

static void test_identity(void **state) {
        (void) state;
        char buf[64];
        setenv("SUDO_USER", "operator7", 1);
        decide_operator_identity(buf, sizeof(buf));
        assert_string_equal(buf, "operator7");
        unsetenv("SUDO_USER");
        decide_operator_identity(buf, sizeof(buf));
        assert_true(buf[0] != 0);
}

int main(void) {
#define T(x) cmocka_unit_test_setup_teardown(x, worker_fixture_setup, worker_fixture_teardown)
        const struct CMUnitTest tests[] = {
                T(test_approve_queues), T(test_approve_unknown), T(test_expect_sha256),
                T(test_tampered_copy_refused), T(test_deny_publishes), T(test_approve_deny_race),
                T(test_expiry), cmocka_unit_test(test_identity),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
