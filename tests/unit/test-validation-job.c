/* SPDX-License-Identifier: MIT */
/* validation/job: the strict claim and manifest parsers, the path rules, the tree id check
 * against a real `git init --object-format=sha256` repository, and the symlink rule
 * (threats 8 and 11). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"
#include "validation/job.h"

#define TREE "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"
#define BLOB "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813"

static const char good_claim[] =
        "{\"job\":{\"id\":\"j-1\",\"repo\":\"acme/app\",\"proposal\":\"p-1\",\"check\":\"tests\","
        "\"tree\":\"" TREE "\",\"policy_version\":3,\"attempt\":1,"
        "\"run\":{\"argv\":[\"make\",\"test\"],\"timeout_secs\":60,\"memory_mb\":512,\"max_pids\":64,"
        "\"env\":{\"RUST_BACKTRACE\":\"1\",\"A\":\"x=y\"},\"network\":false,\"image\":null,"
        "\"environment_digest\":null}},"
        "\"lease\":{\"id\":\"l-1\",\"expires_at\":\"2026-11-29T15:00:00Z\"}}";

static int parse_claim_str(const char *s, VJob **j, TfwError *e) {
        return vjob_parse_claim(s, strlen(s), j, e);
}

/* good_claim with the first occurrence of from replaced by to. */
static char *mutate(const char *from, const char *to) {
        const char *p = strstr(good_claim, from);
        char *out = NULL;
        assert_non_null(p);
        assert_true(asprintf(&out, "%.*s%s%s", (int) (p - good_claim), good_claim, to, p + strlen(from)) > 0);
        return out;
}

static void test_claim_good(void **state) {
        (void) state;
        _cleanup_vjob_ VJob *j = NULL;
        TfwError e = {0};

        assert_int_equal(parse_claim_str(good_claim, &j, &e), 0);
        assert_string_equal(j->id, "j-1");
        assert_string_equal(j->repo, "acme/app");
        assert_string_equal(j->tree, TREE);
        assert_int_equal(j->policy_version, 3);
        assert_int_equal(j->run.n_argv, 2);
        assert_string_equal(j->run.argv[1], "test");
        assert_null(j->run.argv[2]);
        assert_int_equal(j->run.timeout_secs, 60);
        assert_int_equal(j->run.memory_mb, 512);
        assert_int_equal(j->run.n_env, 2);
        assert_string_equal(j->run.env[0], "A=x=y"); /* sorted */
        assert_string_equal(j->run.env[1], "RUST_BACKTRACE=1");
        assert_false(j->run.network);
        assert_null(j->run.image);
        assert_null(j->run.environment_digest);
        assert_string_equal(j->lease_id, "l-1");
}

/* Issue 11 item 5: a policy env naming a variable the worker sets itself is a refusal no
 * worker can ever get past: the job comes back with its lease and refusal, to be failed with
 * permanent: true (before: no job, so the worker dropped it and the server handed it out
 * again until its attempts ran out). */
static void test_claim_reserved_env_is_permanent(void **state) {
        (void) state;
        _cleanup_free_ char *s = mutate("\"RUST_BACKTRACE\"", "\"PATH\"");
        VJob *j = NULL;
        TfwError e = {0};
        assert_int_equal(parse_claim_str(s, &j, &e), 0);
        assert_non_null(j);
        assert_string_equal(j->id, "j-1");
        assert_string_equal(j->lease_id, "l-1");
        assert_non_null(j->refusal);
        assert_non_null(strstr(j->refusal, "'PATH' is set by the worker"));
        vjob_free(j);
}

