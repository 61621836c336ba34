/* SPDX-License-Identifier: MIT */
/* artifacts/signing and artifacts/attest: key files (0600, never overwritten, strictly
 * parsed), the DSSE pre-authentication encoding, signing and verification, and verification
 * of a signed in-toto Statement by an implementation that is not ours
 * (tests/server/verify_attestation.py: Python's own PAE and `openssl pkeyutl -verify
 * -rawin`). */
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
#include "artifacts/attest.h"
#include "artifacts/signing.h"

static char *path_in(TestDir *d, const char *name) {
        char *p = NULL;
        assert_true(asprintf(&p, "%s/%s", d->path, name) > 0);
        return p;
}

static char *read_text(const char *path) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        char *buf = NULL;
        size_t n = 0;
        assert_true(fd >= 0);
        assert_int_equal(read_full_fd_bounded(fd, 1 << 20, &buf, &n), 0);
        return buf;
}

static void write_text(const char *path, const char *text, mode_t mode) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write_all(fd, text, strlen(text)), 0);
        assert_int_equal(fchmod(fd, mode), 0);
}

static void test_generate_and_load(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *p = path_in(d, "ci.key"), *pub = NULL, *text = NULL, *pub2 = NULL;
        _cleanup_signing_key_ SigningKey *k = NULL;
        TfwError e = {0};
        struct stat st;

        mode_t old = umask(0); /* the file must be 0600 whatever the umask */
        assert_int_equal(signing_key_generate(p, "service:ci-1", &pub, &e), 0);
        umask(old);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        text = read_text(p);
        assert_true(strncmp(text, SIGNING_KEY_HEADER "\nidentity service:ci-1\npublic ", 56) == 0);
        assert_non_null(strstr(text, pub));

        assert_int_equal(signing_key_load(p, &k, &e), 0);
        assert_string_equal(k->identity, "service:ci-1");
        pub2 = signing_key_public_b64(k);
        assert_string_equal(pub, pub2);
        assert_int_equal(strlen(k->keyid), 64);

        /* No stray temporary is left in the directory. */
        _cleanup_free_ char *ls = NULL;
        assert_true(asprintf(&ls, "test $(ls -A '%s' | wc -l) -eq 1", d->path) > 0);
        assert_int_equal(system(ls), 0);
}

static void test_never_overwritten(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *p = path_in(d, "ci.key"), *pub = NULL, *before = NULL, *after = NULL;
        _cleanup_free_ char *l = path_in(d, "link.key"), *target = path_in(d, "target");
        TfwError e = {0};

        assert_int_equal(signing_key_generate(p, "a", &pub, &e), 0);
        before = read_text(p);
        free(TAKE_PTR(pub));
        assert_int_equal(signing_key_generate(p, "b", &pub, &e), -EEXIST);
        assert_null(pub);
        assert_non_null(strstr(e.message, "never overwritten"));
        after = read_text(p);
        assert_string_equal(before, after);

        /* A dangling symlink is not followed to create its target. */
        assert_int_equal(symlink(target, l), 0);
        assert_int_equal(signing_key_generate(l, "c", &pub, &e), -EEXIST);
        assert_int_equal(access(target, F_OK), -1);
}

static void test_bad_identity(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *p = path_in(d, "ci.key"), *pub = NULL;
        TfwError e = {0};
        char longid[300];

        assert_int_equal(signing_key_generate(p, "has space", &pub, &e), -EINVAL);
        assert_int_equal(signing_key_generate(p, "", &pub, &e), -EINVAL);
        assert_int_equal(signing_key_generate(p, "tab\tid", &pub, &e), -EINVAL);
        memset(longid, 'a', sizeof(longid) - 1);
        longid[sizeof(longid) - 1] = 0;
        assert_int_equal(signing_key_generate(p, longid, &pub, &e), -EINVAL);
        assert_int_equal(access(p, F_OK), -1);
}

