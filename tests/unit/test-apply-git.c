/* SPDX-License-Identifier: MIT */
/* controller/apply-git.c and common/name-fold.c (issue 46 item 1): the git rules of `apply`.
 * A name that a folding file system takes for .git, .gitmodules or .tentaflake-worker counts
 * as that name; a change to a .git, a .gitmodules, a gitdir or commondir file is refused alone;
 * a directory that git would take for a repository after the changeset (a HEAD beside objects/
 * and refs/, or beside a commondir), counting what the workspace holds, is refused with
 * everything the changeset does in it. Each test in a fresh directory standing for the
 * workspace. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/name-fold.h"
#include "controller/apply-git.h"
#include "tests/unit/lib/tfw-test.h"

static bool folds(const char *name, const char *target) {
        return name_folds_to(name, strlen(name), target);
}

static void test_fold_dot_git(void **state) {
        (void) state;
        static const char *const yes[] = {
                ".git", ".GIT", ".Git", ".git.", ".git ", ".git. . ", ".git::$INDEX_ALLOCATION", ".git:x",
                "git~1", "GIT~1", "git~12",
                ".g\xe2\x80\x8cit",       /* U+200C ZERO WIDTH NON-JOINER, ignored by HFS+ */
                ".git\xef\xbb\xbf",       /* U+FEFF */
                "\xe2\x80\x8f.git",       /* U+200F RIGHT-TO-LEFT MARK */
                ".gi\xe2\x81\xaat",       /* U+206A */
                ".g\xe2\x80\x8bit",       /* U+200B ZERO WIDTH SPACE, ignored by older kernels' casefolding */
                ".g\xc4\xb1t",            /* U+0131 DOTLESS I */
        };
        static const char *const no[] = {
                ".gi", ".gitx", "git", ".github", "g.it", "..git", ".git/", "git~0", "git~1x", "gi~1", "git~",
                ".gi\xcc\x81t",           /* a combining acute accent is no ignorable */
                ".git\xff",               /* not UTF-8 */
                ".git\xc0\xae",           /* an overlong '.' */
                "\xef\xbc\x8egit",        /* FULLWIDTH FULL STOP: no file system folds it */
        };
        for (size_t i = 0; i < sizeof(yes) / sizeof(*yes); i++)
                if (!folds(yes[i], ".git"))
                        fail_msg("'%s' should stand for .git", yes[i]);
        for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++)
                if (folds(no[i], ".git"))
                        fail_msg("'%s' should not stand for .git", no[i]);
        assert_false(name_folds_to(".git\0x", 6, ".git")); /* a NUL ends no name early */
}

static void test_fold_other_names(void **state) {
        (void) state;
        assert_true(folds(".GITMODULES", ".gitmodules"));
        assert_true(folds(".gitmodule\xc5\xbf", ".gitmodules"));          /* U+017F LONG S */
        assert_true(folds("GITMOD~1", ".gitmodules"));
        assert_true(folds("gitmo~12", ".gitmodules"));
        assert_true(folds("gi7eba~1", ".gitmodules"));                     /* NTFS's hashed short name */
        assert_false(folds("git~1", ".gitmodules"));
        assert_true(folds(".Tentaflake-Worker", ".tentaflake-worker"));
        assert_true(folds(".tentafla\xe2\x84\xaa" "e-worker", ".tentaflake-worker")); /* U+212A KELVIN SIGN */
        assert_true(folds(".tenta\xef\xac\x82" "ake-worker", ".tentaflake-worker"));  /* U+FB02 LIGATURE FL */
        assert_true(folds("TENTAF~1", ".tentaflake-worker"));
        assert_true(folds("COMMON~1", "commondir"));
        assert_true(folds("Head", "head"));
        assert_false(folds("head~1", "head")); /* an 8.3 name has no short name */
        assert_true(path_component_folds_to("a/.GIT/b", ".git"));
        assert_true(path_component_folds_to("a/b/git~1", ".git"));
        assert_false(path_component_folds_to("a/b.git/c", ".git"));
        assert_false(path_component_folds_to("a/.gitignore", ".git"));
        assert_true(apply_path_is_control("x/.TENTAFLAKE-WORKER./y"));
        assert_false(apply_path_is_control("x/.tentaflake-workers"));
}

static char *refusals(const ChangeEntry *c) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        assert_non_null(f);
        bool refused = apply_git_refuses_change(c, f);
        fclose(f);
        assert_int_equal(refused, len > 0);
        return buf;
}

#define CHANGE(k, p) ((ChangeEntry) { .kind = (k), .path = (char *) (p) })