static void test_claim_refusals(void **state) {
        (void) state;
        static const struct {
                const char *from, *to, *code;
        } cases[] = {
                {"\"attempt\":1", "\"attempt\":1,\"extra\":1", "unknown_field"},
                {"\"timeout_secs\":60", "\"timeout_secs\":60,\"cpu\":1", "unknown_field"},
                {"\"attempt\":1", "\"attempt\":1.0", "bad_type"},
                {"\"attempt\":1", "\"attempt\":\"1\"", "bad_type"},
                {"\"attempt\":1", "\"attempt\":0", "out_of_range"},
                {"\"timeout_secs\":60", "\"timeout_secs\":-1", "out_of_range"},
                {"\"id\":\"j-1\"", "\"id\":\"../x\"", "bad_value"},
                {"\"id\":\"j-1\"", "\"id\":\"..\"", "bad_value"},
                {"\"id\":\"j-1\"", "\"id\":\"a?b\"", "bad_value"},
                {"\"repo\":\"acme/app\"", "\"repo\":\"acme/../x\"", "bad_value"},
                {"\"repo\":\"acme/app\"", "\"repo\":\"acme//app\"", "bad_value"},
                {"\"repo\":\"acme/app\"", "\"repo\":\"/acme\"", "bad_value"},
                {"\"repo\":\"acme/app\"", "\"repo\":\"a%2fb\"", "bad_value"},
                {"\"tree\":\"6e", "\"tree\":\"6E", "bad_value"},
                {"\"proposal\":\"p-1\"", "\"proposal\":\"p\\n1\"", "bad_value"},
                {"\"argv\":[\"make\",\"test\"]", "\"argv\":[]", "bad_value"},
                {"\"argv\":[\"make\",\"test\"]", "\"argv\":[\"\"]", "bad_value"},
                {"\"argv\":[\"make\",\"test\"]", "\"argv\":[\"make\",1]", "bad_type"},
                {"\"argv\":[\"make\",\"test\"]", "\"argv\":\"make test\"", "bad_value"},
                {"\"RUST_BACKTRACE\"", "\"PATH\"", "bad_value"},
                {"\"RUST_BACKTRACE\"", "\"TENTAFLAKE_JOB\"", "bad_value"},
                {"\"RUST_BACKTRACE\"", "\"1X\"", "bad_value"},
                {"\"RUST_BACKTRACE\":\"1\"", "\"RUST_BACKTRACE\":1", "bad_type"},
                {"\"network\":false", "\"network\":0", "bad_type"},
                {"\"environment_digest\":null", "\"environment_digest\":\"sha256:abc\"", "bad_value"},
                {"\"expires_at\":\"2026-11-29T15:00:00Z\"", "\"expires_at\":\"tomorrow\"", "bad_value"},
                {"\"id\":\"l-1\"", "\"lease\":1", "unknown_field"},
                {"\"check\":\"tests\"", "\"check\":\"tests\",\"check\":\"x\"", "duplicate_key"},
                {"\"check\":\"tests\"", "\"check\":\"t\\u0000\"", "nul_byte"},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *s = mutate(cases[i].from, cases[i].to);
                VJob *j = NULL;
                TfwError e = {0};
                int r = parse_claim_str(s, &j, &e);
                /* A refused run section comes back as the job's permanent refusal (it is
                 * failed with permanent: true); everything else is no job at all. */
                bool run_refusal = r == 0 && j && j->refusal;
                if ((r >= 0 && !run_refusal) || !e.code || !streq(e.code, cases[i].code))
                        fail_msg("case %zu (%s -> %s): r=%d code=%s message=%s", i, cases[i].from, cases[i].to, r,
                                 e.code ? e.code : "(null)", e.message);
                if (run_refusal) {
                        assert_string_equal(j->refusal, e.message);
                        assert_non_null(j->lease_id);
                        vjob_free(j);
                } else
                        assert_null(j);
        }
        /* Missing fields, a truncated document, a long argv. */
        VJob *j = NULL;
        TfwError e = {0};
        assert_true(parse_claim_str("{\"job\":{},\"lease\":{}}", &j, &e) < 0);
        assert_true(vjob_parse_claim(good_claim, strlen(good_claim) - 1, &j, &e) < 0);
        _cleanup_free_ char *big = malloc(70000), *claim = NULL;
        memset(big, 'a', 69999);
        big[69999] = 0;
        _cleanup_free_ char *arg = NULL;
        assert_true(asprintf(&arg, "\"argv\":[\"%s\"]", big) > 0);
        claim = mutate("\"argv\":[\"make\",\"test\"]", arg);
        /* A run section over a ceiling: the job's permanent refusal, with the ceiling's error. */
        assert_int_equal(parse_claim_str(claim, &j, &e), 0);
        assert_non_null(j);
        assert_non_null(j->refusal);
        assert_int_equal(e.error, E2BIG);
        vjob_free(j);
}

