/* SPDX-License-Identifier: MIT */
/* common/: sizes, CPU counts, time, SHA-256, path checks, bounded reads, draining a
 * non-blocking queue, atomic writes, fd-relative removal and the strict JSON loader. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/path-util.h"
#include "common/resolve.h"
#include "common/sha256.h"
#include "common/size.h"
#include "common/time-util.h"
#include "tests/unit/lib/tfw-test.h"

static void test_parse_size(void **state) {
        (void) state;
        uint64_t v;
        char buf[32];

        assert_int_equal(parse_size("0", &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(parse_size("1024", &v), 0);
        assert_int_equal(v, 1024);
        assert_int_equal(parse_size("64k", &v), 0);
        assert_int_equal(v, 65536);
        assert_int_equal(parse_size("256m", &v), 0);
        assert_int_equal(v, 256ULL << 20);
        assert_int_equal(parse_size("2g", &v), 0);
        assert_int_equal(v, 2ULL << 30);
        assert_int_equal(parse_size("17179869183g", &v), 0);
        assert_int_equal(parse_size("17179869184g", &v), -ERANGE);
        assert_int_equal(parse_size("18446744073709551615", &v), 0);
        assert_int_equal(parse_size("18446744073709551616", &v), -ERANGE);
        const char *bad[] = {"", "k", "2G", "2 g", " 2g", "2gb", "-1", "+1", "1.5g", "2t", "0x10", "2kk"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (parse_size(bad[i], &v) != -EINVAL)
                        fail_msg("parse_size('%s') accepted", bad[i]);
        assert_string_equal(format_size(2ULL << 30, buf, sizeof(buf)), "2g");
        assert_string_equal(format_size(3ULL << 20, buf, sizeof(buf)), "3m");
        assert_string_equal(format_size(1536, buf, sizeof(buf)), "1536");
        assert_string_equal(format_size(2048, buf, sizeof(buf)), "2k");
}

static void test_parse_cpus(void **state) {
        (void) state;
        uint64_t m;
        assert_int_equal(parse_cpus("2.0", &m), 0);
        assert_int_equal(m, 2000);
        assert_int_equal(parse_cpus("0.5", &m), 0);
        assert_int_equal(m, 500);
        assert_int_equal(parse_cpus("1", &m), 0);
        assert_int_equal(m, 1000);
        assert_int_equal(parse_cpus("0.125", &m), 0);
        assert_int_equal(m, 125);
        assert_int_equal(parse_cpus("0", &m), -ERANGE);
        assert_int_equal(parse_cpus("0.000", &m), -ERANGE);
        const char *bad[] = {"", ".5", "2.", "1e3", "-1", "2.0001", "two", "2,0"};
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (parse_cpus(bad[i], &m) != -EINVAL)
                        fail_msg("parse_cpus('%s') accepted", bad[i]);
}

static void test_time(void **state) {
        (void) state;
        char buf[RFC3339_MAX];
        usec_t t;

        assert_string_equal(format_rfc3339(0, buf), "1970-01-01T00:00:00Z");
        assert_string_equal(format_rfc3339(1796050800ULL * USEC_PER_SEC + 5, buf),
                            "2026-11-30T15:00:00Z");
        assert_int_equal(parse_rfc3339("2026-11-30T15:00:00Z", &t), 0);
        assert_int_equal(t, 1796050800ULL * USEC_PER_SEC);
        assert_int_equal(parse_rfc3339("2026-11-30T15:00:00.123Z", &t), 0);
        assert_int_equal(parse_rfc3339("2026-11-30T15:00:00+01:00", &t), -EINVAL);
        assert_int_equal(parse_rfc3339("2026-11-30 15:00:00Z", &t), -EINVAL);
        assert_string_equal(format_utc_stamp(1796050800ULL * USEC_PER_SEC, buf), "20261130T150000Z");
        assert_true(now_monotonic() > 0);
        assert_true(now_realtime() > 1700000000ULL * USEC_PER_SEC);
}

static void test_sha256(void **state) {
        (void) state;
        char hex[SHA256_HEX_SIZE];
        uint8_t d[SHA256_DIGEST_SIZE], d2[SHA256_DIGEST_SIZE];
        _cleanup_(sha256_freep) Sha256 *h = NULL;

        /* FIPS 180-2 test vectors. */
        assert_int_equal(sha256_buffer_hex("", 0, hex), 0);
        assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_int_equal(sha256_buffer_hex("abc", 3, hex), 0);
        assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

        /* Incremental equals one-shot, and the context is reusable after final. */
        assert_int_equal(sha256_new(&h), 0);
        for (int round = 0; round < 2; round++) {
                assert_int_equal(sha256_update(h, "a", 1), 0);
                assert_int_equal(sha256_update(h, "bc", 2), 0);
                assert_int_equal(sha256_final(h, d), 0);
                sha256_to_hex(d, hex);
                assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        }
        assert_int_equal(sha256_from_hex(hex, d2), 0);
        assert_memory_equal(d, d2, sizeof(d));
        assert_int_equal(sha256_from_hex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", d2), -EINVAL);
        assert_int_equal(sha256_from_hex("ba78", d2), -EINVAL);
        hex[10] = 'g';
        assert_int_equal(sha256_from_hex(hex, d2), -EINVAL);
}

