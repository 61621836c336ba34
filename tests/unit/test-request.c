/* SPDX-License-Identifier: MIT */
/* The version 1 request parser: one test per rejection rule of contract section 4, each fixture
 * under tests/data/request/, plus the happy paths and the bounded read. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "parser/request.h"
#include "tests/unit/lib/tfw-test.h"

typedef struct Case {
        const char *fixture;
        const char *expected_id; /* NULL: the fixture's own id is not checked */
        const char *code;        /* NULL: must parse */
} Case;

static const Case cases[] = {
        {"ok-minimal.json", "cargo_test_1", NULL},
        {"ok-full.json", "cargo_test_1", NULL},
        {"id-64.json", NULL, NULL},
        {"timeout-max.json", "a", NULL},
        {"reason-1024.json", "a", NULL},
        {"cwd-ok.json", "a", NULL},
        {"cwd-dot.json", "a", NULL},
        {"cwd-1023.json", "a", NULL},
        {"cwd-control-below.json", "a", NULL}, /* only the root's control directory is excluded */
        {"cwd-absolute.json", "a", "bad_cwd"},
        {"cwd-dotdot.json", "a", "bad_cwd"},
        {"cwd-dotdot-only.json", "a", "bad_cwd"},
        {"cwd-empty.json", "a", "bad_cwd"},
        {"cwd-trailing-slash.json", "a", "bad_cwd"},
        {"cwd-double-slash.json", "a", "bad_cwd"},
        {"cwd-inner-dot.json", "a", "bad_cwd"},
        {"cwd-control.json", "a", "bad_cwd"},
        {"cwd-control-only.json", "a", "bad_cwd"},
        {"cwd-1025.json", "a", "bad_cwd"},
        {"cwd-number.json", "a", "bad_type"},
        {"changes-false.json", "a", NULL},
        {"changes-string.json", "a", "bad_type"},
        {"changes-number.json", "a", "bad_type"},
        {"cwd-null.json", "a", "bad_type"},
        {"class-forbidden.json", "a", NULL}, /* a valid class: the orchestrator rejects it */
        {"unknown-field.json", "a", "unknown_field"},
        {"duplicate-key.json", NULL, "duplicate_key"},
        {"nul-raw.json", "a", "nul_byte"},
        {"nul-escaped.json", "a", "nul_byte"},
        {"nul-escaped-key.json", "a", "nul_byte"},
        {"invalid-utf8.json", "a", "invalid_utf8"},
        {"invalid-utf8-surrogate.json", "a", "invalid_utf8"},
        {"bad-json.json", "a", "bad_json"},
        {"trailing-data.json", "a", "bad_json"},
        {"not-object.json", "a", "bad_type"},
        {"version-real.json", "a", "bad_type"},
        {"version-string.json", "a", "bad_type"},
        {"version-2.json", "a", "unsupported_version"},
        {"version-missing.json", "a", "missing_field"},
        {"id-missing.json", "a", "missing_field"},
        {"id-number.json", "a", "bad_type"},
        {"id-uppercase.json", NULL, "bad_id"},
        {"id-leading-dash.json", NULL, "bad_id"},
        {"id-slash.json", NULL, "bad_id"},
        {"id-dot.json", NULL, "bad_id"},
        {"id-empty.json", NULL, "bad_id"},
        {"id-65.json", NULL, "bad_id"},
        {"ok-minimal.json", "cargo_test_2", "id_mismatch"},
        {"class-missing.json", "a", "missing_field"},
        {"class-unknown.json", "a", "bad_action_class"},
        {"class-case.json", "a", "bad_action_class"},
        {"class-number.json", "a", "bad_type"},
        {"argv-missing.json", "a", "missing_field"},
        {"argv-string.json", "a", "bad_type"},
        {"argv-empty.json", "a", "empty_argv"},
        {"argv0-empty.json", "a", "empty_argv"},
        {"argv-number.json", "a", "bad_type"},
        {"argv-null.json", "a", "bad_type"},
        {"timeout-real.json", "a", "bad_type"},
        {"timeout-string.json", "a", "bad_type"},
        {"timeout-null.json", "a", "bad_type"},
        {"timeout-zero.json", "a", "out_of_range"},
        {"timeout-negative.json", "a", "out_of_range"},
        {"timeout-above.json", "a", "timeout_above_policy"},
        {"timeout-huge.json", "a", "out_of_range"},
        {"reason-number.json", "a", "bad_type"},
        {"reason-1025.json", "a", "reason_too_large"},
};