static VManifest *manifest(const char *json, TfwError *e) {
        VManifest *m = NULL;
        int r = vmanifest_parse(json, strlen(json), &m, e);
        if (r < 0)
                return NULL;
        return m;
}

static VManifest *paths(const char *const *p, size_t n, const uint32_t *modes) {
        VManifest *m = calloc(1, sizeof(*m));
        m->entries = calloc(n + 1, sizeof(VManifestEntry));
        for (size_t i = 0; i < n; i++) {
                m->entries[i].path = strdup(p[i]);
                m->entries[i].mode = modes ? modes[i] : GIT_MODE_FILE;
                m->n_entries++;
        }
        return m;
}

static int check_paths_of(const char *const *p, size_t n) {
        _cleanup_vmanifest_ VManifest *m = paths(p, n, NULL);
        TfwError e = {0};
        int r = vmanifest_check_paths(m, &e);
        if (r < 0)
                assert_string_equal(e.code, "invalid_path");
        return r;
}

static void test_manifest_parse(void **state) {
        (void) state;
        TfwError e = {0};
        _cleanup_vmanifest_ VManifest *m = manifest(
                "{\"tree\":\"" TREE "\",\"entries\":[{\"path\":\"a\",\"mode\":\"100644\",\"blob\":\"" BLOB "\"},"
                "{\"path\":\"b/x\",\"mode\":\"100755\",\"blob\":\"" BLOB "\"},"
                "{\"path\":\"l\",\"mode\":\"120000\",\"blob\":\"" BLOB "\"}]}",
                &e);
        assert_non_null(m);
        assert_int_equal(m->n_entries, 3);
        assert_int_equal(m->entries[1].mode, GIT_MODE_EXECUTABLE);
        assert_int_equal(m->entries[2].mode, GIT_MODE_SYMLINK);

        static const char *const bad[] = {
                "{\"tree\":\"" TREE "\",\"entries\":[{\"path\":\"a\",\"mode\":\"40000\",\"blob\":\"" BLOB "\"}]}",
                "{\"tree\":\"" TREE "\",\"entries\":[{\"path\":\"a\",\"mode\":\"160000\",\"blob\":\"" BLOB "\"}]}",
                "{\"tree\":\"" TREE "\",\"entries\":[{\"path\":\"a\",\"mode\":100644,\"blob\":\"" BLOB "\"}]}",
                "{\"tree\":\"" TREE "\",\"entries\":[{\"path\":\"a\",\"mode\":\"100644\",\"blob\":\"abc\"}]}",
                "{\"tree\":\"" TREE "\",\"entries\":[{\"path\":\"\",\"mode\":\"100644\",\"blob\":\"" BLOB "\"}]}",
                "{\"tree\":\"" TREE "\",\"entries\":[{\"path\":\"a\\u0001\",\"mode\":\"100644\",\"blob\":\"" BLOB "\"}]}",
                "{\"tree\":\"" TREE "\",\"entries\":[{\"path\":\"a\",\"mode\":\"100644\",\"blob\":\"" BLOB "\",\"size\":1}]}",
                "{\"tree\":\"" TREE "\",\"entries\":{}}",
                "{\"tree\":\"" TREE "\"}",
                "{\"tree\":\"" TREE "\",\"entries\":[],\"x\":1}",
                "[]",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                VManifest *b = manifest(bad[i], &e);
                if (b)
                        fail_msg("manifest case %zu accepted", i);
        }
}

