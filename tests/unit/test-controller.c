/* SPDX-License-Identifier: MIT */
/* The controller's side (issue 15; contract section 9): the request builder (it refuses what
 * the worker's parser would, with the worker's codes and the given limits; what it accepts
 * parses back to the same request), fresh ids, the atomic write into the inbox, the exit-status
 * mapping, worker.json built and parsed, a request's state read from a results directory, and
 * the MCP server answering a scripted session (malformed lines included) without a worker. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "controller/job-words.h"
#include "controller/list.h"
#include "controller/mcp-task.h"
#include "controller/mcp.h"
#include "controller/no-worker.h"
#include "controller/outcome.h"
#include "controller/request.h"
#include "controller/status.h"
#include "controller/terminal.h"
#include "parser/worker-info.h"
#include "tests/unit/lib/tfw-test.h"

static json_t *fields(const char *text) {
        json_error_t je;
        json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, &je);
        if (!j)
                fail_msg("bad test JSON: %s: %s", text, je.text);
        return j;
}

/* Build from JSON fields; NULL code: must succeed. */
static void build_case(const char *text, const RequestPolicy *limits, const char *code) {
        _cleanup_(json_decrefp) json_t *f = fields(text);
        ControllerRequest r = {};
        TfwError e = {0};
        int k = controller_request_build(f, limits, "t", &r, &e);
        if (!code) {
                if (k < 0)
                        fail_msg("%s: refused: %s (%s)", text, e.message, e.code);
                controller_request_done(&r);
                return;
        }
        if (k >= 0)
                fail_msg("%s: accepted, wanted %s", text, code);
        if (!e.code || strcmp(e.code, code) != 0)
                fail_msg("%s: code %s (%s), wanted %s", text, e.code, e.message, code);
}

static void test_build_refusals(void **state) {
        (void) state;
        RequestPolicy small = request_policy_default;
        small.max_argv = 3;
        small.max_argv_bytes = 16;
        small.max_timeout_seconds = 60;
        small.max_request_bytes = 300;

        build_case("{\"argv\":[\"true\"]}", NULL, NULL);
        build_case("{\"argv\":[\"a\",\"b\",\"c\"]}", &small, NULL);
        build_case("{\"argv\":[\"a\",\"b\",\"c\",\"d\"]}", &small, "argv_too_large");
        build_case("{\"argv\":[\"0123456789abcdef\"]}", &small, "argv_too_large"); /* 17 with its NUL */
        build_case("{\"argv\":[\"0123456789abcde\"]}", &small, NULL);             /* exactly 16 */
        build_case("{\"argv\":[\"true\"],\"timeout_seconds\":60}", &small, NULL);
        build_case("{\"argv\":[\"true\"],\"timeout_seconds\":61}", &small, "timeout_above_policy");
        build_case("{\"argv\":[\"true\"],\"timeout_seconds\":0}", NULL, "out_of_range");
        build_case("{\"argv\":[\"true\"],\"timeout_seconds\":\"5\"}", NULL, "bad_type");
        build_case("{\"argv\":[\"true\"],\"timeout_seconds\":5.0}", NULL, "bad_type");
        build_case("{\"argv\":[\"true\"],\"timeout_seconds\":null}", NULL, NULL); /* null: not given */
        build_case("{}", NULL, "missing_field");
        build_case("{\"argv\":null}", NULL, "bad_type");
        build_case("{\"argv\":[]}", NULL, "empty_argv");
        build_case("{\"argv\":[\"\"]}", NULL, "empty_argv");
        build_case("{\"argv\":[1]}", NULL, "bad_type");
        build_case("{\"argv\":\"true\"}", NULL, "bad_type");
        build_case("{\"argv\":[\"true\"],\"action_class\":\"forbidden\"}", NULL, "forbidden");
        build_case("{\"argv\":[\"true\"],\"action_class\":\"root\"}", NULL, "bad_action_class");
        build_case("{\"argv\":[\"true\"],\"action_class\":7}", NULL, "bad_type");
        build_case("{\"argv\":[\"true\"],\"id\":\"Bad\"}", NULL, "bad_id");
        build_case("{\"argv\":[\"true\"],\"id\":\"-a\"}", NULL, "bad_id");
        build_case("{\"argv\":[\"true\"],\"id\":\"../x\"}", NULL, "bad_id");
        build_case("{\"argv\":[\"true\"],\"id\":3}", NULL, "bad_type");
        build_case("{\"argv\":[\"true\"],\"version\":1}", NULL, "unknown_field");
        build_case("{\"argv\":[\"true\"],\"shell\":true}", NULL, "unknown_field");
        build_case("{\"argv\":[\"true\"],\"reason\":5}", NULL, "bad_type");

        char big[1200], text[1300];
        memset(big, 'r', 1025);
        big[1025] = 0;
        snprintf(text, sizeof(text), "{\"argv\":[\"true\"],\"reason\":\"%s\"}", big);
        build_case(text, NULL, "reason_too_large");
        big[1024] = 0;
        snprintf(text, sizeof(text), "{\"argv\":[\"true\"],\"reason\":\"%s\"}", big);
        build_case(text, NULL, NULL);
        /* The whole request counts too (max_request_bytes 300). */
        big[250] = 0;
        snprintf(text, sizeof(text), "{\"argv\":[\"true\"],\"reason\":\"%s\"}", big);
        build_case(text, &small, "too_large");

        _cleanup_(json_decrefp) json_t *notobj = json_array();
        ControllerRequest r = {};
        TfwError e = {0};
        assert_true(controller_request_build(notobj, NULL, "t", &r, &e) < 0);
        assert_string_equal(e.code, "bad_type");
}

/* What the builder accepts is a request the worker's parser reads back unchanged. */
static void test_build_roundtrip(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *f =
                fields("{\"argv\":[\"sh\",\"-c\",\"echo \\\"hi\\\"\\n\"],\"action_class\":\"irreversible\","
                       "\"timeout_seconds\":42,\"reason\":\"r\\u00e9ason\",\"id\":\"my_id-1\"}");
        ControllerRequest r = {};
        TfwError e = {0};
        assert_int_equal(controller_request_build(f, NULL, "t", &r, &e), 0);
        assert_string_equal(r.id, "my_id-1");
        assert_false(r.id_generated);
        assert_int_equal(r.policy, ACTION_POLICY_APPROVAL);
        assert_int_equal(r.timeout_seconds, 42);

        _cleanup_request_ Request *req = NULL;
        assert_int_equal(request_parse_buffer(r.bytes, r.len, "my_id-1", NULL, &req, &e), 0);
        assert_int_equal(req->argc, 3);
        assert_string_equal(req->argv[2], "echo \"hi\"\n");
        assert_int_equal(req->action_class, ACTION_IRREVERSIBLE);
        assert_string_equal(req->reason, "r\xc3\xa9" "ason");
        assert_string_equal(req->sha256, r.sha256);
        controller_request_done(&r);

        /* Defaults: a fresh id, local-reversible, the limits' default timeout. */
        _cleanup_(json_decrefp) json_t *g = fields("{\"argv\":[\"true\"]}");
        RequestPolicy p = request_policy_default;
        p.default_timeout_seconds = 77;
        assert_int_equal(controller_request_build(g, &p, "sub", &r, &e), 0);
        assert_true(r.id_generated);
        assert_true(request_id_is_valid(r.id));
        assert_memory_equal(r.id, "sub-", 4);
        assert_int_equal(r.policy, ACTION_POLICY_RUN);
        assert_int_equal(r.timeout_seconds, 77);
        assert_non_null(strstr(r.bytes, "\"action_class\":\"local-reversible\""));
        assert_null(strstr(r.bytes, "timeout_seconds")); /* the worker applies its own default */
        controller_request_done(&r);
}

