/* SPDX-License-Identifier: MIT */
/* validation/checkout-index.c and the kept checkout's cleanup in validation/checkout.c
 * (issue 33: the index parsed whole by jansson cost about 1.3 KiB an entry, the directory
 * sets held every prefix of every path): the index round-trips any path, is absent rather
 * than wrong when it is cut, of another version or repository, or longer than allowed; and
 * checkout_update keeps what the new tree keeps and removes every other file and directory,
 * deep ones and neighbours that sort between a directory and its files included. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/sha256.h"
#include "tests/unit/lib/tfw-test.h"
#include "validation/checkout-index.h"
#include "validation/checkout.h"

static VManifest *manifest_of(const char *const *paths, size_t n) {
        VManifest *m = calloc(1, sizeof(*m));
        assert_non_null(m);
        m->entries = calloc(n + 1, sizeof(VManifestEntry));
        assert_non_null(m->entries);
        for (size_t i = 0; i < n; i++) {
                m->entries[i].path = strdup(paths[i]);
                m->entries[i].mode = GIT_MODE_FILE;
                /* Every file is empty: the empty blob's id. */
                assert_int_equal(git_blob_id("", 0, m->entries[i].blob), 0);
                m->n_entries++;
        }
        return m;
}

/* The stat of entry i: made up from i (the index records what it is given). */
static int fake_stat(size_t i, struct stat *st, void *userdata) {
        (void) userdata;
        *st = (struct stat) {.st_size = (off_t) i, .st_ino = 1000 + i};
        st->st_ctim.tv_sec = 1700000000 + (time_t) i;
        st->st_ctim.tv_nsec = (long) i;
        return 0;
}

static void test_round_trip(void **state) {
        TestDir *d = *state;
        static const char *const paths[] = {"z", "a\nb", "q\"uote\\s", "caf\xc3\xa9/\xf0\x9f\x98\x80", "a/b/c"};
        _cleanup_vmanifest_ VManifest *m = manifest_of(paths, ELEMENTSOF(paths));
        _cleanup_(checkout_index_freep) CheckoutIndex *x = NULL;

        m->entries[1].mode = GIT_MODE_SYMLINK;
        assert_int_equal(checkout_index_save(d->fd, "idx", "acme/app", m, fake_stat, NULL), 0);
        assert_int_equal(checkout_index_load(d->fd, "idx", "acme/app", 100, &x), 0);
        assert_non_null(x);
        assert_int_equal(x->n, ELEMENTSOF(paths));
        for (size_t i = 1; i < x->n; i++)
                assert_true(strcmp(x->records[i - 1].path, x->records[i].path) < 0);
        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                CheckoutRecord *rec = checkout_index_find(x, paths[i]);
                struct stat st;
                assert_non_null(rec);
                fake_stat(i, &st, NULL);
                assert_true(checkout_record_matches(rec, &m->entries[i], &st));
                st.st_ctim.tv_nsec++;
                assert_false(checkout_record_matches(rec, &m->entries[i], &st));
        }
        assert_null(checkout_index_find(x, "a"));
        checkout_index_free(TAKE_PTR(x));

        /* Another repository, fewer records allowed than it has: absent. */
        assert_int_equal(checkout_index_load(d->fd, "idx", "acme/other", 100, &x), 0);
        assert_null(x);
        assert_int_equal(checkout_index_load(d->fd, "idx", "acme/app", ELEMENTSOF(paths) - 1, &x), 0);
        assert_null(x);
        assert_int_equal(checkout_index_load(d->fd, "missing", "acme/app", 100, &x), 0);
        assert_null(x);
}