static void test_case(void **state) {
        const Case *c = *state;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_request_ Request *req = NULL;
        char path[256];
        TfwError e = {0};

        snprintf(path, sizeof(path), "request/%s", c->fixture);
        fd = tfw_open_fixture(path);
        int r = request_parse_fd(fd, c->expected_id, NULL, &req, &e);
        if (!c->code) {
                if (r < 0)
                        fail_msg("%s: expected success, got %s: %s", c->fixture, e.code, e.message);
                assert_non_null(req);
                return;
        }
        if (r >= 0)
                fail_msg("%s: expected %s, but it parsed", c->fixture, c->code);
        assert_null(req);
        assert_non_null(e.code);
        if (!streq(e.code, c->code))
                fail_msg("%s: expected %s, got %s (%s)", c->fixture, c->code, e.code, e.message);
        assert_true(e.message[0] != 0);
}

/* The parsed values of a full request, and the defaults of a minimal one. */
static void test_values(void **state) {
        (void) state;
        _cleanup_request_ Request *full = NULL, *min = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t len;
        char hex[SHA256_HEX_SIZE];
        TfwError e = {0};

        buf = tfw_read_fixture("request/ok-full.json", &len);
        assert_int_equal(request_parse_buffer(buf, len, "cargo_test_1", NULL, &full, &e), 0);
        assert_string_equal(full->id, "cargo_test_1");
        assert_int_equal(full->action_class, ACTION_EXTERNAL_REVERSIBLE);
        assert_int_equal(full->argc, 3);
        assert_string_equal(full->argv[0], "cargo");
        assert_string_equal(full->argv[2], "--offline");
        assert_null(full->argv[3]);
        assert_int_equal(full->timeout_seconds, 300);
        assert_true(full->timeout_explicit);
        assert_string_equal(full->reason, "run the tests \xc3\xa9");
        assert_int_equal(sha256_buffer_hex(buf, len, hex), 0);
        assert_string_equal(full->sha256, hex);

        free(buf);
        buf = tfw_read_fixture("request/ok-minimal.json", &len);
        RequestPolicy p = request_policy_default;
        p.default_timeout_seconds = 42;
        assert_int_equal(request_parse_buffer(buf, len, NULL, &p, &min, &e), 0);
        assert_int_equal(min->timeout_seconds, 42);
        assert_false(min->timeout_explicit);
        assert_null(min->reason);
        assert_null(min->cwd);

        _cleanup_request_ Request *c = NULL, *dot = NULL;
        free(buf);
        buf = tfw_read_fixture("request/cwd-ok.json", &len);
        assert_int_equal(request_parse_buffer(buf, len, NULL, NULL, &c, &e), 0);
        assert_string_equal(c->cwd, "src/lib");
        free(buf);
        buf = tfw_read_fixture("request/cwd-dot.json", &len);
        assert_int_equal(request_parse_buffer(buf, len, NULL, NULL, &dot, &e), 0);
        assert_null(dot->cwd); /* "." is /work itself */
        assert_true(dot->changes); /* the default */
        _cleanup_request_ Request *nc = NULL;
        free(buf);
        buf = tfw_read_fixture("request/changes-false.json", &len);
        assert_int_equal(request_parse_buffer(buf, len, NULL, NULL, &nc, &e), 0);
        assert_false(nc->changes);
        assert_string_not_equal(min->sha256, full->sha256);
}