static void expect_refused(ChangeKind k, const char *path, const char *rule) {
        ChangeEntry c = CHANGE(k, path);
        char *out = refusals(&c);
        if (!strstr(out, path) || !strstr(out, rule))
                fail_msg("'%s' (%s): got \"%s\", wanted its path and \"%s\"", path, change_kind_to_string(k), out, rule);
        free(out);
}

static void expect_taken(ChangeKind k, const char *path) {
        ChangeEntry c = CHANGE(k, path);
        char *out = refusals(&c);
        if (*out)
                fail_msg("'%s' (%s) refused: %s", path, change_kind_to_string(k), out);
        free(out);
}

static void test_change_rules(void **state) {
        (void) state;
        expect_refused(CHANGE_ADDED, ".git/hooks/pre-commit", "the job changed a .git (a hook");
        expect_refused(CHANGE_ADDED, "lib/.git", "the job changed a .git (a hook");
        expect_refused(CHANGE_ADDED, "lib/.GIT", "a name that a case-insensitive or normalising file system takes for .git");
        expect_refused(CHANGE_DIRECTORY, "sub/.Git.", "takes for .git");
        expect_refused(CHANGE_ADDED, "sub/GIT~1/config", "takes for .git");
        expect_refused(CHANGE_MODIFIED, ".gitmodules", "the job changed a .gitmodules");
        expect_refused(CHANGE_DELETED, "lib/.gitmodules", "the job changed a .gitmodules");
        expect_refused(CHANGE_ADDED, ".GitModules", "the job changed a .gitmodules");
        expect_refused(CHANGE_ADDED, "x/gitdir", "a gitdir file");
        expect_refused(CHANGE_MODE, "x/GitDir", "a gitdir file");
        expect_refused(CHANGE_ADDED, "x/commondir", "a commondir file");
        expect_refused(CHANGE_MODIFIED, "commondir", "a commondir file");
        expect_taken(CHANGE_DELETED, "x/commondir");
        expect_taken(CHANGE_DIRECTORY, "x/gitdir");
        expect_taken(CHANGE_ADDED, "src/.gitignore");
        expect_taken(CHANGE_ADDED, "src/git.c");
        expect_taken(CHANGE_ADDED, "docs/gitdir.md");
}

/* The workspace: each of paths made below fd, a trailing '/' a directory, "@" a symbolic link. */
static void make(int fd, const char *const *paths) {
        for (; *paths; paths++) {
                size_t n = strlen(*paths);
                if ((*paths)[n - 1] == '/') {
                        char *d = strndup(*paths, n - 1);
                        assert_int_equal(mkdirat(fd, d, 0755), 0);
                        free(d);
                } else if ((*paths)[0] == '@')
                        assert_int_equal(symlinkat("/", fd, *paths + 1), 0);
                else
                        tfw_write_file(fd, *paths, "ref: refs/heads/main\n", (size_t) -1);
        }
}

/* apply_git_repositories() over the changes c[0..n) in the workspace fd: how many it refused,
 * its lines in *ret_out. */
static int repositories(int fd, ChangeEntry *c, size_t n, char **ret_out) {
        size_t len = 0;
        FILE *f = open_memstream(ret_out, &len);
        assert_non_null(f);
        ChangesManifest m = { .complete = true, .v = c, .n = n };
        int r = apply_git_repositories(fd, &m, f);
        fclose(f);
        return r;
}

#define REPOSITORIES(fd, out, ...)                                                                    \
        ({                                                                                       \
                ChangeEntry v_[] = { __VA_ARGS__ };                                              \
                repositories((fd), v_, sizeof(v_) / sizeof(*v_), (out));                         \
        })

static void expect_repository(const char *out, const char *dir, const char *rule) {
        char *want = NULL;
        assert_true(asprintf(&want, "refused: '%s': git would take this directory for a repository after the changeset (%s)", dir, rule) > 0);
        if (!strstr(out, want))
                fail_msg("got \"%s\", wanted \"%s\"", out, want);
        free(want);
}

/* The issue's vector: HEAD, a config, objects/ and refs/, all from the job. */
static void test_planted_whole(void **state) {
        TestDir *t = *state;
        char *out = NULL;
        make(t->fd, (const char *const[]) { "src/", NULL });
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_ADDED, "src/HEAD"), CHANGE(CHANGE_ADDED, "src/config"),
                                      CHANGE(CHANGE_DIRECTORY, "src/objects"), CHANGE(CHANGE_DIRECTORY, "src/refs"),
                                      CHANGE(CHANGE_ADDED, "src/a.c")),
                         1);
        expect_repository(out, "src", "a HEAD beside objects/ and refs/");
        free(out);
}