static void test_unusable_files_are_absent(void **state) {
        TestDir *d = *state;
        _cleanup_(checkout_index_freep) CheckoutIndex *x = NULL;
        static const char *const bad[] = {
                /* version 1: the whole document on one line */
                "{\"version\":1,\"repo\":\"acme/app\",\"entries\":{\"a\":[33188,\"00\",0,1,2,3]}}",
                /* cut in the middle of its last line */
                "{\"version\":2,\"repo\":\"acme/app\"}\n[\"a\",33188,\"",
                /* a record that is not one */
                "{\"version\":2,\"repo\":\"acme/app\"}\n[\"a\",33188]\n",
                "{\"version\":2,\"repo\":\"acme/app\"}\n[\"a\",-1,\"0000000000000000000000000000000000000000000000000000000000000000\",0,1,2,3]\n",
                /* the same path twice */
                "{\"version\":2,\"repo\":\"acme/app\"}\n"
                "[\"a\",33188,\"0000000000000000000000000000000000000000000000000000000000000000\",0,1,2,3]\n"
                "[\"a\",33188,\"0000000000000000000000000000000000000000000000000000000000000000\",0,1,2,3]\n",
                "",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                tfw_write_file(d->fd, "idx", bad[i], (size_t) -1);
                assert_int_equal(checkout_index_load(d->fd, "idx", "acme/app", 100, &x), 0);
                if (x)
                        fail_msg("case %zu was loaded", i);
        }
        /* A line longer than any index writes (a file that is not one): absent, read no further. */
        _cleanup_free_ char *huge = malloc(1 << 20);
        assert_non_null(huge);
        memset(huge, 'x', 1 << 20);
        _cleanup_close_ int fd = openat(d->fd, "idx", O_WRONLY | O_TRUNC | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write_all(fd, huge, 1 << 20), 0);
        assert_int_equal(checkout_index_load(d->fd, "idx", "acme/app", 100, &x), 0);
        assert_null(x);
}

/* Make lane/checkout/<path> (empty files) and its index as checkout_update writes it. */
static void make_kept_checkout(int lane_fd, const VManifest *m) {
        assert_int_equal(mkdirat(lane_fd, "checkout", 0750), 0);
        _cleanup_close_ int co = open_dir_at(lane_fd, "checkout");
        assert_true(co >= 0);
        for (size_t i = 0; i < m->n_entries; i++) {
                char p[GIT_PATH_MAX + 1];
                snprintf(p, sizeof(p), "%s", m->entries[i].path);
                for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
                        *s = 0;
                        (void) mkdirat(co, p, 0750);
                        *s = '/';
                }
                _cleanup_close_ int fd = openat(co, p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
                assert_true(fd >= 0);
        }
}

typedef struct RealStat {
        int co;
        const VManifest *m;
} RealStat;

static int real_stat(size_t i, struct stat *st, void *userdata) {
        RealStat *r = userdata;
        return fstatat(r->co, r->m->entries[i].path, st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static bool exists(int dir_fd, const char *path) {
        struct stat st;
        return fstatat(dir_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static void test_update_removes_what_the_new_tree_lacks(void **state) {
        TestDir *d = *state;
        if (geteuid() != 0)
                tfw_skip("checkout_update makes the checkout root's: needs root");
        static const char *const before[] = {
                "a/b/c", "a/b-x", "a/b.c", "a/bb/f", "d/e/f", "g", "deep/1/2/3/4/f", "deep/1/keep", "x/y",
        };
        /* Kept entries only: nothing to download, so no server is needed. */
        static const char *const after[] = {"a/b/c", "g", "deep/1/keep"};
        _cleanup_vmanifest_ VManifest *m1 = manifest_of(before, ELEMENTSOF(before)),
                                      *m2 = manifest_of(after, ELEMENTSOF(after));
        make_kept_checkout(d->fd, m1);
        _cleanup_close_ int co = open_dir_at(d->fd, "checkout");
        RealStat rs = {.co = co, .m = m1};
        assert_int_equal(checkout_index_save(d->fd, "checkout.index", "acme/app", m1, real_stat, &rs), 0);

        CheckoutSummary sum;
        TfwError e = {0};
        int r = checkout_update(NULL, "acme/app", m2, d->fd, getgid(), 1 << 20, &sum, &e);
        if (r < 0)
                fail_msg("checkout_update: %s", e.message);
        assert_int_equal(sum.kept, ELEMENTSOF(after));
        assert_int_equal(sum.downloaded, 0);
        for (size_t i = 0; i < ELEMENTSOF(after); i++)
                assert_true(exists(co, after[i]));
        static const char *const gone[] = {"a/b-x", "a/b.c", "a/bb", "d", "deep/1/2", "x"};
        for (size_t i = 0; i < ELEMENTSOF(gone); i++)
                if (exists(co, gone[i]))
                        fail_msg("'%s' is still there", gone[i]);

        /* The new index is the new tree's: a checkout of the first tree again keeps three. */
        _cleanup_(checkout_index_freep) CheckoutIndex *x = NULL;
        assert_int_equal(checkout_index_load(d->fd, "checkout.index", "acme/app", 100, &x), 0);
        assert_non_null(x);
        assert_int_equal(x->n, ELEMENTSOF(after));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_round_trip, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_unusable_files_are_absent, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_update_removes_what_the_new_tree_lacks, tfw_tmpdir_setup,
                                                tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
