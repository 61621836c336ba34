/* SPDX-License-Identifier: MIT */
/* artifacts/inbox-attest (the inbox plane's attestation.json, contract section 7) checked
 * by the independent verifier, and artifacts/envdigest (contract section 8): one digest per
 * worker configuration and check, changed by every wall it records. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"
#include "capsule/driver.h"
#include "exec/envdigest.h"
#include "exec/exec.h"

/* The description the core gives for a config: its driver's own words. */
#define CGROUP_DESC(c) (capsule_driver_ops((c)->driver)->cgroup_description)
#include "artifacts/inbox-attest.h"
#include "artifacts/signing.h"

#define TREE "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
#define REQ "0000000000000000000000000000000000000000000000000000000000000001"

static int verifier(const char *pub, const char *path, const char *extra) {
        _cleanup_free_ char *cmd = NULL;
        assert_true(asprintf(&cmd, "python3 tests/server/verify_attestation.py '%s' '%s' %s >/dev/null", pub, path,
                             extra) > 0);
        int st = system(cmd);
        assert_true(WIFEXITED(st));
        return WEXITSTATUS(st);
}

static void test_inbox_attestation(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *key = NULL, *pub = NULL, *att = NULL, *cmd = NULL;
        TfwError e = {0};

        if (system("command -v openssl >/dev/null && command -v python3 >/dev/null") != 0)
                tfw_skip("openssl or python3 is not installed");
        assert_true(asprintf(&key, "%s/k", d->path) > 0);
        assert_int_equal(signing_key_generate(key, "worker:demo", &pub, &e), 0);
        Config c = {.name = (char *) "demo", .signing_key = key, .signing_identity = (char *) "worker:demo",
                    .container_gid = getgid()};

        assert_int_equal(mkdirat(d->fd, "res", 0700), 0);
        _cleanup_close_ int rfd = open_dir_at(d->fd, "res");
        assert_int_equal(mkdirat(rfd, "artifacts", 0700), 0);
        _cleanup_close_ int afd = open_dir_at(rfd, "artifacts");
        assert_int_equal(mkdirat(afd, "sub", 0700), 0);
        tfw_write_file(afd, "b.txt", "hello", (size_t) -1);
        tfw_write_file(afd, "sub/a.txt", "", 0);
        assert_int_equal(symlinkat("/etc/passwd", afd, "link"), 0); /* never followed, never listed */

        _cleanup_json_ json_t *res = json_pack("{s:s, s:s, s:s, s:n, s:s, s:i, s:n, s:s, s:{s:s}, s:n}", "id", "job_1",
                                               "status", "succeeded", "request_sha256", REQ, "approval",
                                               "environment_digest", "sha256:ab", "exit_code", 0, "signal",
                                               "finished_at", "2026-11-29T15:00:00Z", "snapshot", "tree", TREE,
                                               "attestation");
        assert_int_equal(inbox_attest_result(&c, rfd, res, &e), 0);
        assert_string_equal(json_string_value(json_object_get(res, "attestation")), "attestation.json");
        struct stat st;
        assert_int_equal(fstatat(rfd, "attestation.json", &st, 0), 0);
        assert_int_equal(st.st_mode & 07777, 0640);

        assert_true(asprintf(&att, "%s/res/attestation.json", d->path) > 0);
        assert_int_equal(verifier(pub, att,
                                  "--expect subject.gitTree=" TREE " --expect predicate.status=succeeded"
                                  " --expect predicate.request_sha256=" REQ " --expect predicate.issuer=worker:demo"
                                  " --expect predicate.approval=null"),
                         0);
        /* The artifacts' digests, sorted by path, symlink excluded. */
        assert_true(asprintf(&cmd,
                             "python3 tests/server/verify_attestation.py '%s' '%s' | python3 -c 'import json,sys; "
                             "a=json.load(sys.stdin)[\"predicate\"][\"artifacts\"]; "
                             "sys.exit(0 if a==[{\"path\":\"b.txt\",\"sha256\":\"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\"},"
                             "{\"path\":\"sub/a.txt\",\"sha256\":\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"}] else 1)'",
                             pub, att) > 0);
        assert_int_equal(system(cmd), 0);

        /* No signing key: nothing is written, the result is unchanged. */
        assert_int_equal(unlinkat(rfd, "attestation.json", 0), 0);
        json_object_set_new(res, "attestation", json_null());
        c.signing_key = NULL;
        assert_int_equal(inbox_attest_result(&c, rfd, res, &e), 0);
        assert_true(json_is_null(json_object_get(res, "attestation")));
        assert_int_equal(faccessat(rfd, "attestation.json", F_OK, 0), -1);
}