static void test_fresh_ids(void **state) {
        (void) state;
        char a[REQUEST_ID_MAX + 1], b[REQUEST_ID_MAX + 1];
        assert_int_equal(controller_id_generate("sub", a), 0);
        assert_int_equal(controller_id_generate("sub", b), 0);
        assert_true(request_id_is_valid(a));
        assert_string_not_equal(a, b);
        assert_int_equal(controller_id_generate("Bad", a), -EINVAL);
        assert_int_equal(controller_id_generate("a-prefix-longer-than-16", a), -EINVAL);
}

static void test_fields_from_strings(void **state) {
        (void) state;
        char *argv[] = {(char *) "make", (char *) "-j2", NULL};
        _cleanup_(json_decrefp) json_t *f = NULL;
        TfwError e = {0};
        assert_int_equal(controller_fields_from_strings(argv, 2, "production", "30", "why", "x1", &f, &e), 0);
        assert_int_equal(json_integer_value(json_object_get(f, "timeout_seconds")), 30);
        assert_string_equal(json_string_value(json_object_get(f, "action_class")), "production");
        assert_int_equal(json_array_size(json_object_get(f, "argv")), 2);

        const char *bad_timeouts[] = {"", "5s", "-1", "+5", " 5", "1e3", "0x10", "1234567890123456789"};
        for (size_t i = 0; i < ELEMENTSOF(bad_timeouts); i++) {
                json_t *g = NULL;
                assert_true(controller_fields_from_strings(argv, 2, NULL, bad_timeouts[i], NULL, NULL, &g, &e) < 0);
                assert_string_equal(e.code, "bad_type");
        }
        char *latin1[] = {(char *) "caf\xe9", NULL};
        json_t *g = NULL;
        assert_true(controller_fields_from_strings(latin1, 1, NULL, NULL, NULL, NULL, &g, &e) < 0);
        assert_string_equal(e.code, "invalid_utf8");
        assert_true(controller_fields_from_strings(argv, 2, NULL, NULL, "\xff", NULL, &g, &e) < 0);
        assert_string_equal(e.code, "invalid_utf8");
}

