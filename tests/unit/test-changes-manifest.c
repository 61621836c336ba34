/* SPDX-License-Identifier: MIT */
/* parser/changes-manifest.c: changes.json as exec/changeset.c writes it is read back whole, and
 * each rule refuses what breaks it (code changes_invalid), so `apply` never acts on a path that
 * leaves the workspace, names the control directory, or is named twice (but for a deletion
 * followed by what replaced it). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parser/changes-manifest.h"
#include "tests/unit/lib/tfw-test.h"

#define A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HEAD "{\"version\":1,\"complete\":true,\"incomplete\":null,\"changes\":["
#define FILE_OK "{\"path\":\"src/a.c\",\"kind\":\"modified\",\"mode\":\"100644\",\"size\":3,\"id\":\"" A "\",\"base\":\"" B "\",\"base_mode\":\"100644\"}"

static void test_read_back(void **state) {
        (void) state;
        const char *doc = HEAD FILE_OK
                ",{\"path\":\"n\",\"kind\":\"added\",\"mode\":\"100755\",\"size\":0,\"id\":\"" A "\",\"base\":null,\"base_mode\":null}"
                ",{\"path\":\"m\",\"kind\":\"mode\",\"mode\":\"100755\",\"size\":1,\"id\":\"" B "\",\"base\":\"" B "\",\"base_mode\":\"100644\"}"
                ",{\"path\":\"d/f\",\"kind\":\"deleted\",\"base\":\"" B "\",\"base_mode\":\"100644\"}"
                ",{\"path\":\"d\",\"kind\":\"deleted\",\"base\":null,\"base_mode\":\"40000\"}"
                ",{\"path\":\"g\",\"kind\":\"directory\"}"
                ",{\"path\":\"bad\\\\xff\",\"kind\":\"refused\",\"why\":\"a name that is not UTF-8\"}]}";
        ChangesManifest *m = NULL;
        TfwError e = {0};
        assert_int_equal(changes_manifest_parse(doc, strlen(doc), &m, &e), 0);
        assert_true(m->complete);
        assert_int_equal(m->n, 7);
        assert_int_equal(m->v[0].kind, CHANGE_MODIFIED);
        assert_string_equal(m->v[0].path, "src/a.c");
        assert_string_equal(m->v[0].base, B);
        assert_int_equal(m->v[0].base_mode, 0100644);
        assert_true(m->v[1].executable);
        assert_string_equal(m->v[1].base, "");
        assert_int_equal(m->v[2].kind, CHANGE_MODE);
        assert_int_equal(m->v[4].base_mode, 040000);
        assert_int_equal(m->v[6].kind, CHANGE_REFUSED);
        assert_string_equal(m->v[6].why, "a name that is not UTF-8");
        changes_manifest_free(m);
}

/* What a power loss can leave of changes.json, which is not fsynced (orchestrator/job.c): no
 * byte, a cut-short file or zeros. Each refused: apply then acts on nothing of the changeset. */
static void test_cut_short_refused(void **state) {
        (void) state;
        const char *doc = HEAD FILE_OK "]}";
        size_t len = strlen(doc);
        for (size_t n = 0; n < len; n++) {
                ChangesManifest *m = NULL;
                TfwError e = {0};
                if (changes_manifest_parse(doc, n, &m, &e) >= 0)
                        fail_msg("the first %zu of %zu bytes were taken", n, len);
        }
        char zeros[64] = {0};
        ChangesManifest *m = NULL;
        TfwError e = {0};
        assert_true(changes_manifest_parse(zeros, sizeof(zeros), &m, &e) < 0);
        /* The whole document is taken: the refusals above are of the cut, not of the document. */
        assert_int_equal(changes_manifest_parse(doc, len, &m, &e), 0);
        changes_manifest_free(m);
}

/* A path the job turned into another type: deleted, then made again. */
static void test_replacement(void **state) {
        (void) state;
        static const char *const ok =
                HEAD "{\"path\":\"g\",\"kind\":\"deleted\",\"base\":\"" B "\",\"base_mode\":\"100644\"},"
                "{\"path\":\"g\",\"kind\":\"directory\"},"
                "{\"path\":\"g/n\",\"kind\":\"added\",\"mode\":\"100644\",\"size\":1,\"id\":\"" A "\"}]}";
        ChangesManifest *m = NULL;
        TfwError e = {0};
        assert_int_equal(changes_manifest_parse(ok, strlen(ok), &m, &e), 0);
        assert_int_equal(m->n, 3);
        assert_int_equal(m->v[0].kind, CHANGE_DELETED);
        assert_int_equal(m->v[1].kind, CHANGE_DIRECTORY);
        changes_manifest_free(m);
}