static void test_inbox_attestation_without_snapshot(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *key = NULL, *pub = NULL, *att = NULL;
        TfwError e = {0};

        if (system("command -v openssl >/dev/null && command -v python3 >/dev/null") != 0)
                tfw_skip("openssl or python3 is not installed");
        assert_true(asprintf(&key, "%s/k", d->path) > 0);
        assert_int_equal(signing_key_generate(key, "worker:demo", &pub, &e), 0);
        Config c = {.name = (char *) "demo", .signing_key = key, .container_gid = getgid()};
        _cleanup_json_ json_t *res = json_pack("{s:s, s:s, s:s, s:n}", "id", "x", "status", "rejected",
                                               "request_sha256", REQ, "snapshot");
        assert_int_equal(inbox_attest_result(&c, d->fd, res, &e), 0);
        assert_true(asprintf(&att, "%s/attestation.json", d->path) > 0);
        assert_int_equal(verifier(pub, att, "--expect predicate.status=rejected"), 0);
        /* A tampered copy does not verify. */
        _cleanup_free_ char *cmd = NULL;
        assert_true(asprintf(&cmd,
                             "python3 -c 'import base64,json,sys; p=sys.argv[1]; e=json.load(open(p)); "
                             "s=bytearray(base64.b64decode(e[\"signatures\"][0][\"sig\"])); s[0]^=1; "
                             "e[\"signatures\"][0][\"sig\"]=base64.b64encode(bytes(s)).decode(); "
                             "json.dump(e,open(p,\"w\"))' '%s'",
                             att) > 0);
        assert_int_equal(system(cmd), 0);
        assert_int_not_equal(verifier(pub, att, ""), 0);
}

/* A job that used the build cache names the cache's tree it started from as an input (threat 15);
 * one that did not names none. */
static void test_inbox_attestation_cache_input(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *key = NULL, *pub = NULL, *att = NULL, *cmd = NULL;
        TfwError e = {0};

        if (system("command -v openssl >/dev/null && command -v python3 >/dev/null") != 0)
                tfw_skip("openssl or python3 is not installed");
        assert_true(asprintf(&key, "%s/k", d->path) > 0);
        assert_int_equal(signing_key_generate(key, "worker:demo", &pub, &e), 0);
        Config c = {.name = (char *) "demo", .signing_key = key, .container_gid = getgid()};
        const char *from = "1111111111111111111111111111111111111111111111111111111111111111";
        _cleanup_json_ json_t *res = json_pack("{s:s, s:s, s:s, s:{s:s}, s:{s:b, s:s}}", "id", "x", "status", "succeeded",
                                               "request_sha256", REQ, "snapshot", "tree", TREE, "cache", "used", 1,
                                               "from", from);
        assert_int_equal(inbox_attest_result(&c, d->fd, res, &e), 0);
        assert_true(asprintf(&att, "%s/attestation.json", d->path) > 0);
        assert_true(asprintf(&cmd,
                             "python3 tests/server/verify_attestation.py '%s' '%s' | python3 -c 'import json,sys; "
                             "p=json.load(sys.stdin)[\"predicate\"]; "
                             "sys.exit(0 if p[\"inputs\"]=={\"build_cache\":{\"gitTree\":\"%s\"}} else 1)'",
                             pub, att, from) > 0);
        assert_int_equal(system(cmd), 0);

        /* Used while there was no cache yet: the input is named, as null. Not used: absent. */
        assert_int_equal(unlinkat(d->fd, "attestation.json", 0), 0);
        json_object_set_new(json_object_get(res, "cache"), "from", json_null());
        assert_int_equal(inbox_attest_result(&c, d->fd, res, &e), 0);
        free(cmd);
        assert_true(asprintf(&cmd,
                             "python3 tests/server/verify_attestation.py '%s' '%s' | python3 -c 'import json,sys; "
                             "p=json.load(sys.stdin)[\"predicate\"]; "
                             "sys.exit(0 if p[\"inputs\"]=={\"build_cache\":{\"gitTree\":None}} else 1)'",
                             pub, att) > 0);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(unlinkat(d->fd, "attestation.json", 0), 0);
        json_object_set_new(json_object_get(res, "cache"), "used", json_false());
        assert_int_equal(inbox_attest_result(&c, d->fd, res, &e), 0);
        free(cmd);
        assert_true(asprintf(&cmd,
                             "python3 tests/server/verify_attestation.py '%s' '%s' | python3 -c 'import json,sys; "
                             "p=json.load(sys.stdin)[\"predicate\"]; sys.exit(0 if \"inputs\" not in p else 1)'",
                             pub, att) > 0);
        assert_int_equal(system(cmd), 0);
}