/* Written through a dot-file and renamed without replacing an entry of the same name. */
static void test_request_write(void **state) {
        TestDir *t = *state;
        _cleanup_(json_decrefp) json_t *f = fields("{\"argv\":[\"true\"],\"id\":\"w1\"}");
        ControllerRequest r = {};
        TfwError e = {0};
        assert_int_equal(controller_request_build(f, NULL, "t", &r, &e), 0);
        assert_int_equal(controller_request_write(t->fd, &r, &e), 0);
        _cleanup_close_ int fd = openat(t->fd, "w1.json", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        _cleanup_free_ char *buf = NULL;
        size_t len;
        assert_int_equal(read_full_fd_bounded(fd, 1 << 16, &buf, &len), 0);
        assert_int_equal(len, r.len);
        assert_memory_equal(buf, r.bytes, len);
        /* A second write of the same id is refused and leaves no temporary behind. */
        assert_int_equal(controller_request_write(t->fd, &r, &e), -EEXIST);
        assert_string_equal(e.code, "duplicate_id");
        DIR *d = opendir_fd(t->fd);
        struct dirent *de;
        int n = 0;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.' || (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")))
                        n++;
        closedir(d);
        assert_int_equal(n, 1);
        controller_request_done(&r);
}

static json_t *result_of(const char *status, const char *code, const char *sig) {
        char text[256];
        snprintf(text, sizeof(text), "{\"status\":\"%s\",\"exit_code\":%s,\"signal\":%s}", status, code, sig);
        return fields(text);
}

static void test_exit_mapping(void **state) {
        (void) state;
        static const struct {
                const char *status, *code, *sig;
                int want;
        } cases[] = {
                {"succeeded", "0", "null", 0},
                {"failed", "3", "null", 3},
                {"failed", "255", "null", 255},
                {"failed", "1", "null", 1},
                {"failed", "0", "null", 1},    /* inconsistent: still a failure */
                {"failed", "256", "null", 1},  /* beyond 8 bits: still non-zero */
                {"failed", "-2", "null", 1},
                {"failed", "null", "null", 1},
                {"timed_out", "null", "null", 124},
                {"killed", "null", "9", 137},
                {"killed", "null", "15", 143},
                {"killed", "null", "null", 137}, /* a limit's kill without a signal recorded */
                {"killed", "null", "0", 137},
                {"killed", "null", "500", 137},
                {"rejected", "null", "null", 125},
                {"denied", "null", "null", 125},
                {"expired", "null", "null", 125},
                {"error", "null", "null", 125},
                {"interrupted", "null", "null", 125},
                {"something-new", "0", "null", 125},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_(json_decrefp) json_t *r = result_of(cases[i].status, cases[i].code, cases[i].sig);
                int got = controller_exit_status(r);
                if (got != cases[i].want)
                        fail_msg("%s exit_code %s signal %s: %d, want %d", cases[i].status, cases[i].code,
                                 cases[i].sig, got, cases[i].want);
        }
        /* every status submit --help and the man page say is 125 (they print this list) */
        _cleanup_free_ char *list = strdup(CONTROLLER_EXIT_NOT_RUN_STATUSES);
        size_t n = 0;
        assert_non_null(list);
        for (char *save = NULL, *s = strtok_r(list, ", ", &save); s; s = strtok_r(NULL, ", ", &save), n++) {
                _cleanup_(json_decrefp) json_t *r = result_of(s, "null", "null");
                if (controller_exit_status(r) != CONTROLLER_EXIT_NOT_RUN)
                        fail_msg("%s: %d, but submit --help says 125", s, controller_exit_status(r));
        }
        assert_int_equal(n, 6);
        _cleanup_(json_decrefp) json_t *none = json_object();
        assert_int_equal(controller_exit_status(none), 125);
        _cleanup_(json_decrefp) json_t *wrong = fields("{\"status\":3}");
        assert_int_equal(controller_exit_status(wrong), 125);
}

static void test_worker_info(void **state) {
        (void) state;
        RequestPolicy p = request_policy_default;
        p.max_argv = 9;
        WorkerInfo in = {.name = "demo", .workspace = "/w", .results_dir = "/r", .config = "/etc/c.json", .limits = p,
                         .job = {.memory_bytes = 1, .cpus_milli = 1000, .pids = 1, .max_log_bytes = 1,
                                 .max_artifact_bytes = 1, .max_artifact_entries = 1}};
        _cleanup_(json_decrefp) json_t *j = worker_info_build(&in, 0);
        assert_non_null(j);
        _cleanup_free_ char *s = json_dumps(j, JSON_COMPACT);
        assert_non_null(strstr(s, "\"inbox\":\"/w/.tentaflake-worker/inbox\""));
        assert_non_null(strstr(s, "\"forbidden\":\"rejected\""));
        assert_non_null(strstr(s, "\"local-reversible\":\"run\""));

        WorkerInfo out;
        _cleanup_(json_decrefp) json_t *keep = NULL;
        TfwError e = {0};
        assert_int_equal(worker_info_parse(s, strlen(s), &out, &keep, &e), 0);
        assert_string_equal(out.results_dir, "/r");
        assert_string_equal(out.config, "/etc/c.json");
        assert_int_equal(out.limits.max_argv, 9);
        assert_int_equal(out.limits.max_timeout_seconds, request_policy_default.max_timeout_seconds);

        static const struct {
                const char *text, *code;
        } bad[] = {
                {"{\"version\":2,\"results_dir\":\"/r\"}", "unsupported_version"},
                {"{\"results_dir\":\"/r\"}", "missing_field"},
                {"{\"version\":1}", "missing_field"},
                {"{\"version\":1,\"results_dir\":\"r\"}", "bad_path"},
                {"{\"version\":1,\"results_dir\":\"/r/../x\"}", "bad_path"},
                {"{\"version\":1,\"results_dir\":\"/r\",\"limits\":{\"max_argv\":0}}", "out_of_range"},
                {"{\"version\":1,\"results_dir\":\"/r\",\"limits\":{\"max_argv\":\"9\"}}", "bad_type"},
                {"{\"version\":1,\"results_dir\":\"/r\",\"limits\":[]}", "bad_type"},
                {"{\"version\":1,\"version\":1,\"results_dir\":\"/r\"}", "duplicate_key"},
                {"[1]", "bad_type"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_t *k = NULL;
                int r = worker_info_parse(bad[i].text, strlen(bad[i].text), &out, &k, &e);
                if (r >= 0 || !e.code || strcmp(e.code, bad[i].code) != 0)
                        fail_msg("%s: %d %s, wanted %s", bad[i].text, r, e.code, bad[i].code);
        }
        /* Unknown keys are a newer worker's news, not an error. */
        const char *newer = "{\"version\":1,\"results_dir\":\"/r\",\"something\":{\"new\":1}}";
        json_t *k = NULL;
        assert_int_equal(worker_info_parse(newer, strlen(newer), &out, &k, &e), 0);
        assert_false(out.has_job); /* an older worker's document: what a job gets is not known */
        json_decref(k);
}

/* "job" (issue 35): what a job gets, written from the config and read back by the client. */
static void test_worker_info_job(void **state) {
        (void) state;
        _cleanup_(json_decrefp) json_t *allow = json_pack("[s, s]", "registry.npmjs.org:443", "*.pythonhosted.org:443");
        _cleanup_(json_decrefp) json_t *paths = json_pack("[s]", "node_modules");
        WorkerInfo in = {.name = "demo", .workspace = "/w", .results_dir = "/r", .limits = request_policy_default,
                         .job = {.memory_bytes = 512 << 20, .cpus_milli = 1500, .pids = 256, .max_log_bytes = 1 << 20,
                                 .max_artifact_bytes = 1 << 30, .max_artifact_entries = 10000, .network_allow = allow,
                                 .max_upload_bytes = 1 << 20, .max_download_bytes = 2u << 30, .max_connections = 128,
                                 .cache_paths = paths, .changes = true}};
        _cleanup_(json_decrefp) json_t *j = worker_info_build(&in, 0);
        assert_non_null(j);
        _cleanup_free_ char *s = json_dumps(j, JSON_COMPACT);
        assert_non_null(strstr(s, "\"cpus\":\"1.5\""));
        WorkerInfo out;
        _cleanup_(json_decrefp) json_t *keep = NULL;
        TfwError e = {0};
        assert_int_equal(worker_info_parse(s, strlen(s), &out, &keep, &e), 0);
        assert_true(out.has_job);
        assert_int_equal(out.job.memory_bytes, 512 << 20);
        assert_int_equal(out.job.cpus_milli, 1500);
        assert_int_equal(out.job.max_connections, 128);
        assert_true(out.job.changes);
        assert_true(json_equal(out.job.network_allow, allow));
        assert_true(json_equal(out.job.cache_paths, paths));
        assert_null(out.job.engine); /* none given: none written, none read */

        /* The engine the operator chose (issue 48): written, read back. */
        in.job.engine = "runc";
        in.job.kernel = "host";
        _cleanup_(json_decrefp) json_t *ji = worker_info_build(&in, 0);
        _cleanup_free_ char *si = json_dumps(ji, JSON_COMPACT);
        assert_non_null(strstr(si, "\"isolation\":{\"engine\":\"runc\",\"kernel\":\"host\"}"));
        _cleanup_(json_decrefp) json_t *keepi = NULL;
        assert_int_equal(worker_info_parse(si, strlen(si), &out, &keepi, &e), 0);
        assert_string_equal(out.job.engine, "runc");
        assert_string_equal(out.job.kernel, "host");
        in.job.engine = in.job.kernel = NULL;

        /* No network, no cache: null, and said so. */
        in.job.network_allow = in.job.cache_paths = NULL;
        in.job.cpus_milli = 2000;
        in.job.changes = false;
        _cleanup_(json_decrefp) json_t *j2 = worker_info_build(&in, 0);
        _cleanup_free_ char *s2 = json_dumps(j2, JSON_COMPACT);
        assert_non_null(strstr(s2, "\"network\":null,\"cache\":null,\"changes\":false"));
        assert_non_null(strstr(s2, "\"cpus\":\"2.0\""));
        _cleanup_(json_decrefp) json_t *keep2 = NULL;
        assert_int_equal(worker_info_parse(s2, strlen(s2), &out, &keep2, &e), 0);
        assert_true(out.has_job);
        assert_null(out.job.network_allow);
        assert_null(out.job.cache_paths);
        assert_false(out.job.changes);

#define LIM "\"limits\":{\"memory_bytes\":1,\"cpus\":\"1.0\",\"pids\":1,\"max_log_bytes\":1," \
            "\"max_artifact_bytes\":1,\"max_artifact_entries\":1}"
#define DOC(job) "{\"version\":1,\"results_dir\":\"/r\",\"job\":" job "}"
        static const struct {
                const char *text, *code;
        } bad[] = {
                {DOC("[]"), "bad_type"},
                {DOC("{" LIM ",\"cache\":null,\"changes\":true}"), "missing_field"},
                {DOC("{" LIM ",\"network\":null,\"cache\":null,\"changes\":1}"), "bad_type"},
                {DOC("{" LIM ",\"network\":{\"allow\":[\"example.org\"],\"max_upload_bytes\":1,"
                     "\"max_download_bytes\":1,\"max_connections\":1},\"cache\":null,\"changes\":true}"), "bad_value"},
                {DOC("{" LIM ",\"network\":{\"allow\":[],\"max_upload_bytes\":1,"
                     "\"max_download_bytes\":1,\"max_connections\":1},\"cache\":null,\"changes\":true}"), "bad_type"},
                {DOC("{" LIM ",\"network\":null,\"cache\":{\"paths\":[\"../up\"]},\"changes\":true}"), "bad_value"},
                {DOC("{" LIM ",\"network\":null,\"cache\":{\"paths\":[\"a\\nb\"]},\"changes\":true}"), "bad_value"},
                {DOC("{\"limits\":{\"memory_bytes\":1,\"cpus\":\"lots\",\"pids\":1,\"max_log_bytes\":1,"
                     "\"max_artifact_bytes\":1,\"max_artifact_entries\":1},\"network\":null,\"cache\":null,"
                     "\"changes\":true}"), "bad_value"},
                /* an engine or a kernel this client does not know never reaches a model's words */
                {DOC("{" LIM ",\"network\":null,\"cache\":null,\"changes\":true,"
                     "\"isolation\":{\"engine\":\"lxc\",\"kernel\":\"host\"}}"), "bad_value"},
                {DOC("{" LIM ",\"network\":null,\"cache\":null,\"changes\":true,"
                     "\"isolation\":{\"engine\":\"runc\",\"kernel\":\"trust me\"}}"), "bad_value"},
                {DOC("{" LIM ",\"network\":null,\"cache\":null,\"changes\":true,\"isolation\":\"runc\"}"), "bad_type"},
                {DOC("{\"limits\":{\"memory_bytes\":0,\"cpus\":\"1.0\",\"pids\":1,\"max_log_bytes\":1,"
                     "\"max_artifact_bytes\":1,\"max_artifact_entries\":1},\"network\":null,\"cache\":null,"
                     "\"changes\":true}"), "out_of_range"},
        };
#undef DOC
#undef LIM
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_t *k = NULL;
                int r = worker_info_parse(bad[i].text, strlen(bad[i].text), &out, &k, &e);
                if (r >= 0 || !e.code || strcmp(e.code, bad[i].code) != 0)
                        fail_msg("%s: %d %s (%s), wanted %s", bad[i].text, r, e.code, e.message, bad[i].code);
                json_decref(k);
        }
}

static void put(int dir_fd, const char *name, const char *text) {
        tfw_write_file(dir_fd, name, text, (size_t) -1);
}

/* A results directory as the worker leaves it, read from the controller's side. */
static void test_status(void **state) {
        TestDir *t = *state;
        ControllerStatus st;

        assert_int_equal(mkdirat(t->fd, "done", 0750), 0);
        put(t->fd, "done/result.json", "{\"version\":1,\"id\":\"done\",\"status\":\"failed\",\"exit_code\":2}");
        put(t->fd, "done/job.log", "line one\nline two\nline three\n");
        assert_int_equal(mkdirat(t->fd, "done/artifacts", 0750), 0);
        assert_int_equal(mkdirat(t->fd, "done/artifacts/sub", 0750), 0);
        put(t->fd, "done/artifacts/sub/b.txt", "b");
        put(t->fd, "done/artifacts/a.txt", "a");
        assert_int_equal(symlinkat("/etc/passwd", t->fd, "done/artifacts/link"), 0);
        put(t->fd, "wait.state.json", "{\"id\":\"wait\",\"state\":\"pending\",\"since\":\"2026-01-01T00:00:00Z\"}");
        put(t->fd, "run.state.json", "{\"id\":\"run\",\"state\":\"running\",\"since\":\"2026-01-01T00:00:00Z\"}");
        assert_int_equal(mkdirat(t->fd, ".rejected", 0750), 0);
        put(t->fd, ".rejected/dup.json-20260101T000000Z.json",
            "{\"version\":1,\"name\":\"dup.json\",\"status\":\"rejected\",\"error\":\"duplicate_id\","
            "\"message\":\"id in use\",\"rejected_at\":\"2026-01-01T00:00:00Z\"}");

        assert_int_equal(controller_status(t->fd, "done", 0, false, &st), 0);
        assert_int_equal(st.state, CONTROLLER_FINAL);
        assert_int_equal(controller_exit_status(st.result), 2);
        controller_status_done(&st);
        assert_int_equal(controller_status(t->fd, "wait", 0, false, &st), 0);
        assert_int_equal(st.state, CONTROLLER_PENDING);
        assert_int_equal(controller_status(t->fd, "run", 0, false, &st), 0);
        assert_int_equal(st.state, CONTROLLER_RUNNING);
        assert_int_equal(controller_status(t->fd, "nothing", 0, true, &st), 0);
        assert_int_equal(st.state, CONTROLLER_UNKNOWN);
        assert_int_equal(controller_status(t->fd, "../etc", 0, true, &st), -EINVAL);

        /* A state file names the request's argv: one far longer than the state itself still reads. */
        _cleanup_free_ char *big = malloc(70000);
        assert_non_null(big);
        int n = snprintf(big, 70000, "{\"id\":\"long\",\"state\":\"running\",\"since\":\"2026-01-01T00:00:00Z\","
                                     "\"action_class\":\"local-reversible\",\"argv\":[\"echo\",\"");
        memset(big + n, 'x', 65000);
        strcpy(big + n + 65000, "\"]}");
        put(t->fd, "long.state.json", big);
        assert_int_equal(controller_status(t->fd, "long", 0, false, &st), 0);
        assert_int_equal(st.state, CONTROLLER_RUNNING);
        controller_status_done(&st);

        /* The .rejected/ record counts only when looked for, and only from its time on. */
        assert_int_equal(controller_status(t->fd, "dup", 0, false, &st), 0);
        assert_int_equal(st.state, CONTROLLER_UNKNOWN);
        usec_t at;
        assert_int_equal(parse_rfc3339("2026-01-01T00:00:00Z", &at), 0);
        assert_int_equal(controller_status(t->fd, "dup", at, true, &st), 0);
        assert_int_equal(st.state, CONTROLLER_FINAL);
        assert_true(st.anonymous);
        assert_string_equal(json_string_value(json_object_get(st.result, "error")), "duplicate_id");
        assert_int_equal(controller_exit_status(st.result), 125);
        controller_status_done(&st);
        assert_int_equal(controller_status(t->fd, "dup", at + 2 * USEC_PER_SEC, true, &st), 0);
        assert_int_equal(st.state, CONTROLLER_UNKNOWN);

        /* Log tail: cut at a line start; artifacts: regular files only, sorted. */
        char *tail = NULL;
        bool cut;
        assert_int_equal(controller_log_tail(t->fd, "done", 14, &tail, &cut), 0);
        assert_true(cut);
        assert_string_equal(tail, "line three\n");
        free(tail);
        assert_int_equal(controller_log_tail(t->fd, "done", 1000, &tail, &cut), 0);
        assert_false(cut);
        assert_string_equal(tail, "line one\nline two\nline three\n");
        free(tail);
        json_t *paths = NULL;
        bool trunc;
        assert_int_equal(controller_artifacts(t->fd, "done", 100, &paths, &trunc), 0);
        assert_int_equal(json_array_size(paths), 2);
        assert_string_equal(json_string_value(json_array_get(paths, 0)), "a.txt");
        assert_string_equal(json_string_value(json_array_get(paths, 1)), "sub/b.txt");
        assert_false(trunc);
        json_decref(paths);
        assert_int_equal(controller_artifacts(t->fd, "done", 1, &paths, &trunc), 0);
        assert_int_equal(json_array_size(paths), 1);
        assert_true(trunc);
        json_decref(paths);

}

static void short_is(const char *argv_json, size_t size, const char *want) {
        json_error_t je;
        _cleanup_(json_decrefp) json_t *a = json_loads(argv_json, 0, &je);
        char buf[128];
        assert_true(size <= sizeof(buf));
        assert_string_equal(controller_command_short(a, buf, size), want);
}

/* A command in short: as a shell reads it back, nothing a terminal acts on, cut with "...". */
static void test_command_short(void **state) {
        (void) state;
        short_is("[\"make\", \"test\"]", 80, "make test");
        short_is("[\"sh\", \"-c\", \"echo 'hi' there\"]", 80, "sh -c 'echo '\\''hi'\\'' there'");
        short_is("[\"printf\", \"\\u001b[2J\\u0007\"]", 80, "printf '\\x1b[2J\\x07'");
        short_is("[\"echo\", \"\\u009b31m\"]", 80, "echo '\\u009b31m'");     /* C1 CSI as UTF-8 */
        short_is("[\"echo\", \"a\\u202eb\\nc\"]", 80, "echo 'a\\u202eb\\x0ac'"); /* RLO, a newline */
        short_is("[\"echo\", \"caf\\u00e9\"]", 80, "echo 'caf\xc3\xa9'"); /* text stays */
        short_is("[\"abcdefghij\", \"klmnopqrstuvwxyz\"]", 16, "abcdefghij k...");
        short_is("[\"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\"]", 10, "'\xc3\xa9\xc3\xa9...");
        short_is("[]", 80, "-");
        short_is("[\"a\", 1]", 80, "-");
        short_is("{}", 80, "-");
}

/* The controller's list: the inbox (its own bytes), the state files, the results; a table or a
 * sentence when there is nothing. */
static void test_list(void **state) {
        TestDir *t = *state;
        ControllerSite s = CONTROLLER_SITE_NULL;
        _cleanup_(json_decrefp) json_t *l = NULL;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;

        assert_int_equal(mkdirat(t->fd, "inbox", 0750), 0);
        assert_int_equal(mkdirat(t->fd, "results", 0750), 0);
        s.inbox_fd = openat(t->fd, "inbox", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        s.results_fd = openat(t->fd, "results", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        s.results_dir = (char *) "/r";
        s.policy = request_policy_default;

        /* Nothing at all: said in a sentence. */
        assert_int_equal(controller_list(&s, 10, &l), 0);
        FILE *f = open_memstream(&text, &len);
        controller_list_print(l, s.results_dir, f);
        fclose(f);
        assert_non_null(strstr(text, "No requests in this workspace"));
        json_decref(l);
        l = NULL;
        free(text);
        text = NULL;

        put(s.inbox_fd, "new1.json", "{\"version\":1,\"argv\":[\"make\",\"check\"],\"action_class\":\"irreversible\"}");
        put(s.inbox_fd, "junk1.json", "not json");
        put(s.inbox_fd, "new1.cancel", "");
        put(s.inbox_fd, ".x.json.tmp", "{}");
        put(s.inbox_fd, "NotAnId.json", "{}");
        assert_int_equal(symlinkat("/etc/passwd", s.inbox_fd, "link.json"), 0);
        put(s.results_fd, "wait.state.json", "{\"id\":\"wait\",\"state\":\"pending\",\"since\":\"2026-01-01T00:00:02Z\"}");
        put(s.results_fd, "run.state.json", "{\"id\":\"run\",\"state\":\"running\",\"since\":\"2026-01-01T00:00:01Z\","
                                             "\"action_class\":\"local-reversible\",\"argv\":[\"make\",\"-j2\"]}");
        for (int i = 0; i < 3; i++) {
                char d[32], body[512];
                snprintf(d, sizeof(d), "done%d", i);
                assert_int_equal(mkdirat(s.results_fd, d, 0750), 0);
                snprintf(d, sizeof(d), "done%d/result.json", i);
                snprintf(body, sizeof(body),
                         "{\"version\":1,\"id\":\"done%d\",\"status\":\"failed\",\"exit_code\":%d,\"signal\":null,"
                         "\"action_class\":\"local-reversible\",\"argv\":[\"false\",\"\\u001b]0;x\\u0007\"],"
                         "\"submitted_at\":\"2026-01-01T00:00:0%dZ\",\"finished_at\":\"2026-01-01T00:01:0%dZ\"}",
                         i, i + 1, i, i);
                put(s.results_fd, d, body);
        }
        /* A state file left beside its result counts as the result. */
        put(s.results_fd, "done2.state.json", "{\"id\":\"done2\",\"state\":\"running\",\"since\":\"2026-01-01T00:00:00Z\"}");

        assert_int_equal(controller_list(&s, 2, &l), 0);
        json_t *inbox = json_object_get(l, "inbox"), *active = json_object_get(l, "active"),
               *recent = json_object_get(l, "recent");
        assert_int_equal(json_array_size(inbox), 2); /* new1 and junk1 (a request the worker will reject) */
        for (size_t i = 0; i < 2; i++) {
                json_t *row = json_array_get(inbox, i);
                const char *id = json_string_value(json_object_get(row, "id"));
                if (streq(id, "new1")) {
                        assert_string_equal(json_string_value(json_object_get(row, "command")), "make check");
                        assert_string_equal(json_string_value(json_object_get(row, "action_class")), "irreversible");
                } else {
                        assert_string_equal(id, "junk1");
                        assert_string_equal(json_string_value(json_object_get(row, "command")), "-");
                        assert_true(json_is_null(json_object_get(row, "action_class")));
                }
        }
        assert_int_equal(json_integer_value(json_object_get(l, "inbox_other")), 2); /* NotAnId.json, link.json */
        assert_int_equal(json_array_size(active), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(active, 0), "id")), "run"); /* oldest first */
        assert_string_equal(json_string_value(json_object_get(json_array_get(active, 1), "id")), "wait");
        /* The class and command from the state file; a state file without them (an older worker's): "-". */
        assert_string_equal(json_string_value(json_object_get(json_array_get(active, 0), "command")), "make -j2");
        assert_string_equal(json_string_value(json_object_get(json_array_get(active, 0), "action_class")), "local-reversible");
        assert_string_equal(json_string_value(json_object_get(json_array_get(active, 1), "command")), "-");
        assert_int_equal(json_array_size(recent), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(recent, 0), "id")), "done2"); /* newest first */
        assert_string_equal(json_string_value(json_object_get(json_array_get(recent, 1), "id")), "done1");
        assert_string_equal(json_string_value(json_object_get(json_array_get(recent, 0), "command")), "false '\\x1b]0;x\\x07'");
        assert_int_equal(json_integer_value(json_object_get(l, "recent_more")), 1);

        f = open_memstream(&text, &len);
        controller_list_print(l, s.results_dir, f);
        fclose(f);
        assert_non_null(strstr(text, "ID "));
        assert_non_null(strstr(text, "COMMAND\n"));
        assert_non_null(strstr(text, "new1 "));
        assert_non_null(strstr(text, "irreversible"));
        assert_non_null(strstr(text, "running "));
        assert_non_null(strstr(text, "failed     3 "));
        assert_non_null(strstr(text, "(1 older result(s) not listed"));
        assert_null(strchr(text, '\033'));
        assert_null(strchr(text, '\007'));
        safe_close(s.inbox_fd);
        safe_close(s.results_fd);
}