static void test_path_rules(void **state) {
        (void) state;
        static const char *const ok[] = {"b", "a.c", "a-x", "a/b", "a/c/d", "..a", "a..", ".hidden"};
        assert_int_equal(check_paths_of(ok, ELEMENTSOF(ok)), 0);

        static const char *const bad[][2] = {
                {"../x", NULL}, {"a/../b", NULL}, {"./a", NULL}, {"a/./b", NULL}, {"/a", NULL}, {"a/", NULL},
                {"a//b", NULL}, {"..", NULL},     {"a", "a"},     {"a", "a/b"},   {"a/b", "a"},
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                size_t n = bad[i][1] ? 2 : 1;
                if (check_paths_of(bad[i], n) != -EBADMSG)
                        fail_msg("path case %zu (%s, %s) accepted", i, bad[i][0], bad[i][1] ? bad[i][1] : "");
        }
        /* The file/directory conflict is found even when entries sort between them. */
        static const char *const sep[] = {"a", "a-x", "a.c", "a/b"};
        assert_int_equal(check_paths_of(sep, ELEMENTSOF(sep)), -EBADMSG);
        /* A component longer than a Linux name. */
        char longname[300];
        memset(longname, 'n', 299);
        longname[299] = 0;
        const char *lp[] = {longname};
        assert_int_equal(check_paths_of(lp, 1), -EBADMSG);
}

/* Run a shell command built from test-controlled strings; return its trimmed stdout. */
static char *sh(const char *fmt, ...) _printf_(1, 2);
static char *sh(const char *fmt, ...) {
        _cleanup_free_ char *cmd = NULL;
        char *out = NULL;
        size_t n = 0;
        va_list ap;
        va_start(ap, fmt);
        assert_true(vasprintf(&cmd, fmt, ap) >= 0);
        va_end(ap);
        FILE *f = popen(cmd, "r");
        assert_non_null(f);
        _cleanup_close_ int fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 3);
        assert_int_equal(read_full_fd_bounded(fd, 16 << 20, &out, &n), 0);
        if (pclose(f) != 0)
                fail_msg("command failed: %s", cmd);
        while (n > 0 && out[n - 1] == '\n')
                out[--n] = 0;
        return out;
}

/* The manifest the test server would send for HEAD of the repository at dir. */
static char *git_manifest(const char *dir) {
        return sh("cd '%s' && git ls-tree -r --full-tree HEAD | python3 -c '"
                  "import json,sys\n"
                  "e=[]\n"
                  "for l in sys.stdin:\n"
                  "  meta,path=l.rstrip(\"\\n\").split(\"\\t\",1)\n"
                  "  mode,typ,oid=meta.split()\n"
                  "  e.append({\"path\":path,\"mode\":mode,\"blob\":oid})\n"
                  "print(json.dumps({\"tree\":sys.argv[1],\"entries\":e}))' $(git rev-parse 'HEAD^{tree}')",
                  dir);
}

static void test_tree_against_git(void **state) {
        TestDir *d = *state;
        TfwError e = {0};

        if (system("git --version >/dev/null 2>&1") != 0)
                tfw_skip("git is not installed");
        _cleanup_free_ char *out = sh(
                "cd '%s' && git init -q --object-format=sha256 r && cd r && mkdir -p a/b c 'sp ace' && "
                "echo 1 > a.c && echo 2 > a/b/f && printf x > c/x && echo 3 > a-x && echo 4 > 'sp ace/q' && "
                "cp a.c exe && chmod 755 exe && ln -s a/b/f link && ln -s ../a.c c/up && "
                "git add -A && git -c user.name=t -c user.email=t@t commit -qm t && echo ok",
                d->path);
        assert_string_equal(out, "ok");
        _cleanup_free_ char *dir = NULL;
        assert_true(asprintf(&dir, "%s/r", d->path) > 0);
        _cleanup_free_ char *json = git_manifest(dir), *tree = sh("cd '%s' && git rev-parse 'HEAD^{tree}'", dir);
        _cleanup_vmanifest_ VManifest *m = manifest(json, &e);
        assert_non_null(m);
        assert_int_equal(vmanifest_check_paths(m, &e), 0);
        assert_int_equal(vmanifest_verify_tree(m, tree, &e), 0);

        /* One blob id changed, a mode changed, an entry dropped: each gives another tree. */
        m->entries[0].blob[0] ^= 1;
        assert_int_equal(vmanifest_verify_tree(m, tree, &e), -EBADMSG);
        assert_string_equal(e.code, "tree_mismatch");
        m->entries[0].blob[0] ^= 1;
        uint32_t mode = m->entries[0].mode;
        m->entries[0].mode = mode == GIT_MODE_FILE ? GIT_MODE_EXECUTABLE : GIT_MODE_FILE;
        assert_int_equal(vmanifest_verify_tree(m, tree, &e), -EBADMSG);
        m->entries[0].mode = mode;
        m->n_entries--;
        assert_int_equal(vmanifest_verify_tree(m, tree, &e), -EBADMSG);
        m->n_entries++;
        assert_int_equal(vmanifest_verify_tree(m, tree, &e), 0);
}

