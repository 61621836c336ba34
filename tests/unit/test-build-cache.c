/* SPDX-License-Identifier: MIT */
/* The build cache's store (snapshot/build-cache.h, snapshot/cache-merge.h; threat 15): a job's
 * changes over the version it was handed become the next version whole or not at all, a job
 * that changed nothing makes none, a clear while a job ran keeps nothing of that job, a version
 * a job runs on stays until it ends, the mount points, the tree id.
 *
 * <tmp>/store is the store, <tmp>/lane a lane's tree, as gen-store.c lays them out. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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
        char *store_path;
        GenLane lane;
        BuildCache *c;
} Fixture;

static BuildCacheParams params(Fixture *f, uint64_t max_entries) {
        return (BuildCacheParams) { .paths = paths, .store_path = f->store_path, .max_bytes = 1 << 20,
                                    .max_entries = max_entries, .uid = getuid(), .gid = getgid() };
}

static int setup(void **state) {
        int r = tfw_tmpdir_setup(state);
        if (r)
                return r;
        Fixture *f = calloc(1, sizeof(*f));
        f->d = *state;
        assert_int_equal(mkdirat(f->d->fd, "store", 0700), 0);
        assert_int_equal(mkdirat(f->d->fd, "lane", 0700), 0);
        f->store_fd = open_dir_at(f->d->fd, "store");
        assert_true(asprintf(&f->store_path, "%s/store", f->d->path) > 0);
        _cleanup_close_ int lane = open_dir_at(f->d->fd, "lane");
        assert_int_equal(mkdirat(lane, "tree", 0700), 0);
        f->lane = (GenLane) { .lock_fd = -EBADF, .lane_fd = -EBADF, .tree_fd = open_dir_at(lane, "tree") };
        BuildCacheParams p = params(f, 100);
        TfwError e = {0};
        assert_int_equal(build_cache_open(f->store_fd, &p, &f->c, &e), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        Fixture *f = *state;
        build_cache_free(f->c);
        safe_close(f->lane.tree_fd);
        safe_close(f->store_fd);
        _cleanup_free_ char *ro = NULL;
        assert_true(asprintf(&ro, "%s/cache/ro", f->store_path) > 0);
        (void) umount2(ro, MNT_DETACH);
        free(f->store_path);
        *state = f->d;
        free(f);
        return tfw_tmpdir_teardown(state);
}

/* A job's view of the cache: opened, the current version handed out. */
static BuildCache *job(Fixture *f, BuildCacheState *ret) {
        BuildCache *c = NULL;
        TfwError e = {0};
        BuildCacheParams p = params(f, 100);
        assert_int_equal(build_cache_open(f->store_fd, &p, &c, &e), 0);
        assert_int_equal(build_cache_hand_out(c, ret, &e), 0);
        return c;
}

static int version_data(Fixture *f, uint64_t v) {
        char name[64];
        snprintf(name, sizeof(name), "cache/v/%llu/data", (unsigned long long) v);
        return open_dir_at(f->store_fd, name);
}

/* A take-in as init sends one: the roots with the version's mode and times (nothing changed
 * there), then what the test writes; list: the deletions (NULL: no list). */
static int begin(Fixture *f, BuildCache *c, const char *id, uint64_t version, const char *list) {
        int fd;
        TfwError e = {0};
        assert_int_equal(build_cache_take_in_begin(c, id, &fd, &e), 0);
        _cleanup_close_ int base = version_data(f, version);
        assert_true(base >= 0);
        for (size_t i = 0; i < 2; i++) {
                char name[32];
                struct stat st;
                snprintf(name, sizeof(name), "%zu", i);
                assert_int_equal(fstatat(base, name, &st, 0), 0);
                assert_int_equal(mkdirat(fd, name, 0700), 0);
                struct timespec ts[2] = { st.st_atim, st.st_mtim };
                assert_int_equal(fchmodat(fd, name, st.st_mode & 07777, 0), 0);
                assert_int_equal(utimensat(fd, name, ts, 0), 0);
        }
        if (list)
                tfw_write_file(fd, BUILD_CACHE_DELETED, list, (size_t) -1);
        return fd;
}