/* Half of it already in the workspace: the job adds only the HEAD, or only objects/. */
static void test_planted_half(void **state) {
        TestDir *t = *state;
        char *out = NULL;
        make(t->fd, (const char *const[]) { "a/", "a/objects/", "a/refs/", "b/", "b/HEAD", "b/refs/", NULL });
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_ADDED, "a/HEAD")), 1);
        expect_repository(out, "a", "a HEAD beside objects/ and refs/");
        free(out);
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_DIRECTORY, "b/objects")), 1);
        expect_repository(out, "b", "a HEAD beside objects/ and refs/");
        free(out);
        /* objects/ made by a deeper path; objects as a file (git only asks that it be searchable) */
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_ADDED, "b/objects/pack/x")), 1);
        free(out);
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_ADDED, "b/objects")), 1);
        free(out);
}

/* A repository the workspace holds already (a test fixture): anything the job does in it is
 * refused, its config first; a change beside it is not. */
static void test_existing_repository(void **state) {
        TestDir *t = *state;
        char *out = NULL;
        make(t->fd, (const char *const[]) { "fix.git/", "fix.git/HEAD", "fix.git/objects/", "fix.git/refs/", "fix.git/hooks/",
                                            "fix.git/hooks/x", "fix.git/config", "other/", NULL });
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_MODIFIED, "fix.git/config")), 1);
        expect_repository(out, "fix.git", "a HEAD beside objects/ and refs/");
        free(out);
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_DELETED, "fix.git/hooks/x")), 1);
        free(out);
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_ADDED, "other/a.c"), CHANGE(CHANGE_ADDED, "b.c")), 0);
        assert_string_equal(out, "");
        free(out);
        /* the job removes its HEAD (and changes the rest): no repository is left */
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_DELETED, "fix.git/HEAD"), CHANGE(CHANGE_MODIFIED, "fix.git/config")), 0);
        free(out);
}

/* Names folded: a case-insensitive file system takes head, Objects and REFS for git's names. */
static void test_planted_folded(void **state) {
        TestDir *t = *state;
        char *out = NULL;
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_ADDED, "x/y/head"), CHANGE(CHANGE_DIRECTORY, "x/y/Objects"),
                                      CHANGE(CHANGE_ADDED, "x/y/REFS/heads/main")),
                         1);
        expect_repository(out, "x/y", "a HEAD beside objects/ and refs/");
        assert_null(strstr(out, "'x'"));
        free(out);
}

/* A linked worktree's shape: a HEAD beside a commondir that the workspace holds. */
static void test_head_beside_commondir(void **state) {
        TestDir *t = *state;
        char *out = NULL;
        make(t->fd, (const char *const[]) { "wt/", "wt/commondir", NULL });
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_ADDED, "wt/HEAD")), 1);
        expect_repository(out, "wt", "a HEAD beside a commondir");
        free(out);
}

/* The workspace's root, and entries of any type: a symbolic link named objects counts. */
static void test_root_and_links(void **state) {
        TestDir *t = *state;
        char *out = NULL;
        make(t->fd, (const char *const[]) { "@objects", "refs/", NULL });
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_ADDED, "HEAD")), 1);
        expect_repository(out, ".", "a HEAD beside objects/ and refs/");
        free(out);
}

/* A directory reached through a link is never looked into (apply's own checks refuse the
 * link); .git and the control directory are the per-change rules' alone. */
static void test_not_followed_not_twice(void **state) {
        TestDir *t = *state;
        char *out = NULL;
        make(t->fd, (const char *const[]) { "real/", "real/objects/", "real/refs/", ".git/", ".git/HEAD", ".git/objects/",
                                            ".git/refs/", NULL });
        assert_int_equal(symlinkat("real", t->fd, "via"), 0);
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_ADDED, "via/HEAD")), 0);
        free(out);
        assert_int_equal(REPOSITORIES(t->fd, &out, CHANGE(CHANGE_MODIFIED, ".git/config"), CHANGE(CHANGE_ADDED, ".GIT/HEAD")), 0);
        assert_string_equal(out, "");
        free(out);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fold_dot_git),
                cmocka_unit_test(test_fold_other_names),
                cmocka_unit_test(test_change_rules),
                cmocka_unit_test_setup_teardown(test_planted_whole, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_planted_half, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_existing_repository, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_planted_folded, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_head_beside_commondir, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_root_and_links, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_not_followed_not_twice, tfw_tmpdir_setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
