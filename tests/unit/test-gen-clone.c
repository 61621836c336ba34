/* SPDX-License-Identifier: MIT */
/* A generation's tree cloned by several threads (snapshot/gen-clone.h):
 *   - every directory of a wide and deep tree (more subtrees than the caller's thread keeps,
 *     a chain deeper than the upper directories it opens) is made again with its owner, mode
 *     and times, every file is a hard link to the source's, and nothing else is there;
 *   - anything but a file or a directory fails the clone, at the top or deep in a subtree a
 *     thread fills. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "snapshot/gen-clone.h"
#include "tests/unit/lib/tfw-test.h"

static void mk(int dir, const char *path) {
        assert_int_equal(mkdirat(dir, path, 0700), 0);
}

static void stamp(int dir, const char *path, mode_t mode, time_t mtime) {
        struct timespec t[2] = { { .tv_sec = mtime }, { .tv_sec = mtime } };
        assert_int_equal(fchmodat(dir, path, mode, 0), 0);
        assert_int_equal(utimensat(dir, path, t, AT_SYMLINK_NOFOLLOW), 0);
}

/* With wide, 100 directories of 3 files and a subdirectory each; and a chain 300 deep with a
 * file at each level; every directory a mode and a time of its own. Wide, the root alone has
 * more subtrees than the caller's thread keeps; without, the chain is deeper than the upper
 * directories it opens. */
static void make_tree(int root, bool wide) {
        char p[8192];
        for (int i = 0; wide && i < 100; i++) {
                snprintf(p, sizeof(p), "d%03d", i);
                mk(root, p);
                for (int k = 0; k < 3; k++) {
                        snprintf(p, sizeof(p), "d%03d/f%d", i, k);
                        tfw_write_file(root, p, p, (size_t) -1);
                }
                snprintf(p, sizeof(p), "d%03d/sub", i);
                mk(root, p);
                snprintf(p, sizeof(p), "d%03d/sub/leaf", i);
                tfw_write_file(root, p, "leaf", (size_t) -1);
        }
        size_t n = 0;
        for (int i = 0; i < 300; i++) {
                n += (size_t) snprintf(p + n, sizeof(p) - n, "%sc", i ? "/" : "");
                mk(root, p);
                char f[8300];
                snprintf(f, sizeof(f), "%s/x", p);
                tfw_write_file(root, f, "x", (size_t) -1);
        }
        /* Deepest first: a directory's time is set after its entries. */
        for (int i = 300; i > 0; i--) {
                p[2 * i - 1] = 0;
                stamp(root, p, (mode_t) (0700 | (i % 8) << 3), 1000000 + i);
        }
        for (int i = 0; wide && i < 100; i++) {
                snprintf(p, sizeof(p), "d%03d/sub", i);
                stamp(root, p, 0750, 2000000 + i);
                snprintf(p, sizeof(p), "d%03d", i);
                stamp(root, p, i % 2 ? 0755 : 0711, 3000000 + i);
        }
}

static int src_fd = -1, dst_fd = -1;
static size_t seen_dirs, seen_files;

/* Every entry of src (walked by path below tdir/src) is in dst as the clone must make it. */
static char src_path[4096];
static int check_entry(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) type;
        if (ftw->level == 0)
                return 0;
        const char *rel = path + strlen(src_path) + 1;
        struct stat d;
        assert_int_equal(fstatat(dst_fd, rel, &d, AT_SYMLINK_NOFOLLOW), 0);
        if (S_ISDIR(st->st_mode)) {
                assert_true(S_ISDIR(d.st_mode));
                assert_int_not_equal(d.st_ino, st->st_ino);
                assert_int_equal(d.st_mode, st->st_mode);
                assert_int_equal(d.st_uid, st->st_uid);
                assert_int_equal(d.st_gid, st->st_gid);
                assert_int_equal(d.st_mtim.tv_sec, st->st_mtim.tv_sec);
                assert_int_equal(d.st_mtim.tv_nsec, st->st_mtim.tv_nsec);
                seen_dirs++;
        } else {
                assert_true(S_ISREG(st->st_mode));
                assert_int_equal(d.st_ino, st->st_ino); /* the same file: a link */
                seen_files++;
        }
        return 0;
}

