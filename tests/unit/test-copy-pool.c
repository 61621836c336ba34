/* SPDX-License-Identifier: MIT */
/* A generation's files copied on the copiers' threads (snapshot/copy-pool.h; docs/snapshot.md,
 * "Copied on every CPU"): the same generation as the walk's own thread makes (the same tree id,
 * index file, bytes, modes and owners), a file that shrinks, grows or is removed while it waits
 * for its copier handled as one thread handles it, and a copier's error (a file that cannot be
 * read) failing the walk with the entry's name, whether it is met among other files or after the
 * walk has ended.
 *
 * <tmp>/ws is the workspace, <tmp>/gen and <tmp>/gen2 the two generations compared. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "snapshot/copy-pool.h"
#include "snapshot/gen-index.h"
#include "snapshot/snapshot.h"
#include "tests/unit/lib/gen-fixture.h"

typedef GenFixture Fixture;

/* How the walks copy: copy_file_range (the test's directory is one filesystem) or read and
 * write (as from a workspace on another filesystem than the store's). */
static SnapshotCopyMethod copy_method;

static pthread_t main_thread;
static atomic_uint copies_elsewhere; /* files the hook saw on a thread other than the test's */
static int hook_ws = -EBADF;         /* the workspace, for the hook's changes */

static void count_thread(const char *path) {
        (void) path;
        if (!pthread_equal(pthread_self(), main_thread))
                atomic_fetch_add(&copies_elsewhere, 1);
}

/* A workspace of many files around the copy's chunk and buffer sizes, executable and not, in
 * nested directories, with a symlink and an empty directory. */
static void make_tree(Fixture *f) {
        gfx_sh(f, "mkdir -p a/b/c d e/empty;"
                  "for i in $(seq 1 150); do printf %%s $i >a/f$i; seq 1 $((i * 37)) >a/b/s$i; done;"
                  "for n in 0 1 4095 4096 131071 131072 131073 300000 1048577; do head -c $n /dev/urandom >d/n$n; done;"
                  "for i in $(seq 1 60); do printf '#!/bin/sh\\n%%s\\n' $i >a/b/c/x$i; chmod 755 a/b/c/x$i; done;"
                  "chmod 600 d/n4095; chmod 750 d/n1; ln -s a/f1 link");
        gfx_settle();
}

/* A generation of the workspace into the empty directory <tmp>/name with `copiers`, its index
 * saved as <tmp>/name.index; 0 or the walk's error (e set). */