static void words_have(const char *words, const char *want, bool present) {
        if ((strstr(words, want) != NULL) != present)
                fail_msg("the words %s '%s': %s", present ? "lack" : "have", want, words);
}

/* Saying when nothing answers (issue 35, item 4): whether a worker took the request, and the
 * words that name the worker and the unit that runs it. */
static void test_no_worker(void **state) {
        TestDir *t = *state;
        ControllerSite s = CONTROLLER_SITE_NULL;
        s.workspace = t->path;
        s.inbox_fd = t->fd;

        put(t->fd, "waits.json", "{}");
        assert_false(controller_request_taken(&s, "waits", CONTROLLER_UNKNOWN));
        assert_true(controller_request_taken(&s, "waits", CONTROLLER_QUEUED)); /* a state file: taken */
        assert_true(controller_request_taken(&s, "gone", CONTROLLER_UNKNOWN));  /* out of the inbox: taken */

        /* No worker.json: nobody to name. */
        _cleanup_free_ char *none = controller_no_worker_words(&s, "waits");
        words_have(none, "request 'waits' is still in the inbox after 5 s: no worker has taken it", true);
        words_have(none, "No usable worker.json", true);

        /* The package's units run WORKER_CONFIG_DIR/NAME.json. */
        _cleanup_(json_decrefp) json_t *doc = json_object();
        s.info_json = doc;
        s.info = (WorkerInfo){.name = "agent", .config = "/etc/tentaflake/workers/agent.json",
                              .started_at = "2026-12-01T09:00:00Z"};
        _cleanup_free_ char *unit = controller_no_worker_words(&s, "waits");
        words_have(unit, "This workspace's worker is 'agent'", true);
        words_have(unit, "config '/etc/tentaflake/workers/agent.json', last started 2026-12-01T09:00:00Z", true);
        words_have(unit, "tentaflake-worker@agent.service", true);
        words_have(unit, "tentaflake-worker-queue@agent.path", true);
        words_have(unit, "no unit of the package", false);
        words_have(unit, "\n", false); /* one line */

        /* A config elsewhere: no unit runs it; the command that does, quoted for a shell. */
        s.info.config = "/srv/my worker.json";
        _cleanup_free_ char *own = controller_no_worker_words(&s, "waits");
        words_have(own, "no unit of the package runs it", true);
        words_have(own, "'tentaflake-worker --config '/srv/my worker.json' run'", true);
        words_have(own, ".service", false);
}