static void test_refusals(void **state) {
        (void) state;
        static const char *const bad[] = {
                "{\"version\":2,\"complete\":true,\"incomplete\":null,\"changes\":[]}",
                "{\"version\":1,\"complete\":true,\"incomplete\":\"why\",\"changes\":[]}",
                "{\"version\":1,\"complete\":false,\"incomplete\":null,\"changes\":[]}",
                "{\"version\":1,\"complete\":true,\"incomplete\":null,\"changes\":{}}",
                "{\"version\":1,\"complete\":true,\"incomplete\":null,\"changes\":[],\"extra\":1}",
                HEAD "{\"path\":\"../x\",\"kind\":\"directory\"}]}",
                HEAD "{\"path\":\"/etc/x\",\"kind\":\"directory\"}]}",
                HEAD "{\"path\":\"a//b\",\"kind\":\"directory\"}]}",
                HEAD "{\"path\":\"a/./b\",\"kind\":\"directory\"}]}",
                HEAD "{\"path\":\"a/\",\"kind\":\"directory\"}]}",
                HEAD "{\"path\":\".tentaflake-worker/inbox/x.json\",\"kind\":\"directory\"}]}",
                HEAD "{\"path\":\".tentaflake-worker\",\"kind\":\"directory\"}]}",
                HEAD "{\"path\":\"g\",\"kind\":\"directory\"},{\"path\":\"g\",\"kind\":\"directory\"}]}",
                /* A replacement is a deletion, then one addition or directory; nothing else twice. */
                HEAD "{\"path\":\"g\",\"kind\":\"directory\"},{\"path\":\"g\",\"kind\":\"deleted\",\"base\":null,\"base_mode\":\"40000\"}]}",
                HEAD "{\"path\":\"g\",\"kind\":\"deleted\",\"base\":\"" B "\",\"base_mode\":\"100644\"},{\"path\":\"g\",\"kind\":\"directory\"},{\"path\":\"g\",\"kind\":\"directory\"}]}",
                HEAD "{\"path\":\"g\",\"kind\":\"deleted\",\"base\":\"" B "\",\"base_mode\":\"100644\"},{\"path\":\"g\",\"kind\":\"deleted\",\"base\":\"" B "\",\"base_mode\":\"100644\"}]}",
                HEAD "{\"path\":\"g\",\"kind\":\"directory\",\"mode\":\"100644\"}]}",
                HEAD "{\"path\":\"g\",\"kind\":\"made\"}]}",
                HEAD "{\"path\":\"g\",\"kind\":\"directory\",\"x\":1}]}",
                HEAD "{\"path\":7,\"kind\":\"directory\"}]}",
                HEAD "{\"kind\":\"directory\"}]}",
                HEAD "{\"path\":\"n\",\"kind\":\"added\",\"mode\":\"100644\",\"size\":1,\"id\":\"" A "\",\"base\":\"" B "\",\"base_mode\":\"100644\"}]}",
                HEAD "{\"path\":\"n\",\"kind\":\"added\",\"mode\":\"120000\",\"size\":1,\"id\":\"" A "\"}]}",
                HEAD "{\"path\":\"n\",\"kind\":\"added\",\"mode\":\"100644\",\"size\":-1,\"id\":\"" A "\"}]}",
                HEAD "{\"path\":\"n\",\"kind\":\"added\",\"mode\":\"100644\",\"size\":1,\"id\":\"AAAA\"}]}",
                HEAD "{\"path\":\"n\",\"kind\":\"modified\",\"mode\":\"100644\",\"size\":1,\"id\":\"" A "\"}]}",
                HEAD "{\"path\":\"n\",\"kind\":\"modified\",\"mode\":\"100644\",\"size\":1,\"id\":\"" A "\",\"base\":\"" A "\",\"base_mode\":\"100644\"}]}",
                HEAD "{\"path\":\"n\",\"kind\":\"mode\",\"mode\":\"100644\",\"size\":1,\"id\":\"" A "\",\"base\":\"" A "\",\"base_mode\":\"100644\"}]}",
                HEAD "{\"path\":\"n\",\"kind\":\"mode\",\"mode\":\"100755\",\"size\":1,\"id\":\"" A "\",\"base\":\"" B "\",\"base_mode\":\"100644\"}]}",
                HEAD "{\"path\":\"d\",\"kind\":\"deleted\",\"base\":null,\"base_mode\":\"100644\"}]}",
                HEAD "{\"path\":\"d\",\"kind\":\"deleted\",\"base\":\"" B "\"}]}",
                HEAD "{\"path\":\"l\",\"kind\":\"refused\"}]}",
                HEAD "{\"path\":\"l\",\"kind\":\"refused\",\"why\":\"x\",\"id\":\"" A "\"}]}",
                HEAD "{\"path\":\"g\",\"kind\":\"directory\",\"why\":\"x\"}]}",
                "{\"version\":1,\"complete\":true,\"incomplete\":null,\"changes\":[],\"version\":1}",
                "[]",
                "",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ChangesManifest *m = NULL;
                TfwError e = {0};
                if (changes_manifest_parse(bad[i], strlen(bad[i]), &m, &e) >= 0)
                        fail_msg("accepted: %s", bad[i]);
                assert_null(m);
                assert_non_null(e.code);
        }
}

static void test_path_rule(void **state) {
        (void) state;
        assert_true(changes_path_is_valid("a"));
        assert_true(changes_path_is_valid("a/b.c"));
        assert_true(changes_path_is_valid(".git/hooks/pre-commit")); /* refused by apply, not here */
        assert_true(changes_path_is_valid("x/.tentaflake-worker"));
        assert_false(changes_path_is_valid(""));
        assert_false(changes_path_is_valid(".."));
        assert_false(changes_path_is_valid("a/.."));
        assert_false(changes_path_is_valid("./a"));
        assert_false(changes_path_is_valid(".tentaflake-worker/x"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_read_back),
                cmocka_unit_test(test_refusals),
                cmocka_unit_test(test_replacement),
                cmocka_unit_test(test_cut_short_refused),
                cmocka_unit_test(test_path_rule),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
