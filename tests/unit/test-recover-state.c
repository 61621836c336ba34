/* SPDX-License-Identifier: MIT */
/* <id>.state.json is written without fsync (orchestrator/publish.c, issue 5): recovery at
 * start-up must repair whatever a power loss leaves of it. A final request keeps no state
 * file; a queued one gets a complete one back. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/sha256.h"
#include "common/time-util.h"
#include "orchestrator/finish.h"
#include "orchestrator/publish.h"
#include "orchestrator/result.h"
#include "orchestrator/store.h"
#include "orchestrator/recover.h"
#include "tests/unit/lib/tfw-test.h"
#include "tests/unit/lib/worker-fixture.h"

static void capture(Fixture *f, const char *id, const char *cls, CaptureOutcome want) {
        char name[80], body[256];
        CaptureOutcome o;
        TfwError e = {0};
        snprintf(name, sizeof(name), "%s.json", id);
        snprintf(body, sizeof(body),
                 "{\"version\":1,\"id\":\"%s\",\"action_class\":\"%s\",\"argv\":[\"true\"]}", id, cls);
        tfw_write_file(f->w.inbox_fd, name, body, (size_t) -1);
        if (inbox_capture(&f->w, name, &o, &e) < 0)
                fail_msg("capture '%s': %s", name, e.message);
        assert_int_equal(o, want);
}

static bool state_file_exists(Fixture *f, const char *id) {
        char name[80];
        struct stat st;
        snprintf(name, sizeof(name), "%s.state.json", id);
        return fstatat(f->w.dirs.results_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* What a power loss can leave of an unsynced state file: the name, no content. */
static void truncate_state_file(Fixture *f, const char *id) {
        char name[80];
        snprintf(name, sizeof(name), "%s.state.json", id);
        _cleanup_close_ int fd = openat(f->w.dirs.results_fd, name,
                                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
        assert_true(fd >= 0);
}

static void test_final_request_loses_stale_state_file(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};

        capture(f, "fin1", "forbidden", CAPTURE_REJECTED);
        assert_false(state_file_exists(f, "fin1"));
        truncate_state_file(f, "fin1"); /* brought back by a power loss */
        assert_true(recover_at_start(&f->w, &e) >= 0);
        assert_false(state_file_exists(f, "fin1"));
}

