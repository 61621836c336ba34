/* SPDX-License-Identifier: MIT */
/* The build cache's store (snapshot/build-cache.h; threat 15): a take-in becomes the cache
 * whole or not at all, a clear while a job ran keeps nothing of that job, a lane's copy is its
 * own (a replacement meanwhile does not change it), the mount points, the tree id.
 *
 * <tmp>/store is the store, <tmp>/lane a lane (tree/ and cache/), as gen-store.c lays them out. */
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
#include "common/macro.h"
#include "snapshot/build-cache.h"
#include "tests/unit/lib/tfw-test.h"

static char *const paths[] = { (char *) "build", (char *) "sub/target", NULL };

typedef struct Fixture {
        TestDir *d;
        int store_fd;
        GenLane lane;
        BuildCache *c;
} Fixture;

static int setup(void **state) {
        int r = tfw_tmpdir_setup(state);
        if (r)
                return r;
        Fixture *f = calloc(1, sizeof(*f));
        f->d = *state;
        assert_int_equal(mkdirat(f->d->fd, "store", 0700), 0);
        assert_int_equal(mkdirat(f->d->fd, "lane", 0700), 0);
        f->store_fd = open_dir_at(f->d->fd, "store");
        _cleanup_close_ int lane = open_dir_at(f->d->fd, "lane");
        assert_int_equal(mkdirat(lane, "tree", 0700), 0);
        assert_int_equal(mkdirat(lane, "cache", 0700), 0);
        f->lane = (GenLane) { .lock_fd = -EBADF, .lane_fd = -EBADF, .tree_fd = open_dir_at(lane, "tree"),
                              .cache_fd = open_dir_at(lane, "cache") };
        BuildCacheParams p = { .paths = paths, .max_bytes = 1 << 20, .max_entries = 100, .uid = getuid(), .gid = getgid() };
        TfwError e = {0};
        assert_int_equal(build_cache_open(f->store_fd, &p, &f->c, &e), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;
        build_cache_free(f->c);
        safe_close(f->lane.tree_fd);
        safe_close(f->lane.cache_fd);
        safe_close(f->store_fd);
        *state = f->d;
        free(f);
        return tfw_tmpdir_teardown(state);
}

/* A take-in of job id holding, for each cache path, one file "f" with content text. */
static void take_in(Fixture *f, const char *id, const char *text, bool whole) {
        int fd;
        TfwError e = {0};
        assert_int_equal(build_cache_take_in_begin(f->c, id, &fd, &e), 0);
        for (size_t i = 0; i < (whole ? 2u : 1u); i++) {
                char name[32];
                snprintf(name, sizeof(name), "%zu", i);
                assert_int_equal(mkdirat(fd, name, 0750), 0);
                _cleanup_close_ int s = open_dir_at(fd, name);
                tfw_write_file(s, "f", text, (size_t) -1);
        }
        safe_close(fd);
}

static char *slot_file(Fixture *f, size_t i) {
        char name[16];
        snprintf(name, sizeof(name), "%zu/f", i);
        _cleanup_close_ int fd = openat(f->lane.cache_fd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        char *buf = NULL;
        assert_int_equal(read_full_fd_bounded(fd, 64, &buf, NULL), 0);
        return buf;
}

static void test_replace_and_hand_out(void **state) {
        Fixture *f = *state;
        BuildCacheState s0, s1, s2, out;
        TfwError e = {0};
        bool made;

        assert_int_equal(build_cache_state(f->c, &s0, &e), 0);
        assert_string_equal(s0.tree, "");
        assert_int_equal(build_cache_prepare_lane(f->c, &f->lane, &made, &e), 0);
        assert_true(made);
        struct stat st;
        assert_int_equal(fstatat(f->lane.tree_fd, "sub/target", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(build_cache_prepare_lane(f->c, &f->lane, &made, &e), 0);
        assert_false(made);

        take_in(f, "j1", "one", true);
        assert_int_equal(build_cache_take_in_commit(f->c, "j1", s0.epoch, &s1, &e), 0);
        assert_int_equal(strlen(s1.tree), 64);
        assert_int_equal(s1.entries, 2);
        assert_int_equal(s1.bytes, 6);
        assert_int_equal(build_cache_hand_out(f->c, &f->lane, &out, &e), 0);
        assert_string_equal(out.tree, s1.tree);
        _cleanup_free_ char *a = slot_file(f, 0), *b = slot_file(f, 1);
        assert_string_equal(a, "one");
        assert_string_equal(b, "one");

        /* A replacement after the hand-out leaves the lane's copy as it was. */
        take_in(f, "j2", "two", true);
        assert_int_equal(build_cache_take_in_commit(f->c, "j2", s1.epoch, &s2, &e), 0);
        assert_string_not_equal(s2.tree, s1.tree);
        _cleanup_free_ char *c = slot_file(f, 0);
        assert_string_equal(c, "one");
        assert_int_equal(build_cache_hand_out(f->c, &f->lane, &out, &e), 0);
        _cleanup_free_ char *d = slot_file(f, 1);
        assert_string_equal(d, "two");
        /* The take-ins are gone: the replaced cache with them. */
        assert_int_equal(faccessat(f->store_fd, "cache/in-j1", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(faccessat(f->store_fd, "cache/in-j2", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(build_cache_lane_empty(&f->lane), 0);
        assert_null(slot_file(f, 0));
}

/* Kept files (hard links of the cache's own inodes) are not read again for the tree id; a file
 * sent anew always is. */
static void test_kept_files_not_hashed(void **state) {
        Fixture *f = *state;
        BuildCacheState s0, s1, s2, s3;
        TfwError e = {0};
        int fd;

        assert_int_equal(build_cache_state(f->c, &s0, &e), 0);
        take_in(f, "j1", "one", true);
        assert_int_equal(build_cache_take_in_commit(f->c, "j1", s0.epoch, &s1, &e), 0);
        assert_int_equal(s1.hashed, 2);
        /* j2 keeps both: links of the current cache's files. */
        assert_int_equal(build_cache_take_in_begin(f->c, "j2", &fd, &e), 0);
        _cleanup_close_ int cur = open_dir_at(f->store_fd, "cache/current/data");
        for (int i = 0; i < 2; i++) {
                char slot[16], path[32];
                snprintf(slot, sizeof(slot), "%d", i);
                snprintf(path, sizeof(path), "%d/f", i);
                assert_int_equal(mkdirat(fd, slot, 0750), 0);
                assert_int_equal(linkat(cur, path, fd, path, 0), 0);
        }
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(f->c, "j2", s1.epoch, &s2, &e), 0);
        assert_int_equal(s2.hashed, 0);
        assert_string_equal(s2.tree, s1.tree);
        /* j3 keeps one and sends one of the same size, mtime and name: that one is read. */
        safe_close(cur);
        cur = open_dir_at(f->store_fd, "cache/current/data");
        assert_int_equal(build_cache_take_in_begin(f->c, "j3", &fd, &e), 0);
        assert_int_equal(mkdirat(fd, "0", 0750), 0);
        assert_int_equal(mkdirat(fd, "1", 0750), 0);
        assert_int_equal(linkat(cur, "0/f", fd, "0/f", 0), 0);
        _cleanup_close_ int one = open_dir_at(fd, "1");
        tfw_write_file(one, "f", "ONE", (size_t) -1);
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(f->c, "j3", s2.epoch, &s3, &e), 0);
        assert_int_equal(s3.hashed, 1);
        assert_string_not_equal(s3.tree, s2.tree);
}

/* A take-in missing one of its paths, or holding something else, is refused: the cache stays. */
static void test_incomplete_take_in(void **state) {
        Fixture *f = *state;
        BuildCacheState s0, s1, now;
        TfwError e = {0};

        assert_int_equal(build_cache_state(f->c, &s0, &e), 0);
        take_in(f, "good", "ok", true);
        assert_int_equal(build_cache_take_in_commit(f->c, "good", s0.epoch, &s1, &e), 0);
        take_in(f, "half", "no", false);
        assert_int_equal(build_cache_take_in_commit(f->c, "half", s1.epoch, &now, &e), -EBADMSG);
        assert_string_equal(e.code, "cache_rejected");
        int fd;
        assert_int_equal(build_cache_take_in_begin(f->c, "extra", &fd, &e), 0);
        assert_int_equal(mkdirat(fd, "0", 0750), 0);
        assert_int_equal(mkdirat(fd, "1", 0750), 0);
        assert_int_equal(mkdirat(fd, "01", 0750), 0);
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(f->c, "extra", s1.epoch, &now, &e), -EBADMSG);
        assert_int_equal(build_cache_state(f->c, &now, &e), 0);
        assert_string_equal(now.tree, s1.tree);
}

/* cache clear while a job ran: its take-in is not kept, the cache stays empty. */
static void test_clear_wins(void **state) {
        Fixture *f = *state;
        BuildCacheState s0, s1, now;
        TfwError e = {0};

        assert_int_equal(build_cache_state(f->c, &s0, &e), 0);
        take_in(f, "a", "x", true);
        assert_int_equal(build_cache_take_in_commit(f->c, "a", s0.epoch, &s1, &e), 0);
        take_in(f, "b", "y", true); /* began before the clear */
        assert_int_equal(build_cache_clear(f->c, &e), 0);
        assert_int_equal(build_cache_take_in_commit(f->c, "b", s1.epoch, &now, &e), -ESTALE);
        assert_string_equal(e.code, "cache_cleared");
        assert_int_equal(build_cache_state(f->c, &now, &e), 0);
        assert_string_equal(now.tree, "");
        assert_int_equal(now.epoch, s1.epoch + 1);
        assert_int_equal(faccessat(f->store_fd, "cache/in-b", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}

/* A file where a cache path's parent should be: the job cannot mount the cache there. */
static void test_blocked_mount_point(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        bool made;
        tfw_write_file(f->lane.tree_fd, "sub", "file", (size_t) -1);
        assert_int_equal(build_cache_prepare_lane(f->c, &f->lane, &made, &e), -ENOTDIR);
        assert_string_equal(e.code, "cache_path_blocked");
        assert_non_null(strstr(e.message, "'sub'"));
}

/* A symbolic link where a parent of a cache path should be is never followed: nothing is made
 * where it points (a generation holds no links, and this stays true if one ever did). */
static void test_link_parent_not_followed(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        bool made;
        assert_int_equal(mkdirat(f->d->fd, "elsewhere", 0700), 0);
        _cleanup_free_ char *target = NULL;
        assert_true(asprintf(&target, "%s/elsewhere", f->d->path) > 0);
        assert_int_equal(symlinkat(target, f->lane.tree_fd, "sub"), 0);
        assert_int_equal(build_cache_prepare_lane(f->c, &f->lane, &made, &e), -ENOTDIR);
        assert_string_equal(e.code, "cache_path_blocked");
        assert_int_equal(faccessat(f->d->fd, "elsewhere/target", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(errno, ENOENT);
}

/* Hand-outs racing replacements: every lane copy is whole, exactly the tree it says it started
 * from (the shared and exclusive locks). */
static void test_hand_out_races_replacement(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        bool made;
        assert_int_equal(build_cache_prepare_lane(f->c, &f->lane, &made, &e), 0);

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                BuildCache *c2 = NULL;
                BuildCacheParams p = { .paths = paths, .max_bytes = 1 << 20, .max_entries = 1000, .uid = getuid(), .gid = getgid() };
                if (build_cache_open(f->store_fd, &p, &c2, &e) < 0)
                        _exit(1);
                for (int i = 0; i < 200; i++) {
                        char id[32], text[8];
                        int fd;
                        BuildCacheState st, out;
                        snprintf(id, sizeof(id), "r%d", i);
                        if (build_cache_state(c2, &st, &e) < 0 || build_cache_take_in_begin(c2, id, &fd, &e) < 0)
                                _exit(2);
                        /* Many files each time: a torn copy would miss some. */
                        for (int k = 0; k < 2; k++) {
                                char slot[16];
                                snprintf(slot, sizeof(slot), "%d", k);
                                if (mkdirat(fd, slot, 0750) < 0)
                                        _exit(3);
                                int sd = openat(fd, slot, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                                for (int n = 0; n < 40; n++) {
                                        char name[32];
                                        snprintf(name, sizeof(name), "f%d", n);
                                        snprintf(text, sizeof(text), "%c", 'A' + (i % 2));
                                        tfw_write_file(sd, name, text, (size_t) -1);
                                }
                                close(sd);
                        }
                        close(fd);
                        if (build_cache_take_in_commit(c2, id, st.epoch, &out, &e) < 0)
                                _exit(4);
                }
                build_cache_free(c2);
                _exit(0);
        }
        unsigned checked = 0;
        for (;;) {
                int st;
                bool done = waitpid(pid, &st, WNOHANG) == pid;
                BuildCacheState out, mine;
                assert_int_equal(build_cache_hand_out(f->c, &f->lane, &out, &e), 0);
                if (out.tree[0]) {
                        assert_int_equal(build_cache_tree_id(f->lane.cache_fd, paths, 1000, NULL, NULL, &mine, &e), 0);
                        assert_string_equal(mine.tree, out.tree);
                        checked++;
                }
                if (done) {
                        assert_true(WIFEXITED(st));
                        assert_int_equal(WEXITSTATUS(st), 0);
                        break;
                }
        }
        assert_true(checked > 0);
}

/* A take-in whose process died (killed mid-import, or between the exchange and the removal of
 * the cache it replaced) goes at the next open; a live one stays. */
static void test_dead_take_in_swept(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        BuildCacheParams p = { .paths = paths, .max_bytes = 1 << 20, .max_entries = 100, .uid = getuid(), .gid = getgid() };

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                BuildCache *c2 = NULL;
                int fd;
                if (build_cache_open(f->store_fd, &p, &c2, &e) < 0 || build_cache_take_in_begin(c2, "dead", &fd, &e) < 0)
                        _exit(1);
                _exit(mkdirat(fd, "0", 0750) < 0 ? 2 : 0); /* dies holding it */
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_int_equal(WEXITSTATUS(st), 0);
        int fd;
        assert_int_equal(build_cache_take_in_begin(f->c, "live", &fd, &e), 0);
        safe_close(fd);
        assert_int_equal(faccessat(f->store_fd, "cache/in-dead", F_OK, AT_SYMLINK_NOFOLLOW), 0);
        BuildCache *c3 = NULL;
        assert_int_equal(build_cache_open(f->store_fd, &p, &c3, &e), 0);
        assert_int_equal(faccessat(f->store_fd, "cache/in-dead", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(faccessat(f->store_fd, "cache/in-live", F_OK, AT_SYMLINK_NOFOLLOW), 0);
        build_cache_free(c3);
}

/* The tree id is git's for the cache as /work shows it (a link recorded as a link). */
static void test_tree_id_is_gits(void **state) {
        Fixture *f = *state;
        TfwError e = {0};
        BuildCacheState s;

        if (system("git --version >/dev/null 2>&1") != 0)
                tfw_skip("git is not installed");
        assert_int_equal(mkdirat(f->d->fd, "data", 0700), 0);
        _cleanup_close_ int data = open_dir_at(f->d->fd, "data");
        assert_int_equal(mkdirat(data, "0", 0700), 0);
        assert_int_equal(mkdirat(data, "1", 0700), 0);
        _cleanup_close_ int z = open_dir_at(data, "0");
        tfw_write_file(z, "a.o", "object", (size_t) -1);
        assert_int_equal(symlinkat("a.o", z, "link"), 0);
        assert_int_equal(build_cache_tree_id(data, paths, 100, NULL, NULL, &s, &e), 0);
        _cleanup_free_ char *cmd = NULL;
        assert_true(asprintf(&cmd,
                             "cd '%s' && mkdir -p g/build && cp -P data/0/a.o data/0/link g/build/ && cd g && "
                             "git init -q --object-format=sha256 && git add -A && test \"$(git write-tree)\" = %s",
                             f->d->path, s.tree) > 0);
        assert_int_equal(system(cmd), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_replace_and_hand_out, setup, teardown),
                cmocka_unit_test_setup_teardown(test_incomplete_take_in, setup, teardown),
                cmocka_unit_test_setup_teardown(test_kept_files_not_hashed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_clear_wins, setup, teardown),
                cmocka_unit_test_setup_teardown(test_blocked_mount_point, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tree_id_is_gits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_link_parent_not_followed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dead_take_in_swept, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hand_out_races_replacement, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