static int walk_into(Fixture *f, const char *name, unsigned copiers, SnapshotSummary *s, TfwError *e) {
        SnapshotLimits l = gfx_limits();
        l.copiers = copiers;
        l.copy = copy_method;
        char idx[64];
        snprintf(idx, sizeof(idx), "%s.index", name);
        if (mkdirat(f->d->fd, name, 0700) < 0 && errno != EEXIST)
                return -errno;
        _cleanup_close_ int gen = openat(f->d->fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (gen < 0)
                return -errno;
        _cleanup_(gen_index_freep) GenIndex *next = NULL;
        int r = snapshot_update(f->ws, gen, NULL, GFX_COPY_UID, &l, &next, s, e);
        if (r >= 0)
                r = gen_index_save(next, f->d->fd, idx, e);
        return r;
}

/* gen and gen2 hold the same generation: summaries, index files (unless the workspace's files
 * were changed between the walks: their identities then differ), contents, modes, owners,
 * times. */
static void assert_same(Fixture *f, const SnapshotSummary *a, const SnapshotSummary *b, bool same_sources) {
        assert_string_equal(a->tree, b->tree);
        assert_int_equal(a->bytes, b->bytes);
        assert_int_equal(a->entries, b->entries);
        assert_int_equal(a->files, b->files);
        assert_int_equal(a->dirs, b->dirs);
        assert_int_equal(a->skipped_symlinks, b->skipped_symlinks);
        if (same_sources)
                gfx_sh(f, "cmp ../gen.index ../gen2.index");
        gfx_sh(f, "diff -r ../gen ../gen2 >/dev/null");
        gfx_sh(f, "a=$(cd ../gen && find . -mindepth 1 -printf '%%p %%m %%y %%U %%G\\n' -type f -printf '%%p %%s %%T@\\n' | sort); "
                  "b=$(cd ../gen2 && find . -mindepth 1 -printf '%%p %%m %%y %%U %%G\\n' -type f -printf '%%p %%s %%T@\\n' | sort);"
                  "[ \"$a\" = \"$b\" ] || { echo \"$a\" >../la; echo \"$b\" >../lb; diff ../la ../lb | head; false; }");
}

static int setup(void **state) {
        main_thread = pthread_self();
        copy_method = SNAPSHOT_COPY_AUTO;
        atomic_store(&copies_elsewhere, 0);
        snapshot_test_copy_pool_min_files = 0;
        /* Nothing the walks read is racy: both indexes say the same of every file. */
        snapshot_test_racy_window_nsec = 0;
        return gfx_setup(state);
}

static int teardown(void **state) {
        copy_pool_test_before_copy = NULL;
        hook_ws = safe_close(hook_ws);
        snapshot_test_copy_pool_min_files = SNAPSHOT_COPY_POOL_MIN_FILES;
        return gfx_teardown(state);
}

/* The copiers make the generation the walk's own thread makes, and they did copy (the files
 * were seen on other threads); the generation also equals a fresh snapshot. */
static void test_same_generation(void **state) {
        Fixture *f = *state;
        SnapshotSummary one, many;
        TfwError e = {};
        make_tree(f);
        copy_pool_test_before_copy = count_thread;
        assert_int_equal(walk_into(f, "gen", 1, &one, &e), 0);
        assert_int_equal(atomic_load(&copies_elsewhere), 0);
        assert_int_equal(walk_into(f, "gen2", 2, &many, &e), 0);
        assert_int_equal(atomic_load(&copies_elsewhere), many.files);
        assert_same(f, &one, &many, true);
        f->s = many;
        gfx_sh(f, "rm -r ../gen && mv ../gen2 ../gen");
        gfx_assert_equals_fresh(f);

        /* Past SNAPSHOT_COPY_POOL_MIN_FILES files copied on the walk's thread, the rest by the
         * copiers: the same again. */
        snapshot_test_copy_pool_min_files = 100;
        atomic_store(&copies_elsewhere, 0);
        assert_int_equal(walk_into(f, "gen2", 0, &many, &e), 0);
        assert_int_equal(atomic_load(&copies_elsewhere), many.files - 100);
        assert_same(f, &one, &many, true);
}

/* While a file waits for its copier (or, with one thread, just before the walk copies it), the
 * agent truncates and removes one and makes another grow past a chunk: each generation holds
 * what the open file held, the index marks both to be read again, and both ways agree. */
static bool shrink_too;

static void change_before_copy(const char *path) {
        if (shrink_too && streq(path, "d/n300000")) {
                _cleanup_close_ int fd = openat(hook_ws, path, O_WRONLY | O_CLOEXEC);
                assert_true(fd >= 0);
                assert_int_equal(ftruncate(fd, 10), 0);
                assert_int_equal(unlinkat(hook_ws, path, 0), 0);
        } else if (streq(path, "d/n131072")) {
                static char more[200000];
                memset(more, 'g', sizeof(more));
                _cleanup_close_ int fd = openat(hook_ws, path, O_WRONLY | O_APPEND | O_CLOEXEC);
                assert_true(fd >= 0);
                assert_int_equal(write_all(fd, more, sizeof(more)), 0);
        }
}

/* The two files as they were (the times the copies take from them too). */
static void restore(Fixture *f) {
        gfx_sh(f, "head -c 300000 /dev/zero >d/n300000; head -c 131072 /dev/zero >d/n131072;"
                  "touch -d @1000000000 d/n300000 d/n131072");
        gfx_settle();
}

static void test_changed_while_waiting(void **state) {
        Fixture *f = *state;
        SnapshotSummary one, many;
        TfwError e = {};
        make_tree(f);
        hook_ws = open(f->ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(hook_ws >= 0);
        copy_pool_test_before_copy = change_before_copy;
        shrink_too = true;
        /* Each way of copying: the file that grew or shrank is hashed from its copy. */
        static const SnapshotCopyMethod methods[] = { SNAPSHOT_COPY_READ_WRITE, SNAPSHOT_COPY_FILE_RANGE };
        for (size_t i = 0; i < ELEMENTSOF(methods); i++) {
                copy_method = methods[i];
                gfx_sh(f, "rm -rf ../gen ../gen2");
                restore(f);
                assert_int_equal(walk_into(f, "gen", 1, &one, &e), 0);
                restore(f);
                assert_int_equal(walk_into(f, "gen2", 2, &many, &e), 0);
                assert_same(f, &one, &many, false);
                gfx_sh(f, "[ $(stat -c %%s ../gen2/d/n300000) = 10 ] && [ $(stat -c %%s ../gen2/d/n131072) = 331072 ]");
        }
        copy_method = SNAPSHOT_COPY_AUTO;

        /* Read again next time, by the index of either. */
        GenIndex *x = NULL;
        assert_int_equal(gen_index_load(f->d->fd, "gen2.index", 100000, &x, &e), 0);
        GenEntry *d = gen_dir_find(&x->root, "d", 1);
        assert_non_null(d);
        assert_true(gen_dir_find(d->dir, "n300000", 7)->racy);
        assert_true(gen_dir_find(d->dir, "n131072", 7)->racy);
        assert_false(gen_dir_find(d->dir, "n131071", 7)->racy);
        assert_true(d->dir->always);
        gen_index_free(x);

        /* The byte ceiling counts what was read, the growth included: exactly the bytes read
         * fit (every other file's size is taken from the budget while one grows), one byte
         * less fails. */
        shrink_too = false;
        uint64_t announced = one.bytes - 10 + 300000 - 200000;
        SnapshotLimits l = gfx_limits();
        l.copiers = 2;
        for (int less = 0; less <= 1; less++) {
                char name[16];
                snprintf(name, sizeof(name), "gen%d", 3 + less);
                restore(f);
                assert_int_equal(mkdirat(f->d->fd, name, 0700), 0);
                _cleanup_close_ int gen = openat(f->d->fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                _cleanup_(gen_index_freep) GenIndex *next = NULL;
                l.max_bytes = announced + 200000 - (uint64_t) less;
                int r = snapshot_update(f->ws, gen, NULL, GFX_COPY_UID, &l, &next, &many, &e);
                if (less) {
                        assert_int_equal(r, -E2BIG);
                        assert_string_equal(e.code, "snapshot_too_large");
                        /* Named: the file that grew, or one taken from the budget after it. */
                        assert_non_null(strstr(e.message, "more file content than max_bytes"));
                        assert_null(next);
                } else {
                        assert_int_equal(r, 0);
                        assert_int_equal(many.bytes, l.max_bytes);
                }
        }
}

/* A file that opens but cannot be read (/proc/self/mem at offset 0: EIO), bound into the
 * workspace in a mount namespace of a child: the walk fails with snapshot_io naming it, with
 * one thread and with copiers, among many files and alone (then the error is found when the
 * walk waits for its copiers at its end). */
static Fixture *child_fixture;

static int unreadable_child(void) {
        Fixture *f = child_fixture;
        char target[PATH_MAX];
        snprintf(target, sizeof(target), "%s/a/b/mem", f->ws);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return 10;
        _cleanup_close_ int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0 || mount("/proc/self/mem", target, NULL, MS_BIND, NULL) < 0)
                return 11;
        static const unsigned copiers[] = { 1, 2 };
        char first[sizeof(((TfwError *) NULL)->message)] = "";
        for (size_t i = 0; i < ELEMENTSOF(copiers); i++) {
                SnapshotSummary s;
                TfwError e = {};
                char name[16];
                snprintf(name, sizeof(name), "bad%zu", i);
                if (walk_into(f, name, copiers[i], &s, &e) != -EIO || !streq(e.code, "snapshot_io"))
                        return 12;
                if (!strstr(e.message, "'a/b/mem': read: "))
                        return 13;
                if (i == 0)
                        snprintf(first, sizeof(first), "%s", e.message);
                else if (!streq(first, e.message))
                        return 14;
        }
        /* Alone: submitted last, failed after the walk ended. */
        if (umount2(target, MNT_DETACH) < 0 || system("cd ws && rm -r a d e link && mkdir -p a/b && touch a/b/mem") != 0 ||
            mount("/proc/self/mem", target, NULL, MS_BIND, NULL) < 0)
                return 15;
        SnapshotSummary s;
        TfwError e = {};
        if (walk_into(f, "bad-alone", 2, &s, &e) != -EIO || !strstr(e.message, "'a/b/mem': read: "))
                return 16;
        return 0;
}

static void test_unreadable_file(void **state) {
        Fixture *f = *state;
        if (geteuid() != 0)
                tfw_skip("not root: needs a mount namespace to bind a file that cannot be read");
        make_tree(f);
        child_fixture = f;
        assert_true(chdir(f->d->path) == 0);
        int r = tfw_in_child(unreadable_child);
        if (r != 0)
                fail_msg("child check %d failed", r);
}

#define T(t) cmocka_unit_test_setup_teardown(t, setup, teardown)
int main(void) {
        if (getenv("TFW_TEST_FILTER"))
                cmocka_set_test_filter(getenv("TFW_TEST_FILTER"));
        const struct CMUnitTest tests[] = {
                T(test_same_generation),
                T(test_changed_while_waiting),
                T(test_unreadable_file),
        };
        return cmocka_run_group_tests_name("copy pool", tests, NULL, NULL);
}