static void test_paths(void **state) {
        (void) state;
        const char *good[] = {"/", "/a", "/var/lib/x", "/a.b/c-d_e"};
        const char *bad[] = {"", "a", "a/b", "//", "/a/", "/a//b", "/a/./b", "/a/../b", "/..", "/.",
                             "/a/..", "/a\nb", NULL};
        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                if (!path_is_absolute_normalized(good[i]))
                        fail_msg("'%s' refused", good[i]);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (path_is_absolute_normalized(bad[i]))
                        fail_msg("'%s' accepted", bad[i] ? bad[i] : "(null)");
        assert_true(path_is_below_or_equal("/a/b", "/a"));
        assert_true(path_is_below_or_equal("/a", "/a"));
        assert_false(path_is_below_or_equal("/ab", "/a"));
        assert_true(path_is_below_or_equal("/x", "/"));
        assert_true(filename_is_valid("a.json"));
        assert_false(filename_is_valid(".."));
        assert_false(filename_is_valid("a/b"));
        assert_false(filename_is_valid(""));
}

static void test_read_bounded(void **state) {
        TestDir *d = *state;
        _cleanup_free_ char *buf = NULL;
        size_t n;

        tfw_write_file(d->fd, "f", "0123456789", (size_t) -1);
        _cleanup_close_ int fd = openat(d->fd, "f", O_RDONLY | O_CLOEXEC);
        assert_int_equal(read_full_fd_bounded(fd, 10, &buf, &n), 0);
        assert_int_equal(n, 10);
        assert_string_equal(buf, "0123456789");
        free(TAKE_PTR(buf));
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        assert_int_equal(read_full_fd_bounded(fd, 9, &buf, &n), -E2BIG);
        assert_null(buf);
        /* It stops after max+1 bytes: the offset proves it never read further. */
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 10);
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        assert_int_equal(read_full_fd_bounded(fd, 3, &buf, &n), -E2BIG);
        assert_int_equal(lseek(fd, 0, SEEK_CUR), 4);
        /* Empty input. */
        tfw_write_file(d->fd, "e", "", 0);
        _cleanup_close_ int fe = openat(d->fd, "e", O_RDONLY | O_CLOEXEC);
        assert_int_equal(read_full_fd_bounded(fe, 3, &buf, &n), 0);
        assert_int_equal(n, 0);
        assert_string_equal(buf, "");
}

/* A non-blocking queue drained: what it holds, then 0 once it is empty (EAGAIN) or ended, and
 * the errno of any other refusal. */
static void test_read_available(void **state) {
        (void) state;
        int p[2];
        char buf[8];
        assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
        assert_int_equal(read_available(p[0], buf, sizeof(buf)), 0);
        assert_int_equal(write_all(p[1], "abc", 3), 0);
        assert_int_equal(read_available(p[0], buf, sizeof(buf)), 3);
        assert_memory_equal(buf, "abc", 3);
        assert_int_equal(read_available(p[0], buf, sizeof(buf)), 0);
        close(p[1]);
        assert_int_equal(read_available(p[0], buf, sizeof(buf)), 0);
        close(p[0]);
        assert_int_equal(read_available(p[0], buf, sizeof(buf)), -EBADF);
}