static void test_load_refusals(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *p = path_in(d, "ci.key"), *pub = NULL, *text = NULL, *q = path_in(d, "bad.key");
        SigningKey *k = NULL;
        TfwError e = {0};

        assert_int_equal(signing_key_generate(p, "service:ci-1", &pub, &e), 0);
        text = read_text(p);

        /* Readable by others: refused, the operator is told the mode. */
        assert_int_equal(chmod(p, 0644), 0);
        assert_int_equal(signing_key_load(p, &k, &e), -EPERM);
        assert_non_null(strstr(e.message, "0644"));
        assert_int_equal(chmod(p, 0600), 0);

        /* A public line that does not belong to the seed. */
        _cleanup_free_ char *t = strdup(text);
        char *pl = strstr(t, "\npublic ") + 8;
        *pl = *pl == 'A' ? 'B' : 'A';
        write_text(q, t, 0600);
        assert_int_equal(signing_key_load(q, &k, &e), -EBADMSG);

        /* Trailing junk, a missing line, a wrong header, a truncated seed. */
        _cleanup_free_ char *junk = NULL;
        assert_true(asprintf(&junk, "%sextra 1\n", text) > 0);
        write_text(q, junk, 0600);
        assert_int_equal(signing_key_load(q, &k, &e), -EBADMSG);
        write_text(q, SIGNING_KEY_HEADER "\nidentity x\n", 0600);
        assert_int_equal(signing_key_load(q, &k, &e), -EBADMSG);
        free(t);
        t = strdup(text);
        t[0] = 'T';
        write_text(q, t, 0600);
        assert_int_equal(signing_key_load(q, &k, &e), -EBADMSG);
        free(t);
        t = strdup(text);
        strstr(t, "\nseed ")[10] = '\n';
        strstr(t, "\nseed ")[11] = 0;
        write_text(q, t, 0600);
        assert_int_equal(signing_key_load(q, &k, &e), -EBADMSG);

        /* Oversize and not a regular file. */
        _cleanup_free_ char *big = malloc(SIGNING_KEY_FILE_MAX + 10);
        memset(big, 'a', SIGNING_KEY_FILE_MAX + 9);
        big[SIGNING_KEY_FILE_MAX + 9] = 0;
        write_text(q, big, 0600);
        assert_int_equal(signing_key_load(q, &k, &e), -E2BIG);
        assert_int_equal(signing_key_load(d->path, &k, &e), -EINVAL);
        assert_null(k);
}

/* The DSSE specification's own example. */
static void test_pae_vector(void **state) {
        (void) state;
        _cleanup_free_ uint8_t *b = NULL;
        size_t n = 0;
        static const char want[] = "DSSEv1 29 http://example.com/HelloWorld 11 hello world";

        assert_int_equal(dsse_pae("http://example.com/HelloWorld", "hello world", 11, &b, &n), 0);
        assert_int_equal(n, strlen(want));
        assert_memory_equal(b, want, n);
        free(TAKE_PTR(b));
        assert_int_equal(dsse_pae("t", "", 0, &b, &n), 0);
        assert_int_equal(n, strlen("DSSEv1 1 t 0 "));
        assert_memory_equal(b, "DSSEv1 1 t 0 ", n);
}

static void test_sign_verify(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *p = path_in(d, "a.key"), *q = path_in(d, "b.key"), *pub = NULL, *pub2 = NULL;
        _cleanup_signing_key_ SigningKey *a = NULL, *b = NULL;
        _cleanup_json_ json_t *env = NULL;
        _cleanup_free_ char *payload = NULL;
        size_t n = 0;
        TfwError e = {0};

        assert_int_equal(signing_key_generate(p, "a", &pub, &e), 0);
        assert_int_equal(signing_key_generate(q, "b", &pub2, &e), 0);
        assert_int_equal(signing_key_load(p, &a, &e), 0);
        assert_int_equal(signing_key_load(q, &b, &e), 0);

        assert_int_equal(dsse_sign(a, "text/plain", "hello", 5, &env, &e), 0);
        assert_string_equal(json_string_value(json_object_get(env, "payload")), "aGVsbG8=");
        assert_int_equal(dsse_verify(env, a->public_key, &payload, &n, &e), 0);
        assert_int_equal(n, 5);
        assert_string_equal(payload, "hello");
        free(TAKE_PTR(payload));

        /* Another key does not verify it. */
        assert_int_equal(dsse_verify(env, b->public_key, &payload, &n, &e), -EPERM);
        /* A changed payload type (bound by the PAE) does not verify. */
        json_object_set_new(env, "payloadType", json_string("text/other"));
        assert_int_equal(dsse_verify(env, a->public_key, &payload, &n, &e), -EPERM);
        json_object_set_new(env, "payloadType", json_string("text/plain"));
        /* A changed payload does not verify. */
        json_object_set_new(env, "payload", json_string("aGVsbG9=")); /* non-canonical base64 */
        assert_true(dsse_verify(env, a->public_key, &payload, &n, &e) < 0);
        json_object_set_new(env, "payload", json_string("aGVsbE8="));
        assert_int_equal(dsse_verify(env, a->public_key, &payload, &n, &e), -EPERM);
        /* Extra keys are refused. */
        json_object_set_new(env, "payload", json_string("aGVsbG8="));
        assert_int_equal(dsse_verify(env, a->public_key, &payload, &n, &e), 0);
        free(TAKE_PTR(payload));
        json_object_set_new(env, "extra", json_true());
        assert_int_equal(dsse_verify(env, a->public_key, &payload, &n, &e), -EBADMSG);
}