/* Only the bytes up to the limit (+1) are read, whatever the file is. */
static void test_too_large(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *big = NULL;
        _cleanup_request_ Request *req = NULL;
        RequestPolicy p = request_policy_default;
        TfwError e = {0};
        size_t n = p.max_request_bytes + 1;

        big = malloc(n);
        assert_non_null(big);
        memset(big, ' ', n);
        const char *body = "{\"version\":1,\"id\":\"a\",\"action_class\":\"local-reversible\",\"argv\":[\"true\"]}";
        memcpy(big, body, strlen(body)); /* valid JSON followed by whitespace: only size is wrong */
        tfw_write_file(d->fd, "big.json", big, n);
        _cleanup_close_ int fd = openat(d->fd, "big.json", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(request_parse_fd(fd, "a", &p, &req, &e), -E2BIG);
        assert_string_equal(e.code, "too_large");
        /* Exactly at the limit it parses. */
        fd = safe_close(fd);
        tfw_write_file(d->fd, "edge.json", big, n - 1);
        fd = openat(d->fd, "edge.json", O_RDONLY | O_CLOEXEC);
        assert_int_equal(request_parse_fd(fd, "a", &p, &req, &e), 0);
        /* The buffer entry point refuses too. */
        request_free(req);
        req = NULL;
        assert_int_equal(request_parse_buffer(big, n, "a", &p, &req, &e), -E2BIG);
        assert_string_equal(e.code, "too_large");
}

/* A pipe that never ends: the reader stops after max+1 bytes instead of reading forever. */
static void test_endless_stream(void **state) {
        (void) state;
        int p[2];
        _cleanup_request_ Request *req = NULL;
        RequestPolicy pol = request_policy_default;
        TfwError e = {0};

        pol.max_request_bytes = 100;
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        char junk[200];
        memset(junk, ' ', sizeof(junk));
        assert_int_equal(write(p[1], junk, sizeof(junk)), (ssize_t) sizeof(junk));
        /* The write end stays open: a reader that wanted EOF would block here forever. */
        assert_int_equal(request_parse_fd(p[0], "a", &pol, &req, &e), -E2BIG);
        assert_string_equal(e.code, "too_large");
        close(p[0]);
        close(p[1]);
}

static char *make_argv_request(size_t count, size_t each) {
        size_t cap = 128 + count * (each + 4);
        char *s = malloc(cap), *p = s;
        p += sprintf(p, "{\"version\":1,\"id\":\"a\",\"action_class\":\"local-reversible\",\"argv\":[");
        for (size_t i = 0; i < count; i++) {
                *p++ = i ? ',' : ' ';
                *p++ = '"';
                memset(p, 'x', each);
                p += each;
                *p++ = '"';
        }
        strcpy(p, "]}");
        return s;
}

static void test_argv_limits(void **state) {
        (void) state;
        RequestPolicy p = request_policy_default;
        TfwError e = {0};
        Request *req = NULL;
        p.max_request_bytes = 1 << 20;

        /* 256 strings pass, 257 do not. */
        _cleanup_free_ char *ok = make_argv_request(256, 1), *over = make_argv_request(257, 1);
        assert_int_equal(request_parse_buffer(ok, strlen(ok), "a", &p, &req, &e), 0);
        req = request_free(req);
        assert_int_equal(request_parse_buffer(over, strlen(over), "a", &p, &req, &e), -E2BIG);
        assert_string_equal(e.code, "argv_too_large");

        /* Total bytes (each string + its NUL): 64 strings of 1023 bytes = 65536 pass, one more
         * byte does not. */
        _cleanup_free_ char *b_ok = make_argv_request(64, 1023), *b_over = make_argv_request(64, 1024);
        assert_int_equal(request_parse_buffer(b_ok, strlen(b_ok), "a", &p, &req, &e), 0);
        req = request_free(req);
        assert_int_equal(request_parse_buffer(b_over, strlen(b_over), "a", &p, &req, &e), -E2BIG);
        assert_string_equal(e.code, "argv_too_large");
}

static void test_ids(void **state) {
        (void) state;
        assert_true(request_id_is_valid("a"));
        assert_true(request_id_is_valid("0"));
        assert_true(request_id_is_valid("cargo_test-1"));
        assert_false(request_id_is_valid("_a"));
        assert_false(request_id_is_valid("a b"));
        assert_false(request_id_is_valid("a\xc3\xa9"));
        assert_false(request_id_is_valid(".hidden"));
}

static void test_action_classes(void **state) {
        (void) state;
        for (int i = 0; i < _ACTION_CLASS_MAX; i++)
                assert_int_equal(action_class_from_string(action_class_to_string(i)), i);
        assert_int_equal(action_class_policy(ACTION_LOCAL_REVERSIBLE), ACTION_POLICY_RUN);
        assert_int_equal(action_class_policy(ACTION_FORBIDDEN), ACTION_POLICY_REJECT);
        const ActionClass approval[] = {ACTION_EXTERNAL_REVERSIBLE, ACTION_IRREVERSIBLE,
                                        ACTION_FINANCIAL, ACTION_PRODUCTION,
                                        ACTION_COMMUNICATIVE, ACTION_PRIVILEGED};
        for (size_t i = 0; i < ELEMENTSOF(approval); i++)
                assert_int_equal(action_class_policy(approval[i]), ACTION_POLICY_APPROVAL);
        assert_int_equal(action_class_from_string("local_reversible"), -EINVAL);
}

int main(void) {
        struct CMUnitTest tests[ELEMENTSOF(cases) + 6];
        char names[ELEMENTSOF(cases)][128];
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                snprintf(names[i], sizeof(names[i]), "request %s -> %s", cases[i].fixture,
                         cases[i].code ? cases[i].code : "ok");
                tests[n++] = (struct CMUnitTest){
                        .name = names[i],
                        .test_func = test_case,
                        .initial_state = (void *) &cases[i],
                };
        }
        tests[n++] = (struct CMUnitTest) cmocka_unit_test(test_values);
        tests[n++] = (struct CMUnitTest) cmocka_unit_test_setup_teardown(
                test_too_large, tfw_tmpdir_setup, tfw_tmpdir_teardown);
        tests[n++] = (struct CMUnitTest) cmocka_unit_test(test_endless_stream);
        tests[n++] = (struct CMUnitTest) cmocka_unit_test(test_argv_limits);
        tests[n++] = (struct CMUnitTest) cmocka_unit_test(test_ids);
        tests[n++] = (struct CMUnitTest) cmocka_unit_test(test_action_classes);
        return _cmocka_run_group_tests("request", tests, n, NULL, NULL);
}