static void test_queued_request_gets_complete_state_file(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        _cleanup_free_ char *buf = NULL;
        _cleanup_(json_decrefp) json_t *j = NULL;
        size_t len;

        capture(f, "q1", "local-reversible", CAPTURE_QUEUED);
        truncate_state_file(f, "q1");
        assert_true(recover_at_start(&f->w, &e) >= 0);
        _cleanup_close_ int fd = openat(f->w.dirs.results_fd, "q1.state.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        assert_true(fd >= 0);
        assert_int_equal(read_full_fd_bounded(fd, 4096, &buf, &len), 0);
        assert_int_equal(json_load_object_strict(buf, len, "state", &j, NULL), 0);
        assert_string_equal(json_string_value(json_object_get(j, "state")), "queued");
}

/* How many lines of the audit log record event for id. */
static int audit_lines(Fixture *f, const char *id, const char *event) {
        char want_id[96], want_ev[64], line[70000];
        int n = 0;
        snprintf(want_id, sizeof(want_id), "\"id\":\"%s\"", id);
        snprintf(want_ev, sizeof(want_ev), "\"event\":\"%s\"", event);
        _cleanup_close_ int fd = openat(f->w.dirs.state_fd, "audit/audit.jsonl", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        assert_true(fd >= 0);
        FILE *fp = fdopen(TAKE_FD(fd), "re");
        assert_non_null(fp);
        while (fgets(line, sizeof(line), fp))
                n += strstr(line, want_id) && strstr(line, want_ev);
        fclose(fp);
        return n;
}

/* A job whose process died after publishing its result, before it marked the record final:
 * with its "finished" line not written yet (killed between publish and audit), or written
 * (killed between audit and record). Recovery adopts the result either way and the log holds
 * the ending exactly once (threat 10; tests/integration/test-crash.sh found the first case). */
static void publish_running(Fixture *f, const char *id) {
        RequestRecord rec;
        TfwError e = {0};
        capture(f, id, "local-reversible", CAPTURE_QUEUED);
        assert_int_equal(store_load(f->w.dirs.requests_fd, id, &rec, &e), 0);
        rec.state = STATE_RUNNING;
        assert_int_equal(store_save(f->w.dirs.requests_fd, &rec, &e), 0);
        _cleanup_(json_decrefp) json_t *res = result_build(&f->config, &rec, NULL, "succeeded", NULL, NULL, NULL);
        assert_non_null(res);
        _cleanup_close_ int sfd = publish_stage_begin(&f->w.dirs, id, &e);
        assert_true(sfd >= 0);
        assert_int_equal(publish_commit(&f->w.dirs, f->config.container_gid, id, res, &e), 0);
}

static void test_published_job_ending_audited_once(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        RequestRecord rec;

        publish_running(f, "died1"); /* before its line */
        publish_running(f, "died2"); /* after its line */
        assert_int_equal(store_load(f->w.dirs.requests_fd, "died2", &rec, &e), 0);
        snprintf(rec.status, sizeof(rec.status), "succeeded");
        finish_audit(&f->w, "finished", &rec, NULL, NULL, NULL);
        assert_int_equal(audit_lines(f, "died1", "finished"), 0);
        assert_int_equal(audit_lines(f, "died2", "finished"), 1);

        assert_true(recover_at_start(&f->w, &e) >= 0);
        for (int again = 0; again < 2; again++) {
                assert_int_equal(audit_lines(f, "died1", "finished"), 1);
                assert_int_equal(audit_lines(f, "died2", "finished"), 1);
                assert_int_equal(audit_lines(f, "died1", "interrupted"), 0);
                assert_int_equal(store_load(f->w.dirs.requests_fd, "died1", &rec, &e), 0);
                assert_int_equal(rec.state, STATE_FINAL);
                assert_string_equal(rec.status, "succeeded");
                assert_true(recover_at_start(&f->w, &e) >= 0); /* and once more: nothing new */
        }
}

/* A rejection is captured final (so a crash never queues it): killed after its result was
 * published, before its "rejected" line, the next start records it, once. And an ending of an
 * earlier request under the same id (ids are free again after retention) is not taken for
 * this one's: another sha256. */
static void test_rejection_and_reused_id_endings(void **state) {
        Fixture *f = worker_fixture(state);
        TfwError e = {0};
        const char *body = "{\"version\":1,\"id\":\"rej1\",\"action_class\":\"forbidden\",\"argv\":[\"true\"]}";
        RequestRecord rec = {.id = "rej1", .state = STATE_FINAL, .status = "rejected", .action_class = -1,
                             .ending_unrecorded = true};
        assert_int_equal(sha256_buffer_hex(body, strlen(body), rec.sha256), 0);
        assert_int_equal(store_capture(f->w.dirs.requests_fd, &rec, body, strlen(body), now_realtime(), NULL, &e), 0);
        _cleanup_(json_decrefp) json_t *res = result_build(&f->config, &rec, NULL, "rejected", "forbidden", "no", NULL);
        _cleanup_close_ int sfd = publish_stage_begin(&f->w.dirs, "rej1", &e);
        assert_true(sfd >= 0);
        assert_int_equal(publish_commit(&f->w.dirs, f->config.container_gid, "rej1", res, &e), 0);

        RequestRecord old = {.id = "died3", .status = "succeeded"};
        memset(old.sha256, 'a', 64);
        finish_audit(&f->w, "finished", &old, NULL, NULL, NULL); /* a request of last month */
        publish_running(f, "died3");

        assert_int_equal(audit_lines(f, "rej1", "rejected"), 0);
        assert_int_equal(audit_lines(f, "died3", "finished"), 1);
        for (int again = 0; again < 2; again++) {
                assert_true(recover_at_start(&f->w, &e) >= 0);
                assert_int_equal(audit_lines(f, "rej1", "rejected"), 1);
                assert_int_equal(audit_lines(f, "died3", "finished"), 2);
        }
        assert_int_equal(store_load(f->w.dirs.requests_fd, "rej1", &rec, &e), 0);
        assert_false(rec.ending_unrecorded);
}

int main(void) {
#define T(x) cmocka_unit_test_setup_teardown(x, worker_fixture_setup, worker_fixture_teardown)
        const struct CMUnitTest tests[] = {
                T(test_final_request_loses_stale_state_file),
                T(test_queued_request_gets_complete_state_file),
                T(test_published_job_ending_audited_once),
                T(test_rejection_and_reused_id_endings),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