static void test_atomic_write_and_rm(void **state) {
        TestDir *d = *state;
        struct stat st;

        assert_int_equal(write_file_atomic_at(d->fd, "x.json", "{}", 2, 0640, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(fstatat(d->fd, "x.json", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        assert_int_equal(st.st_size, 2);
        /* Overwrite replaces, and no temporary is left behind. */
        assert_int_equal(write_file_atomic_at(d->fd, "x.json", "[1]", 3, 0600, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(fstatat(d->fd, "x.json", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_size, 3);

        /* rm_rf_at removes a tree without following a symlink out of it. */
        assert_int_equal(mkdirat(d->fd, "t", 0755), 0);
        assert_int_equal(mkdirat(d->fd, "t/sub", 0755), 0);
        assert_int_equal(mkdirat(d->fd, "keep", 0755), 0);
        tfw_write_file(d->fd, "keep/precious", "x", 1);
        tfw_write_file(d->fd, "t/sub/f", "x", 1);
        assert_int_equal(symlinkat("../../keep", d->fd, "t/sub/link"), 0);
        assert_int_equal(rm_rf_at(d->fd, "t"), 0);
        assert_int_equal(fstatat(d->fd, "t", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(fstatat(d->fd, "keep/precious", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(rm_rf_at(d->fd, "missing"), 0);
}

/* open_dir_components follows no link anywhere in the path and makes nothing. */
static void test_open_dir_components(void **state) {
        TestDir *d = *state;
        struct stat a, b;

        assert_int_equal(mkdirat(d->fd, "a", 0755), 0);
        assert_int_equal(mkdirat(d->fd, "a/b", 0755), 0);
        assert_int_equal(symlinkat("a", d->fd, "l"), 0);
        int fd = open_dir_components(d->fd, "a/b");
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &a), 0);
        assert_int_equal(fstatat(d->fd, "a/b", &b, 0), 0);
        assert_true(a.st_ino == b.st_ino);
        safe_close(fd);
        int r = open_dir_components(d->fd, "l/b"); /* a link in the middle: never followed */
        assert_true(r == -ENOTDIR || r == -ELOOP);
        assert_int_equal(open_dir_components(d->fd, "a/../a"), -EINVAL);
        assert_int_equal(open_dir_components(d->fd, "/a"), -EINVAL);
        assert_int_equal(open_dir_components(d->fd, "a//b"), -EINVAL);
        assert_int_equal(open_dir_components(d->fd, "a/c"), -ENOENT);
        assert_int_equal(faccessat(d->fd, "a/c", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        fd = open_dir_components(d->fd, "");
        assert_true(fd >= 0 && fd != d->fd);
        safe_close(fd);
}

/* rm_rf_at never enters a mount point: a directory bind-mounted inside the tree (or a FUSE
 * file system there) is left whole and the removal says EXDEV. Needs CAP_SYS_ADMIN; the mount
 * is made in a private mount namespace of a child, so nothing outlives the test. */
static void test_rm_rf_stops_at_mounts(void **state) {
        TestDir *d = *state;
        if (geteuid() != 0)
                tfw_skip("bind mounts need root");
        assert_int_equal(mkdirat(d->fd, "victim", 0755), 0);
        tfw_write_file(d->fd, "victim/precious", "x", 1);
        assert_int_equal(mkdirat(d->fd, "t", 0755), 0);
        assert_int_equal(mkdirat(d->fd, "t/sub", 0755), 0);
        assert_int_equal(mkdirat(d->fd, "t/sub/mnt", 0755), 0);
        assert_int_equal(mkdirat(d->fd, "top", 0755), 0);
        char victim[PATH_MAX], mnt[PATH_MAX], top[PATH_MAX];
        snprintf(victim, sizeof(victim), "%s/victim", d->path);
        snprintf(mnt, sizeof(mnt), "%s/t/sub/mnt", d->path);
        snprintf(top, sizeof(top), "%s/top", d->path);

        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct stat st;
                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        _exit(10);
                if (mount(victim, mnt, NULL, MS_BIND, NULL) < 0 || mount(victim, top, NULL, MS_BIND, NULL) < 0)
                        _exit(11);
                /* An fd of this namespace (d->fd still sees the parent's mounts). */
                int fd = open(d->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        _exit(15);
                /* Opening through the mount is refused, even as O_PATH (nothing behind it is
                 * reached); a plain child opens. */
                if (openat_child_same_mount(fd, "top", O_PATH) != -EXDEV ||
                    openat_child_same_mount(fd, "top", O_RDONLY | O_DIRECTORY) != -EXDEV)
                        _exit(16);
                int plain = openat_child_same_mount(fd, "victim", O_RDONLY | O_DIRECTORY);
                if (plain < 0)
                        _exit(17);
                close(plain);
                if (rm_rf_at(fd, "t") != -EXDEV)
                        _exit(12);
                if (rm_rf_at(fd, "top") != -EXDEV)
                        _exit(13);
                /* Everything around the mount went; the mounted tree is whole. */
                if (fstatat(fd, "t/sub/mnt/precious", &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    fstatat(fd, "top/precious", &st, AT_SYMLINK_NOFOLLOW) < 0)
                        _exit(14);
                _exit(0);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        struct stat st;
        assert_int_equal(fstatat(d->fd, "victim/precious", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(rm_rf_at(d->fd, "t"), 0); /* no mount any more */
}

static void test_close_all_fds_except(void **state) {
        (void) state;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int a = open("/dev/null", O_RDONLY | O_CLOEXEC), b = open("/dev/null", O_RDONLY | O_CLOEXEC),
                    c = open("/dev/null", O_RDONLY | O_CLOEXEC);
                int keep[] = {b};
                if (close_all_fds_except(3, keep, 1) < 0)
                        _exit(2);
                _exit(!fd_is_open(a) && fd_is_open(b) && !fd_is_open(c) && fd_is_open(0) ? 0 : 1);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
}

static void expect_json(const char *s, const char *code) {
        json_t *j = NULL;
        TfwError e = {0};
        int r = json_load_object_strict(s, strlen(s), "input", &j, &e);
        if (!code) {
                assert_int_equal(r, 0);
                json_decref(j);
                return;
        }
        assert_true(r < 0);
        assert_null(j);
        if (!streq(e.code, code))
                fail_msg("'%s': expected %s, got %s (%s)", s, code, e.code, e.message);
}

static void test_json_strict(void **state) {
        (void) state;
        expect_json("{\"a\":1}", NULL);
        expect_json("{\"a\":1,\"a\":2}", "duplicate_key");
        expect_json("{\"a\":{\"b\":1,\"b\":1}}", "duplicate_key");
        expect_json("{\"a\":\"\\u0000\"}", "nul_byte");
        expect_json("{\"a\":\"\xff\"}", "invalid_utf8");
        expect_json("{\"a\":1e999999}", "out_of_range");
        expect_json("{\"a\":99999999999999999999}", "out_of_range");
        expect_json("[]", "bad_type");
        expect_json("1", "bad_type");
        expect_json("{", "bad_json");
        expect_json("{}x", "bad_json");
        expect_json("", "bad_json");

        json_t *j = json_pack("{s:i,s:f,s:s,s:n}", "i", 5, "f", 5.0, "s", "5", "n");
        TfwError e = {0};
        int64_t v;
        const char *s;
        static const char *const allowed[] = {"i", "f", "s", "n", NULL};
        static const char *const fewer[] = {"i", NULL};
        assert_int_equal(json_check_keys(j, allowed, NULL, &e), 0);
        assert_true(json_check_keys(j, fewer, "limits.", &e) < 0);
        assert_string_equal(e.code, "unknown_field");
        assert_non_null(strstr(e.message, "limits."));
        assert_int_equal(json_get_int_range(j, "i", "i", true, 1, 5, &v, &e), 0);
        assert_int_equal(v, 5);
        assert_int_equal(json_get_int_range(j, "i", "i", true, 6, 9, &v, &e), -ERANGE);
        assert_string_equal(e.code, "out_of_range");
        assert_true(json_get_int_range(j, "f", "f", true, 0, 9, &v, &e) < 0);
        assert_string_equal(e.code, "bad_type");
        assert_true(json_get_int_range(j, "s", "s", true, 0, 9, &v, &e) < 0);
        assert_string_equal(e.code, "bad_type");
        assert_int_equal(json_get_int_range(j, "x", "x", false, 0, 9, &v, &e), -ENOENT);
        assert_true(json_get_int_range(j, "x", "x", true, 0, 9, &v, &e) < 0);
        assert_string_equal(e.code, "missing_field");
        assert_int_equal(json_get_string(j, "n", "n", false, true, &s, &e), -ENOENT);
        assert_true(json_get_string(j, "n", "n", false, false, &s, &e) < 0);
        assert_int_equal(json_get_string(j, "s", "s", true, false, &s, &e), 0);
        assert_string_equal(s, "5");
        _cleanup_free_ char *canon = json_dumps_canonical(j);
        assert_string_equal(canon, "{\"f\":5.0,\"i\":5,\"n\":null,\"s\":\"5\"}");
        json_decref(j);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_size),
                cmocka_unit_test(test_parse_cpus),
                cmocka_unit_test(test_time),
                cmocka_unit_test(test_sha256),
                cmocka_unit_test(test_paths),
                cmocka_unit_test_setup_teardown(test_read_bounded, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_read_available),
                cmocka_unit_test_setup_teardown(test_atomic_write_and_rm, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_open_dir_components, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_rm_rf_stops_at_mounts, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_close_all_fds_except),
                cmocka_unit_test(test_json_strict),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