/* A file below a take-in's slot, the slot's times kept (as the importer leaves them). */
static void put(int fd, const char *path, const char *text) {
        char slot[4] = { path[0], 0 };
        struct stat st;
        assert_int_equal(fstatat(fd, slot, &st, 0), 0);
        const char *slash = strrchr(path, '/');
        if (slash != path + 1) {
                _cleanup_free_ char *dir = strndup(path, (size_t) (slash - path));
                _cleanup_free_ char *cmd = NULL;
                assert_int_equal(mkdirat(fd, dir, 0750) < 0 && errno != EEXIST, 0);
        }
        tfw_write_file(fd, path, text, (size_t) -1);
        struct timespec ts[2] = { st.st_atim, st.st_mtim };
        assert_int_equal(utimensat(fd, slot, ts, 0), 0);
}

static char *read_at(int dir_fd, const char *path) {
        _cleanup_close_ int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        char *buf = NULL;
        assert_int_equal(read_full_fd_bounded(fd, 64, &buf, NULL), 0);
        return buf;
}

static bool version_exists(Fixture *f, uint64_t v) {
        char name[64];
        snprintf(name, sizeof(name), "cache/v/%llu", (unsigned long long) v);
        return faccessat(f->store_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Version 1 from the empty cache: "0/x" holding "x". */
static void first_version(Fixture *f, BuildCacheState *ret) {
        BuildCacheState h;
        TfwError e = {0};
        BuildCache *j = job(f, &h);
        int fd = begin(f, j, "first", 0, "");
        put(fd, "0/x", "x");
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(j, "first", h.epoch, ret, &e), 0);
        assert_int_equal(ret->version, 1);
        build_cache_free(j);
}

/* The first version from the empty one; the next from it, with the job's one change: the file
 * it did not change is the same inode, read for the tree id only once; the old version goes. */
static void test_versions(void **state) {
        Fixture *f = *state;
        BuildCacheState s0, s1, s2, h;
        TfwError e = {0};
        bool made;

        assert_int_equal(build_cache_state(f->c, &s0, &e), 0);
        assert_string_equal(s0.tree, "");
        assert_int_equal(s0.version, 0);
        assert_int_equal(build_cache_prepare_lane(f->c, &f->lane, &made, &e), 0);
        assert_true(made);
        struct stat st;
        assert_int_equal(fstatat(f->lane.tree_fd, "sub/target", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(build_cache_prepare_lane(f->c, &f->lane, &made, &e), 0);
        assert_false(made);
        /* The versions' read-only mount, for the capsule. */
        struct statvfs sv;
        _cleanup_free_ char *ro = NULL;
        assert_true(asprintf(&ro, "%s/cache/ro", f->store_path) > 0);
        assert_string_equal(build_cache_versions_path(f->c), ro);
        assert_int_equal(statvfs(ro, &sv), 0);
        assert_true(sv.f_flag & ST_RDONLY);

        BuildCache *j1 = job(f, &h);
        assert_int_equal(h.version, 0);
        int fd = begin(f, j1, "j1", 0, "");
        put(fd, "0/f", "one");
        put(fd, "1/f", "one");
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(j1, "j1", h.epoch, &s1, &e), 0);
        build_cache_free(j1);
        assert_true(s1.changed);
        assert_int_equal(s1.version, 1);
        assert_int_equal(strlen(s1.tree), 64);
        assert_int_equal(s1.entries, 2);
        assert_int_equal(s1.bytes, 6);
        assert_int_equal(s1.hashed, 2);
        assert_false(version_exists(f, 2));

        BuildCache *j2 = job(f, &h);
        assert_int_equal(h.version, 1);
        assert_string_equal(h.tree, s1.tree);
        fd = begin(f, j2, "j2", 1, "");
        put(fd, "0/f", "two");
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(j2, "j2", h.epoch, &s2, &e), 0);
        /* Version 1 is retired at once, removed once the job is done with the cache. */
        assert_false(version_exists(f, 1));
        assert_int_equal(faccessat(f->store_fd, "cache/trash-1", F_OK, AT_SYMLINK_NOFOLLOW), 0);
        build_cache_free(j2);
        assert_int_equal(faccessat(f->store_fd, "cache/trash-1", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(s2.version, 2);
        assert_int_equal(s2.files_unchanged, 1);
        assert_int_equal(s2.hashed, 1);
        assert_string_not_equal(s2.tree, s1.tree);
        _cleanup_close_ int v2 = version_data(f, 2);
        _cleanup_free_ char *a = read_at(v2, "0/f"), *b = read_at(v2, "1/f");
        assert_string_equal(a, "two");
        assert_string_equal(b, "one");
        /* Nobody pins version 1 any more: it went; the take-ins too. */
        assert_false(version_exists(f, 1));
        assert_int_equal(faccessat(f->store_fd, "cache/in-j1", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(faccessat(f->store_fd, "cache/in-j2", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}

/* A job that changed nothing (no entry, no deletion, the roots as handed out) makes no version,
 * whatever happened meanwhile; a root's mtime alone is a change. */
static void test_nothing_changed(void **state) {
        Fixture *f = *state;
        BuildCacheState h, s1, s;
        TfwError e = {0};

        first_version(f, &s1);
        BuildCache *j = job(f, &h);
        int fd = begin(f, j, "b", 1, NULL);
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(j, "b", h.epoch, &s, &e), 0);
        build_cache_free(j);
        assert_false(s.changed);
        assert_int_equal(s.version, 1);
        assert_string_equal(s.tree, s1.tree);
        assert_int_equal(s.files_unchanged, 1);
        assert_false(version_exists(f, 2));

        j = job(f, &h);
        fd = begin(f, j, "c", 1, "");
        struct timespec ts[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_sec = 12345 } };
        assert_int_equal(utimensat(fd, "1", ts, 0), 0);
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(j, "c", h.epoch, &s, &e), 0);
        build_cache_free(j);
        assert_true(s.changed);
        assert_int_equal(s.version, 2);
        assert_string_equal(s.tree, s1.tree);
        struct stat st;
        _cleanup_close_ int v2 = version_data(f, 2);
        assert_int_equal(fstatat(v2, "1", &st, 0), 0);
        assert_int_equal(st.st_mtim.tv_sec, 12345);
}

/* What the job removed is not in the next version: a file, a directory with what is below it. */
static void test_deletions(void **state) {
        Fixture *f = *state;
        BuildCacheState h, s;
        TfwError e = {0};

        BuildCache *j = job(f, &h);
        int fd = begin(f, j, "a", 0, "");
        put(fd, "0/keep", "k");
        put(fd, "0/d/x", "x");
        put(fd, "1/gone", "g");
        put(fd, "1/sp ace", "s");
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(j, "a", h.epoch, &s, &e), 0);
        build_cache_free(j);
        assert_int_equal(s.entries, 5);

        j = job(f, &h);
        fd = begin(f, j, "b", 1, "0/d\n1/gone\n1/sp\\x20ace\n");
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(j, "b", h.epoch, &s, &e), 0);
        build_cache_free(j);
        assert_int_equal(s.entries, 1);
        _cleanup_close_ int v = version_data(f, s.version);
        assert_int_equal(faccessat(v, "0/keep", F_OK, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(faccessat(v, "0/d", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(faccessat(v, "1/gone", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(faccessat(v, "1/sp ace", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}

/* A take-in that breaks the rules is refused whole, naming why; the cache stays. */
static void test_bad_take_in(void **state) {
        Fixture *f = *state;
        BuildCacheState h, s1, s;
        TfwError e = {0};
        static const struct { const char *list, *why; } bad[] = {
                { "0/../x\n", "not a path below" },     { "/0/x\n", "not a path below" },
                { "2/x\n", "not a path below" },        { "00/x\n", "not a path below" },
                { "0/\n", "not a path below" },         { "0\n", "not a path below" },
                { "0/x", "without a newline" },          { "0/a\\x00b\n", "cannot be read" },
                { "0/a\tb\n", "cannot be read" },
        };

        first_version(f, &s1);
        BuildCache *j;
        int fd;
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                j = job(f, &h); /* a job each time, on version 1 */
                fd = begin(f, j, "b", 1, bad[i].list);
                safe_close(fd);
                e = (TfwError) {};
                assert_int_equal(build_cache_take_in_commit(j, "b", h.epoch, &s, &e), -EBADMSG);
                assert_string_equal(e.code, "cache_rejected");
                if (!strstr(e.message, bad[i].why))
                        fail_msg("%s: %s", bad[i].list, e.message);
                build_cache_free(j);
        }
        /* A missing path; a top-level entry that is not a path's. */
        j = job(f, &h);
        assert_int_equal(build_cache_take_in_begin(j, "c", &fd, &e), 0);
        assert_int_equal(mkdirat(fd, "0", 0750), 0);
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(j, "c", h.epoch, &s, &e), -EBADMSG);
        assert_string_equal(e.code, "cache_rejected");
        build_cache_free(j);
        j = job(f, &h);
        fd = begin(f, j, "d", 1, "");
        assert_int_equal(mkdirat(fd, "01", 0750), 0);
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(j, "d", h.epoch, &s, &e), -EBADMSG);
        build_cache_free(j);
        assert_int_equal(build_cache_state(f->c, &s, &e), 0);
        assert_string_equal(s.tree, s1.tree);
        assert_int_equal(s.version, 1);
        assert_int_equal(faccessat(f->store_fd, "cache/in-d", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}

/* Over the entries' bound: nothing kept, in the bound's words. */
static void test_too_large(void **state) {
        Fixture *f = *state;
        BuildCacheState h, s;
        TfwError e = {0};
        BuildCache *c = NULL;
        BuildCacheParams p = params(f, 3);
        assert_int_equal(build_cache_open(f->store_fd, &p, &c, &e), 0);
        assert_int_equal(build_cache_hand_out(c, &h, &e), 0);
        int fd = begin(f, c, "a", 0, "");
        for (int i = 0; i < 8; i++) {
                char name[16];
                snprintf(name, sizeof(name), "0/f%d", i);
                put(fd, name, "x");
        }
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(c, "a", h.epoch, &s, &e), -E2BIG);
        assert_string_equal(e.code, "cache_too_large");
        build_cache_free(c);
        assert_false(version_exists(f, 1));
}

/* cache clear while a job ran: its take-in is not kept, the cache stays empty; the version it
 * was handed stays while it is pinned, and goes with the next sweep after. */
static void test_clear_wins(void **state) {
        Fixture *f = *state;
        BuildCacheState h, s1, now;
        TfwError e = {0};

        first_version(f, &s1);
        BuildCache *j = job(f, &h); /* began before the clear, on version 1 */
        int fd = begin(f, j, "b", 1, "");
        put(fd, "0/y", "y");
        safe_close(fd);
        assert_int_equal(build_cache_clear(f->c, &e), 0);
        assert_true(version_exists(f, 1));
        assert_int_equal(build_cache_take_in_commit(j, "b", h.epoch, &now, &e), -ESTALE);
        assert_string_equal(e.code, "cache_cleared");
        build_cache_free(j);
        assert_int_equal(build_cache_state(f->c, &now, &e), 0);
        assert_string_equal(now.tree, "");
        assert_int_equal(now.version, 0);
        assert_int_equal(now.epoch, s1.epoch + 1);
        assert_int_equal(faccessat(f->store_fd, "cache/in-b", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        BuildCache *c = job(f, &now);
        assert_false(version_exists(f, 1));
        build_cache_free(c);
}

/* A version a job still runs on is not removed when the next one is made. */
static void test_pinned_version_stays(void **state) {
        Fixture *f = *state;
        BuildCacheState h, ha, s;
        TfwError e = {0};

        first_version(f, &s);
        BuildCache *running = job(f, &ha); /* runs on version 1 */
        BuildCache *j = job(f, &h);
        int fd = begin(f, j, "b", 1, "");
        put(fd, "0/y", "y");
        safe_close(fd);
        assert_int_equal(build_cache_take_in_commit(j, "b", h.epoch, &s, &e), 0);
        build_cache_free(j);
        assert_int_equal(s.version, 2);
        assert_true(version_exists(f, 1));
        _cleanup_close_ int v1 = version_data(f, 1);
        _cleanup_free_ char *x = read_at(v1, "0/x");
        assert_string_equal(x, "x");
        build_cache_free(running);
        BuildCache *c = job(f, &h);
        assert_false(version_exists(f, 1));
        assert_int_equal(h.version, 2);
        build_cache_free(c);
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

/* Hand-outs racing take-ins: every version handed out is whole, exactly the tree it says (the
 * shared and exclusive locks), and stays while pinned. */
static void test_hand_out_races_replacement(void **state) {
        Fixture *f = *state;
        TfwError e = {0};

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                for (int i = 0; i < 150; i++) {
                        char id[32], text[8];
                        BuildCache *c2 = NULL;
                        BuildCacheState st, out;
                        BuildCacheParams p = params(f, 1000);
                        snprintf(id, sizeof(id), "r%d", i);
                        if (build_cache_open(f->store_fd, &p, &c2, &e) < 0 || build_cache_hand_out(c2, &st, &e) < 0)
                                _exit(1);
                        int fd = begin(f, c2, id, st.version, "");
                        /* Many files each time: a torn version would miss some. */
                        for (int k = 0; k < 2; k++)
                                for (int n = 0; n < 40; n++) {
                                        char name[32];
                                        snprintf(name, sizeof(name), "%d/f%d", k, n);
                                        snprintf(text, sizeof(text), "%c", 'A' + (i % 2));
                                        put(fd, name, text);
                                }
                        close(fd);
                        if (build_cache_take_in_commit(c2, id, st.epoch, &out, &e) < 0)
                                _exit(4);
                        build_cache_free(c2);
                }
                _exit(0);
        }
        unsigned checked = 0;
        for (;;) {
                int st;
                bool done = waitpid(pid, &st, WNOHANG) == pid;
                BuildCacheState out, mine;
                BuildCache *c = job(f, &out);
                if (out.tree[0]) {
                        _cleanup_close_ int v = version_data(f, out.version);
                        assert_true(v >= 0);
                        assert_int_equal(build_cache_tree_id(v, paths, 1000, NULL, NULL, &mine, &e), 0);
                        assert_string_equal(mine.tree, out.tree);
                        checked++;
                }
                build_cache_free(c);
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
        BuildCacheParams p = params(f, 100);

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
        /* The store's read-only mount of its versions, in a mount namespace of the test's own. */
        if (geteuid() != 0) {
                printf("test-build-cache: %s: needs root (the store mounts its versions read-only)\n",
                       tfw_must_work() ? "failed" : "skipped");
                return tfw_must_work() ? 1 : 77;
        }
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
                perror("test-build-cache: a mount namespace");
                return 1;
        }
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_versions, setup, teardown),
                cmocka_unit_test_setup_teardown(test_nothing_changed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_deletions, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_take_in, setup, teardown),
                cmocka_unit_test_setup_teardown(test_too_large, setup, teardown),
                cmocka_unit_test_setup_teardown(test_clear_wins, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pinned_version_stays, setup, teardown),
                cmocka_unit_test_setup_teardown(test_blocked_mount_point, setup, teardown),
                cmocka_unit_test_setup_teardown(test_tree_id_is_gits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_link_parent_not_followed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dead_take_in_swept, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hand_out_races_replacement, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