static size_t count_all(int dir) {
        DIR *d = opendir_fd(dir);
        assert_non_null(d);
        size_t n = 0;
        for (struct dirent *de; (de = readdir(d));) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                n++;
                if (de->d_type == DT_DIR) {
                        int sub = open_dir_at(dir, de->d_name);
                        assert_true(sub >= 0);
                        n += count_all(sub);
                        close(sub);
                }
        }
        closedir(d);
        return n;
}

static void open_pair(TestDir *t) {
        assert_int_equal(mkdirat(t->fd, "src", 0755), 0);
        assert_int_equal(mkdirat(t->fd, "dst", 0755), 0);
        src_fd = open_dir_at(t->fd, "src");
        dst_fd = open_dir_at(t->fd, "dst");
        assert_true(src_fd >= 0 && dst_fd >= 0);
        snprintf(src_path, sizeof(src_path), "%s/src", t->path);
}

static void close_pair(void) {
        close(src_fd);
        close(dst_fd);
}

static void cloned(TestDir *t, bool wide) {
        open_pair(t);
        make_tree(src_fd, wide);
        assert_int_equal(gen_clone_tree(src_fd, dst_fd), 0);
        seen_dirs = seen_files = 0;
        assert_int_equal(nftw(src_path, check_entry, 64, FTW_PHYS), 0);
        assert_int_equal(seen_dirs, (wide ? 100 * 2 : 0) + 300);
        assert_int_equal(seen_files, (wide ? 100 * 4 : 0) + 300);
        assert_int_equal(count_all(dst_fd), seen_dirs + seen_files); /* nothing more */
        close_pair();
}

static void test_wide_tree_cloned(void **state) {
        cloned(*state, true);
}

static void test_deep_chain_cloned(void **state) {
        cloned(*state, false);
}

static void refused(TestDir *t, bool wide, const char *what) {
        open_pair(t);
        make_tree(src_fd, wide);
        char cmd[8192];
        snprintf(cmd, sizeof(cmd), "cd '%s' && %s", src_path, what);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(gen_clone_tree(src_fd, dst_fd), -EBADMSG);
        close_pair();
}

static void test_symlink_at_the_top_refused(void **state) {
        refused(*state, true, "ln -s /etc top-link");
}

static void test_fifo_deep_in_a_subtree_refused(void **state) {
        refused(*state, true, "mkfifo d057/sub/pipe");
}

/* In the chain: at level 100, among the upper directories (the caller's thread); at level
 * 290, below the 256 it opens (a thread's). */
static void chain_link(void **state, int level) {
        char cmd[2048] = "ln -s /etc ";
        for (int i = 0; i < level; i++)
                strcat(cmd, i ? "/c" : "c");
        strcat(cmd, "/link");
        refused(*state, false, cmd);
}

static void test_symlink_among_the_upper_directories_refused(void **state) {
        chain_link(state, 100);
}

static void test_symlink_below_the_upper_directories_refused(void **state) {
        chain_link(state, 290);
}

#define T(t) cmocka_unit_test_setup_teardown(t, tfw_tmpdir_setup, tfw_tmpdir_teardown)
int main(void) {
        if (getenv("TFW_TEST_FILTER"))
                cmocka_set_test_filter(getenv("TFW_TEST_FILTER"));
        const struct CMUnitTest tests[] = {
                T(test_wide_tree_cloned),
                T(test_deep_chain_cloned),
                T(test_symlink_at_the_top_refused),
                T(test_fifo_deep_in_a_subtree_refused),
                T(test_symlink_among_the_upper_directories_refused),
                T(test_symlink_below_the_upper_directories_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