static int symlink_case(const char *const *p, const uint32_t *modes, char *const *targets, size_t n) {
        _cleanup_vmanifest_ VManifest *m = paths(p, n, modes);
        TfwError e = {0};
        int r = vmanifest_check_symlinks(m, targets, &e);
        if (r < 0)
                assert_string_equal(e.code, "symlink_escape");
        return r;
}

static void test_symlink_rule(void **state) {
        (void) state;
        const uint32_t F = GIT_MODE_FILE, L = GIT_MODE_SYMLINK;
        {
                const char *p[] = {"a/b/f", "l1", "a/l2", "a/b/l3", "l4"};
                const uint32_t md[] = {F, L, L, L, L};
                char *t[] = {NULL, (char *) "a/b/f", (char *) "../l1", (char *) "../../a/./b//f", (char *) "."};
                assert_int_equal(symlink_case(p, md, t, 5), 0);
        }
        static const char *const escaping[] = {"/etc/passwd", "..", "../x", "a/../../x", "a/b/../../..", ""};
        for (size_t i = 0; i < ELEMENTSOF(escaping); i++) {
                const char *p[] = {"a/b/f", "l"};
                const uint32_t md[] = {F, L};
                char *t[] = {NULL, (char *) escaping[i]};
                if (i == ELEMENTSOF(escaping) - 1)
                        t[1] = NULL; /* no target at all */
                if (symlink_case(p, md, t, 2) != -ELOOP)
                        fail_msg("target '%s' accepted", escaping[i]);
        }
        {
                /* Each link stays inside on its own; together they climb out: x/s1 -> ..
                 * (the root), s2 -> x/s1/.. (the root's parent). */
                const char *p[] = {"x/f", "x/s1", "s2"};
                const uint32_t md[] = {F, L, L};
                char *t[] = {NULL, (char *) "..", (char *) "x/s1/.."};
                assert_int_equal(symlink_case(p, md, t, 3), -ELOOP);
        }
        {
                /* A loop. */
                const char *p[] = {"a", "b"};
                const uint32_t md[] = {L, L};
                char *t[] = {(char *) "b", (char *) "a"};
                assert_int_equal(symlink_case(p, md, t, 2), -ELOOP);
        }
        {
                /* Through a link to a deeper directory and back up: stays inside. */
                const char *p[] = {"x/y/f", "d", "u"};
                const uint32_t md[] = {F, L, L};
                char *t[] = {NULL, (char *) "x/y", (char *) "d/../f"};
                assert_int_equal(symlink_case(p, md, t, 3), 0);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_claim_good),
                cmocka_unit_test(test_claim_refusals),
                cmocka_unit_test(test_claim_reserved_env_is_permanent),
                cmocka_unit_test(test_manifest_parse),
                cmocka_unit_test(test_path_rules),
                cmocka_unit_test_setup_teardown(test_tree_against_git, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_symlink_rule),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