static Config *config_of(const char *extra) {
        _cleanup_free_ char *text = NULL;
        Config *c = NULL;
        TfwError e = {0};
        assert_true(asprintf(&text,
                             "{\"version\":1,\"name\":\"d\",\"workspace\":\"/nonexistent/ws\",\"container_uid\":10,"
                             "\"container_gid\":10%s}",
                             extra) > 0);
        if (config_parse_buffer(text, strlen(text), &c, &e) < 0)
                fail_msg("config: %s", e.message);
        return c;
}

static void digest_of(const char *extra, uint64_t timeout, char *const *env, char out[ENV_DIGEST_SIZE]) {
        _cleanup_config_ Config *c = config_of(extra);
        _cleanup_json_ json_t *desc = env_description(c, timeout, 8 << 20, 600, env, "runsc version test", CGROUP_DESC(c));
        assert_non_null(desc);
        assert_int_equal(env_digest(desc, out), 0);
        assert_int_equal(strlen(out), 71);
        assert_true(strncmp(out, "sha256:", 7) == 0);
}

static void test_env_digest(void **state) {
        (void) state;
        char a[ENV_DIGEST_SIZE], b[ENV_DIGEST_SIZE];
        char *env1[] = {(char *) "A=1", NULL}, *env2[] = {(char *) "A=2", NULL};

        digest_of("", 60, NULL, a);
        digest_of("", 60, NULL, b);
        assert_string_equal(a, b); /* same walls, same digest */
        digest_of("", 61, NULL, b);
        assert_string_not_equal(a, b);
        digest_of(",\"limits\":{\"memory\":\"1g\"}", 60, NULL, b);
        assert_string_not_equal(a, b);
        digest_of(",\"limits\":{\"pids\":100}", 60, NULL, b);
        assert_string_not_equal(a, b);
        digest_of("", 60, env1, b);
        assert_string_not_equal(a, b);
        digest_of("", 60, env2, a);
        assert_string_not_equal(a, b);
        /* A mount's identity replaces its host path; a different identity is another digest. */
        digest_of(",\"runtime\":{\"system_mounts\":[\"/usr=os-1\"]}", 60, NULL, a);
        digest_of(",\"runtime\":{\"system_mounts\":[\"/usr=os-2\"]}", 60, NULL, b);
        assert_string_not_equal(a, b);
        digest_of(",\"runtime\":{\"platform\":\"ptrace\"}", 60, NULL, b);
        digest_of("", 60, NULL, a);
        assert_string_not_equal(a, b);

        /* The CPU-time limit is part of the walls; none is recorded as null. */
        _cleanup_config_ Config *c = config_of("");
        _cleanup_json_ json_t *d600 = env_description(c, 60, 8 << 20, 600, NULL, "v", CGROUP_DESC(c));
        _cleanup_json_ json_t *d0 = env_description(c, 60, 8 << 20, 0, NULL, "v", CGROUP_DESC(c));
        assert_int_equal(json_integer_value(json_object_get(json_object_get(d600, "limits"), "cpu_secs")), 600);
        assert_true(json_is_null(json_object_get(json_object_get(d0, "limits"), "cpu_secs")));
        assert_int_equal(env_digest(d600, a), 0);
        assert_int_equal(env_digest(d0, b), 0);
        assert_string_not_equal(a, b);
}