/* True words (issue 35, item 5): what the MCP server tells a model follows worker.json. */
static void test_job_words(void **state) {
        (void) state;
        ControllerSite s = CONTROLLER_SITE_NULL;
        s.policy = request_policy_default;

        /* No worker.json: nothing is claimed, not even "no network". */
        _cleanup_free_ char *none = controller_job_words(&s, JOB_WORDS_INSTRUCTIONS);
        words_have(none, "is not known: there is no usable worker.json", true);
        words_have(none, "Network:", false);
        words_have(none, "by default the workspace's root, /work", true);

        /* An older worker.json, without "job". */
        _cleanup_(json_decrefp) json_t *doc = json_object();
        s.info_json = doc;
        _cleanup_free_ char *old = controller_job_words(&s, JOB_WORDS_RUN);
        words_have(old, "worker.json does not say", true);

        /* No network, no cache, changesets; the caller's directory. */
        s.info.has_job = true;
        s.info.job = (WorkerJobInfo){.memory_bytes = 512 << 20, .cpus_milli = 1500, .pids = 256, .max_log_bytes = 1 << 20,
                                     .max_artifact_bytes = 1 << 30, .max_artifact_entries = 1000, .changes = true};
        s.cwd = (char *) "packages/api";
        _cleanup_free_ char *closed = controller_job_words(&s, JOB_WORDS_INSTRUCTIONS);
        words_have(closed, "Network: none.", true);
        words_have(closed, "proxy", false);
        words_have(closed, "Build cache", false);
        words_have(closed, "512 MiB of memory, 1.5 CPUs, 256 processes, a timeout of 300 s", true);
        words_have(closed, "(at most 900 s)", true);
        words_have(closed, "up to 1 MiB", true);
        words_have(closed, "applied only with the apply tool", true);
        words_have(closed, "'packages/api' (/work/packages/api)", true);
        words_have(closed, "\n", false);
        words_have(closed, "disposable gVisor capsule", true); /* no isolation in worker.json: gVisor's */
        s.info.job.engine = "runc";
        s.info.job.kernel = "host";
        _cleanup_free_ char *host = controller_job_words(&s, JOB_WORDS_INSTRUCTIONS);
        words_have(host, "capsule on the host's kernel (runc", true);
        words_have(host, "gVisor", false);
        s.info.job.engine = s.info.job.kernel = NULL;

        /* An allowlist and a cache: named, and "none" no longer said. */
        _cleanup_(json_decrefp) json_t *allow = json_pack("[s, s]", "registry.npmjs.org:443", "*.pythonhosted.org:443");
        _cleanup_(json_decrefp) json_t *paths = json_pack("[s, s]", "node_modules", "target");
        s.info.job.network_allow = allow;
        s.info.job.max_connections = 128;
        s.info.job.max_upload_bytes = 1 << 20;
        s.info.job.max_download_bytes = UINT64_C(2) << 30;
        s.info.job.cache_paths = paths;
        s.info.job.changes = false;
        _cleanup_free_ char *open_ = controller_job_words(&s, JOB_WORDS_RUN);
        words_have(open_, "Network: only these host:port pairs, through the worker's proxy", true);
        words_have(open_, "registry.npmjs.org:443, *.pythonhosted.org:443.", true);
        words_have(open_, "at most 128 connections, 1 MiB sent and 2 GiB received", true);
        words_have(open_, "no network", false);
        words_have(open_, "Network: none", false);
        words_have(open_, "leaves under node_modules, target (paths of /work)", true);
        words_have(open_, "is lost when it ends (this worker returns no changeset)", true);
        words_have(open_, "no worker takes within 5 s", true);
        s.cwd = NULL;
}