static int run_verifier(const char *pub, const char *env_path, const char *extra) {
        _cleanup_free_ char *cmd = NULL;
        assert_true(asprintf(&cmd, "python3 tests/server/verify_attestation.py '%s' '%s' %s >/dev/null", pub,
                             env_path, extra) > 0);
        int st = system(cmd);
        assert_true(WIFEXITED(st));
        return WEXITSTATUS(st);
}

static void test_independent_verifier(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *p = path_in(d, "ci.key"), *q = path_in(d, "other.key"), *pub = NULL, *pub2 = NULL;
        _cleanup_free_ char *envp = path_in(d, "att.json");
        _cleanup_signing_key_ SigningKey *k = NULL;
        _cleanup_json_ json_t *st = NULL, *env = NULL;
        TfwError e = {0};

        if (system("command -v openssl >/dev/null && command -v python3 >/dev/null") != 0)
                tfw_skip("openssl or python3 is not installed");

        assert_int_equal(signing_key_generate(p, "service:ci-1", &pub, &e), 0);
        assert_int_equal(signing_key_generate(q, "service:other", &pub2, &e), 0);
        assert_int_equal(signing_key_load(p, &k, &e), 0);
        ValidationFacts f = {
                .job_id = "job-1", .repo = "acme/app", .proposal = "p-7", .check = "tests",
                .tree = "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321",
                .policy_version = 3, .attempt = 1, .pass = true, .status = "succeeded", .exit_code = 0,
                .environment_digest = "sha256:00", .worker = "ci-1", .started_at = 1, .finished_at = 2,
        };
        st = attest_validation_statement(&f, k->identity);
        assert_non_null(st);
        assert_int_equal(attest_sign_statement(k, st, &env, &e), 0);
        assert_int_equal(json_dump_file(env, envp, JSON_COMPACT), 0);

        assert_int_equal(run_verifier(pub, envp,
                                      "--expect subject.gitTree=6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
                                      " --expect predicate.result=pass --expect predicate.issuer=service:ci-1"
                                      " --expect predicate.environment_digest=sha256:00"),
                         0);
        /* The verifier is not a rubber stamp: another key, a wrong expectation, a changed
         * payload all fail. */
        assert_int_equal(run_verifier(pub2, envp, ""), 1);
        assert_int_equal(run_verifier(pub, envp, "--expect predicate.result=fail"), 1);
        json_t *pl = json_object_get(env, "payload");
        _cleanup_free_ char *b = strdup(json_string_value(pl));
        b[10] = b[10] == 'A' ? 'B' : 'A';
        json_object_set_new(env, "payload", json_string(b));
        assert_int_equal(json_dump_file(env, envp, JSON_COMPACT), 0);
        assert_int_equal(run_verifier(pub, envp, ""), 1);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_generate_and_load, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_never_overwritten, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_bad_identity, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_load_refusals, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_pae_vector),
                cmocka_unit_test_setup_teardown(test_sign_verify, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_independent_verifier, tfw_tmpdir_setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