/* For docker and podman the image is the root: its digest is in the description, another
 * image gives another digest; the runsc description has none. */
static void test_env_digest_engine(void **state) {
        (void) state;
        char a[ENV_DIGEST_SIZE], b[ENV_DIGEST_SIZE];
        const char *img1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
        const char *img2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222";
        _cleanup_config_ Config *c = config_of(",\"runtime\":{\"driver\":\"docker\",\"image\":"
                                               "\"sha256:1111111111111111111111111111111111111111111111111111111111111111\"}");
        assert_non_null(c);
        _cleanup_json_ json_t *d1 = env_description(c, 60, 8 << 20, 600, NULL, "24.0.5", CGROUP_DESC(c));
        assert_string_equal(json_string_value(json_object_get(json_object_get(d1, "isolation"), "image")), img1);
        assert_string_equal(json_string_value(json_object_get(d1, "driver")), "docker");
        assert_non_null(strstr(json_string_value(json_object_get(json_object_get(d1, "isolation"), "cgroup")), "engine"));
        Config c2 = *c;
        c2.image = (char *) img2;
        _cleanup_json_ json_t *d2 = env_description(&c2, 60, 8 << 20, 600, NULL, "24.0.5", CGROUP_DESC(&c2));
        assert_int_equal(env_digest(d1, a), 0);
        assert_int_equal(env_digest(d2, b), 0);
        assert_string_not_equal(a, b);

        _cleanup_config_ Config *r = config_of("");
        _cleanup_json_ json_t *dr = env_description(r, 60, 8 << 20, 600, NULL, "v", CGROUP_DESC(r));
        assert_null(json_object_get(json_object_get(dr, "isolation"), "image"));
}

/* The capsule's narrowing is part of the digest (issue 19): the runsc driver's own seccomp
 * profile by its sha256, with the covered devices; a driver without it (the engines) records
 * that the engine decides, and so has another digest for the same walls. */
static void test_env_digest_narrowing(void **state) {
        (void) state;
        char a[ENV_DIGEST_SIZE], b[ENV_DIGEST_SIZE];
        _cleanup_config_ Config *c = config_of("");
        char *argv[] = {(char *) "true", NULL};
        const CapsuleDriverOps *runsc = capsule_driver_ops(DRIVER_RUNSC);
        CapsuleDriverOps engine = *runsc;
        engine.own_seccomp = false;
        CapsuleDriver own = {.ops = runsc}, other = {.ops = &engine};
        ExecPlan p = {.config = c, .driver = &own, .runtime_version = "v", .argv = argv, .timeout_seconds = 60};
        assert_int_equal(exec_plan_digest(&p, a), 0);
        p.driver = &other;
        assert_int_equal(exec_plan_digest(&p, b), 0);
        assert_string_not_equal(a, b);
        p.driver = &own;
        assert_int_equal(exec_plan_digest(&p, b), 0);
        assert_string_equal(a, b);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_inbox_attestation, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_inbox_attestation_without_snapshot, tfw_tmpdir_setup,
                                                tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_inbox_attestation_cache_input, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_env_digest),
                cmocka_unit_test(test_env_digest_engine),
                cmocka_unit_test(test_env_digest_narrowing),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