/* A scripted MCP session against a workspace without a worker: every line gets its answer,
 * malformed ones included, and tools say why they cannot work. */
static void test_mcp_session(void **state) {
        TestDir *t = *state;
        static const char script[] =
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2024-11-05\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"run\",\"arguments\":{\"argv\":[\"true\"]}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":4\n"
                "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"bogus\"}\n"
                "\n"
                "{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"ping\"}"; /* no final newline */
        tfw_write_file(t->fd, "in", script, (size_t) -1);
        _cleanup_close_ int in = openat(t->fd, "in", O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int out = openat(t->fd, "out", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(in >= 0 && out >= 0);
        char ws[4096];
        snprintf(ws, sizeof(ws), "%s", t->path);
        McpOptions o = {.workspace = ws};
        TfwError e = {0};
        assert_int_equal(mcp_serve(in, out, &o, &e), 0);

        assert_int_equal(lseek(out, 0, SEEK_SET), 0);
        _cleanup_free_ char *buf = NULL;
        size_t len;
        assert_int_equal(read_full_fd_bounded(out, 1 << 20, &buf, &len), 0);
        json_t *lines[16];
        size_t n = 0;
        for (char *p = buf, *nl; (nl = strchr(p, '\n')) && n < ELEMENTSOF(lines); p = nl + 1) {
                json_error_t je;
                lines[n] = json_loadb(p, (size_t) (nl - p), 0, &je);
                assert_non_null(lines[n]);
                n++;
        }
        assert_int_equal(n, 6); /* the notification and the blank line get none */
        assert_string_equal(json_string_value(json_object_get(json_object_get(lines[0], "result"), "protocolVersion")),
                            "2024-11-05");
        assert_int_equal(json_array_size(json_object_get(json_object_get(lines[1], "result"), "tools")), 5); /* run, result, list, apply, cancel */
        json_t *r3 = json_object_get(lines[2], "result");
        assert_true(json_is_true(json_object_get(r3, "isError")));
        /* 2024-11-05 predates structuredContent. */
        assert_null(json_object_get(r3, "structuredContent"));
        assert_int_equal(json_integer_value(json_object_get(json_object_get(lines[3], "error"), "code")), -32700);
        assert_true(json_is_null(json_object_get(lines[3], "id")));
        assert_int_equal(json_integer_value(json_object_get(json_object_get(lines[4], "error"), "code")), -32601);
        assert_string_equal(json_string_value(json_object_get(lines[5], "id")), "last");
        for (size_t i = 0; i < n; i++)
                json_decref(lines[i]);
}

/* Run a scripted MCP session (script: one message a line) against t's workspace and results;
 * the answers by their id, the notifications counted. */
static size_t mcp_script(TestDir *t, const char *script, json_t **lines, size_t max) {
        tfw_write_file(t->fd, "in", script, (size_t) -1);
        _cleanup_close_ int in = openat(t->fd, "in", O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int out = openat(t->fd, "out", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(in >= 0 && out >= 0);
        char ws[4096], res[4200];
        snprintf(ws, sizeof(ws), "%s/ws", t->path);
        snprintf(res, sizeof(res), "%s/res", t->path);
        McpOptions o = {.workspace = ws, .results = res};
        TfwError e = {0};
        assert_int_equal(mcp_serve(in, out, &o, &e), 0);
        assert_int_equal(lseek(out, 0, SEEK_SET), 0);
        _cleanup_free_ char *buf = NULL;
        size_t len, n = 0;
        assert_int_equal(read_full_fd_bounded(out, 1 << 22, &buf, &len), 0);
        for (char *p = buf, *nl; (nl = strchr(p, '\n')) && n < max; p = nl + 1) {
                json_error_t je;
                lines[n] = json_loadb(p, (size_t) (nl - p), 0, &je);
                assert_non_null(lines[n]);
                n++;
        }
        return n;
}

static json_t *answer_to(json_t **lines, size_t n, json_int_t id) {
        for (size_t i = 0; i < n; i++)
                if (json_integer_value(json_object_get(lines[i], "id")) == id)
                        return lines[i];
        fail_msg("no answer to %lld", (long long) id);
        return NULL;
}

static const char *task_field(json_t *line, const char *k) {
        return json_string_value(json_object_get(json_object_get(line, "result"), k));
}

static json_int_t error_code(json_t *line) {
        return json_integer_value(json_object_get(json_object_get(line, "error"), "code"));
}

/* MCP tasks (2025-11-25), negotiated: every request of the workspace is a task by its id. */
static void test_mcp_tasks(void **state) {
        TestDir *t = *state;
        json_t *lines[64];
        assert_int_equal(mkdirat(t->fd, "ws", 0750), 0);
        assert_int_equal(mkdirat(t->fd, "ws/.tentaflake-worker", 0750), 0);
        assert_int_equal(mkdirat(t->fd, "ws/.tentaflake-worker/inbox", 0750), 0);
        assert_int_equal(mkdirat(t->fd, "res", 0750), 0);
        assert_int_equal(mkdirat(t->fd, "res/done1", 0750), 0);
        put(t->fd, "res/done1/result.json",
            "{\"version\":1,\"id\":\"done1\",\"status\":\"failed\",\"exit_code\":2,\"signal\":null,\"error\":null,"
            "\"message\":null,\"submitted_at\":\"2026-01-01T00:00:00Z\",\"finished_at\":\"2026-01-01T00:01:00Z\"}");
        put(t->fd, "res/done1/job.log", "it failed\n");
        assert_int_equal(mkdirat(t->fd, "res/rej1", 0750), 0);
        put(t->fd, "res/rej1/result.json", "{\"version\":1,\"id\":\"rej1\",\"status\":\"denied\",\"exit_code\":null}");
        assert_int_equal(mkdirat(t->fd, "res/can1", 0750), 0);
        put(t->fd, "res/can1/result.json",
            "{\"version\":1,\"id\":\"can1\",\"status\":\"cancelled\",\"error\":\"cancelled_by_controller\"}");
        put(t->fd, "res/run1.state.json", "{\"id\":\"run1\",\"state\":\"running\",\"since\":\"2026-01-01T00:02:00Z\"}");
        put(t->fd, "res/wait1.state.json", "{\"id\":\"wait1\",\"state\":\"pending\",\"since\":\"2026-01-01T00:03:00Z\"}");

        static const char script[] =
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"done1\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/result\",\"params\":{\"taskId\":\"done1\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"rej1\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"can1\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"run1\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"wait1\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"nosuch\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"../x\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tasks/cancel\",\"params\":{\"taskId\":\"done1\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tasks/list\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tasks/list\",\"params\":{\"cursor\":\"x\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"tools/call\",\"params\":{\"name\":\"list\",\"arguments\":{},\"task\":{}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"tools/call\",\"params\":{\"name\":\"run\",\"arguments\":{\"argv\":[\"true\"],\"id\":\"t1\"},\"task\":{\"ttl\":\"soon\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"tools/call\",\"params\":{\"name\":\"run\",\"arguments\":{\"argv\":[\"true\"],\"id\":\"t1\"},\"task\":{\"ttl\":60000},\"_meta\":{\"progressToken\":\"p16\"}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":17,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"t1\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":18,\"method\":\"tools/call\",\"params\":{\"name\":\"run\",\"arguments\":{\"argv\":[]},\"task\":{}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":19,\"method\":\"tasks/result\",\"params\":{\"taskId\":\"run1\"}}\n";
        size_t n = mcp_script(t, script, lines, ELEMENTSOF(lines));

        json_t *caps = json_object_get(json_object_get(answer_to(lines, n, 1), "result"), "capabilities");
        assert_non_null(json_object_get(json_object_get(json_object_get(json_object_get(caps, "tasks"), "requests"), "tools"), "call"));
        assert_non_null(json_object_get(json_object_get(caps, "tasks"), "cancel"));
        json_t *run = json_array_get(json_object_get(json_object_get(answer_to(lines, n, 2), "result"), "tools"), 0);
        assert_string_equal(json_string_value(json_object_get(json_object_get(run, "execution"), "taskSupport")), "optional");

        /* A job that exited 2 completed the call; denied and cancelled did not. */
        assert_string_equal(task_field(answer_to(lines, n, 3), "status"), "completed");
        assert_string_equal(task_field(answer_to(lines, n, 3), "createdAt"), "2026-01-01T00:00:00Z");
        assert_string_equal(task_field(answer_to(lines, n, 3), "lastUpdatedAt"), "2026-01-01T00:01:00Z");
        assert_true(json_is_null(json_object_get(json_object_get(answer_to(lines, n, 3), "result"), "ttl")));
        json_t *r4 = json_object_get(answer_to(lines, n, 4), "result");
        assert_false(json_is_true(json_object_get(r4, "isError")));
        assert_string_equal(json_string_value(json_object_get(
                                    json_object_get(json_object_get(r4, "_meta"), "io.modelcontextprotocol/related-task"), "taskId")),
                            "done1");
        assert_non_null(strstr(json_string_value(json_object_get(json_array_get(json_object_get(r4, "content"), 0), "text")),
                               "it failed"));
        assert_string_equal(task_field(answer_to(lines, n, 5), "status"), "failed");
        assert_string_equal(task_field(answer_to(lines, n, 6), "status"), "cancelled");
        assert_string_equal(task_field(answer_to(lines, n, 7), "status"), "working");
        assert_string_equal(task_field(answer_to(lines, n, 7), "lastUpdatedAt"), "2026-01-01T00:02:00Z");
        /* Pending is working: the approval is the operator's, not input the client can give. */
        assert_string_equal(task_field(answer_to(lines, n, 8), "status"), "working");
        assert_non_null(strstr(task_field(answer_to(lines, n, 8), "statusMessage"), "pending: an operator must approve"));
        assert_int_equal(error_code(answer_to(lines, n, 9)), -32602);
        assert_int_equal(error_code(answer_to(lines, n, 10)), -32602);
        assert_int_equal(error_code(answer_to(lines, n, 11)), -32602);
        json_t *tasks = json_object_get(json_object_get(answer_to(lines, n, 12), "result"), "tasks");
        assert_int_equal(json_array_size(tasks), 5);
        assert_int_equal(error_code(answer_to(lines, n, 13)), -32602);
        assert_int_equal(error_code(answer_to(lines, n, 14)), -32601);
        assert_int_equal(error_code(answer_to(lines, n, 15)), -32602);
        /* A task-augmented run: the request written, a CreateTaskResult at once. */
        json_t *task = json_object_get(json_object_get(answer_to(lines, n, 16), "result"), "task");
        assert_string_equal(json_string_value(json_object_get(task, "taskId")), "t1");
        assert_string_equal(json_string_value(json_object_get(task, "status")), "working");
        assert_int_equal(json_integer_value(json_object_get(task, "pollInterval")), MCP_TASK_POLL_MS);
        assert_int_equal(faccessat(t->fd, "ws/.tentaflake-worker/inbox/t1.json", F_OK, 0), 0);
        /* Its progress notifications name the task. */
        bool related = false;
        for (size_t i = 0; i < n; i++) {
                json_t *pp = json_object_get(lines[i], "params");
                const char *tok = json_string_value(json_object_get(pp, "progressToken"));
                if (tok && streq(tok, "p16"))
                        related = streq_ptr(json_string_value(json_object_get(json_object_get(json_object_get(pp, "_meta"),
                                                                                               MCP_META_RELATED_TASK),
                                                                               "taskId")),
                                            "t1");
        }
        assert_true(related);
        assert_string_equal(task_field(answer_to(lines, n, 17), "status"), "working");
        assert_non_null(strstr(task_field(answer_to(lines, n, 17), "statusMessage"), "in the inbox"));
        /* A refused run is run's tool error, no task. */
        assert_true(json_is_true(json_object_get(json_object_get(answer_to(lines, n, 18), "result"), "isError")));
        /* tasks/result of a running task waits: no answer before the end of input. */
        for (size_t i = 0; i < n; i++)
                assert_int_not_equal(json_integer_value(json_object_get(lines[i], "id")), 19);
        for (size_t i = 0; i < n; i++)
                json_decref(lines[i]);

        /* An older client: no tasks at all, params.task ignored (the run waits as before). */
        static const char old[] =
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"done1\"}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"run\",\"arguments\":{\"argv\":[\"true\"],\"id\":\"t2\"},\"task\":{}}}\n";
        n = mcp_script(t, old, lines, ELEMENTSOF(lines));
        assert_null(json_object_get(json_object_get(json_object_get(answer_to(lines, n, 1), "result"), "capabilities"), "tasks"));
        run = json_array_get(json_object_get(json_object_get(answer_to(lines, n, 2), "result"), "tools"), 0);
        assert_null(json_object_get(run, "execution"));
        assert_int_equal(error_code(answer_to(lines, n, 3)), -32601);
        for (size_t i = 0; i < n; i++)
                assert_int_not_equal(json_integer_value(json_object_get(lines[i], "id")), 4);
        assert_int_equal(faccessat(t->fd, "ws/.tentaflake-worker/inbox/t2.json", F_OK, 0), 0);
        for (size_t i = 0; i < n; i++)
                json_decref(lines[i]);

        /* An older revision that declares the capability gets tasks. */
        static const char declared[] =
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\","
                "\"capabilities\":{\"tasks\":{}}}}\n"
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"done1\"}}\n";
        n = mcp_script(t, declared, lines, ELEMENTSOF(lines));
        assert_non_null(json_object_get(json_object_get(json_object_get(answer_to(lines, n, 1), "result"), "capabilities"), "tasks"));
        assert_string_equal(task_field(answer_to(lines, n, 2), "status"), "completed");
        for (size_t i = 0; i < n; i++)
                json_decref(lines[i]);
}


/* submit on a terminal (controller/terminal.h): the job's bytes escaped across writes, submit's
 * lines marked, and after output left mid-line, on a line of their own. */
static void test_terminal_streams(void **state) {
        (void) state;
        char *out_text = NULL, *err_text = NULL;
        size_t out_len = 0, err_len = 0;
        FILE *out_under = open_memstream(&out_text, &out_len), *err_under = open_memstream(&err_text, &err_len);
        assert_non_null(out_under);
        assert_non_null(err_under);
        FILE *out = terminal_escaped_open(out_under), *err = terminal_marked_open(err_under);
        assert_non_null(out);
        assert_non_null(err);
        /* The job: a forged line, a C1 CSI split between two writes, SGR 8 left mid-line. */
        fputs("submit 'x': succeeded\nc1 \xc2", out);
        fflush(out);
        fputs("\x9b" "2J\x1b[8m", out);
        fflush(out);
        fprintf(err, "%s/artifacts/a\n", "r");
        fprintf(err, "submit 'id': done, ");
        fprintf(err, "in two writes\n");
        assert_int_equal(fclose(out), 0);
        assert_int_equal(fclose(err), 0);
        assert_int_equal(fclose(out_under), 0);
        assert_int_equal(fclose(err_under), 0);
        assert_string_equal(out_text, "submit 'x': succeeded\nc1 \\u009b2J\\x1b[8m");
        assert_string_equal(err_text, "\n" TERMINAL_MARK "r/artifacts/a\n" TERMINAL_MARK "submit 'id': done, in two writes\n");
        free(out_text);
        free(err_text);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_build_refusals),
                cmocka_unit_test(test_build_roundtrip),
                cmocka_unit_test(test_fresh_ids),
                cmocka_unit_test(test_fields_from_strings),
                cmocka_unit_test_setup_teardown(test_request_write, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_exit_mapping),
                cmocka_unit_test(test_worker_info),
                cmocka_unit_test(test_worker_info_job),
                cmocka_unit_test_setup_teardown(test_status, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_no_worker, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_command_short),
                cmocka_unit_test(test_terminal_streams),
                cmocka_unit_test_setup_teardown(test_list, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_job_words),
                cmocka_unit_test_setup_teardown(test_mcp_session, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_mcp_tasks, tfw_tmpdir_setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
