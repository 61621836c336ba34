/* SPDX-License-Identifier: MIT */
/* snapshot/git-object: blob ids, tree objects and the tree id of a flat manifest, checked
 * against real git in SHA-256 repositories. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "snapshot/blob-hasher.h"
#include "snapshot/git-object.h"
#include "tests/unit/lib/tfw-test.h"

/* Well-known ids in git's SHA-256 object format. */
#define EMPTY_BLOB "473a0f4c3be8a93681a267e3b1e9a7dcda1185436fe141f7749120a303721813"
#define EMPTY_TREE "6ef19b41225c5369f1c104d45d8d85efa9b057b53b14b4b9b939dd74decc5321"

/* Run a shell command (built from test-controlled strings only), return its stdout. */
static char *run(const char *fmt, ...) _printf_(1, 2);
static char *run(const char *fmt, ...) {
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
        assert_true(fd >= 0);
        assert_int_equal(read_full_fd_bounded(fd, 16 << 20, &out, &n), 0);
        int st = pclose(f);
        if (st != 0)
                fail_msg("command failed (%d): %s", st, cmd);
        while (n > 0 && out[n - 1] == '\n')
                out[--n] = 0;
        return out;
}

static void hex_of(const uint8_t oid[GIT_OID_SIZE], char hex[GIT_OID_HEX_SIZE]) {
        sha256_to_hex(oid, hex);
}

static void test_blob_ids(void **state) {
        TestDir *d = *state;
        uint8_t oid[GIT_OID_SIZE];
        char hex[GIT_OID_HEX_SIZE];
        char big[70000];

        assert_int_equal(git_blob_id("", 0, oid), 0);
        hex_of(oid, hex);
        assert_string_equal(hex, EMPTY_BLOB);

        for (size_t i = 0; i < sizeof(big); i++)
                big[i] = (char) (i * 7 + (i >> 8));
        const struct {
                const char *name;
                const char *data;
                size_t len;
        } cases[] = {
                { "hello", "hello\n", 6 },
                { "nul", "a\0b\0", 4 },
                { "big", big, sizeof(big) },
        };
        _cleanup_free_ char *init = run("git init -q --object-format=sha256 '%s/repo' && echo ok", d->path);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                tfw_write_file(d->fd, cases[i].name, cases[i].data, cases[i].len);
                _cleanup_free_ char *want = run("git -C '%s/repo' hash-object '../%s'", d->path,
                                                cases[i].name);
                assert_int_equal(git_blob_id(cases[i].data, cases[i].len, oid), 0);
                hex_of(oid, hex);
                assert_string_equal(hex, want);
        }
}

static void test_header(void **state) {
        (void) state;
        char buf[GIT_OBJECT_HEADER_MAX];
        assert_int_equal(git_object_header("blob", 0, buf), 7);
        assert_memory_equal(buf, "blob 0", 7);
        assert_int_equal(git_object_header("tree", UINT64_MAX, buf), 26);
        assert_string_equal(buf, "tree 18446744073709551615");
}

static void test_builder_rules(void **state) {
        (void) state;
        _cleanup_(git_tree_builder_done) GitTreeBuilder b = GIT_TREE_BUILDER_INIT;
        uint8_t oid[GIT_OID_SIZE] = {}, out[GIT_OID_SIZE];
        char hex[GIT_OID_HEX_SIZE], longname[GIT_NAME_MAX + 2];

        /* Empty builder: the empty tree. */
        assert_int_equal(git_tree_builder_finish(&b, NULL, out), 0);
        hex_of(out, hex);
        assert_string_equal(hex, EMPTY_TREE);

        /* Invalid names and modes are refused and add nothing. */
        memset(longname, 'x', sizeof(longname));
        const struct {
                const char *name;
                size_t len;
        } bad[] = { { "", 0 }, { ".", 1 }, { "..", 2 }, { "a/b", 3 }, { "a\0b", 3 },
                    { longname, GIT_NAME_MAX + 1 } };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(git_tree_builder_add(&b, bad[i].name, bad[i].len, GIT_MODE_FILE, oid),
                                 -EINVAL);
        assert_int_equal(git_tree_builder_add(&b, longname, GIT_NAME_MAX, GIT_MODE_FILE, oid), 0);
        assert_int_equal(git_tree_builder_add(&b, "m", 1, 0160000, oid), -EINVAL);
        assert_int_equal(git_tree_builder_add(&b, "m", 1, 0100664, oid), -EINVAL);
        assert_int_equal(git_tree_builder_size(&b), 1);

        /* Same name twice, even as file and directory, is refused; the builder is emptied. */
        assert_int_equal(git_tree_builder_add(&b, "a", 1, GIT_MODE_FILE, oid), 0);
        assert_int_equal(git_tree_builder_add(&b, "a.c", 3, GIT_MODE_FILE, oid), 0);
        assert_int_equal(git_tree_builder_add(&b, "a", 1, GIT_MODE_TREE, oid), 0);
        assert_int_equal(git_tree_builder_finish(&b, NULL, out), -EBADMSG);
        assert_int_equal(git_tree_builder_size(&b), 0);
        assert_int_equal(git_tree_builder_finish(&b, NULL, out), 0);
        hex_of(out, hex);
        assert_string_equal(hex, EMPTY_TREE);
}

/* Build a repository with names that sort differently as files and as directories, an
 * executable, a symlink and nested trees; then recompute HEAD^{tree} from `git ls-tree -r`,
 * in forward and reversed order. */
static void test_tree_from_paths_matches_git(void **state) {
        TestDir *d = *state;

        _cleanup_free_ char *setup = run(
                "set -e; cd '%s'; git init -q --object-format=sha256 r; cd r;"
                "mkdir -p a/b a.d 'sp ace' deep/1/2/3/4/5; printf x > a/b/f; printf y > a.d/g;"
                "printf z > a-; printf w > a0; printf v > 'sp ace/q'; printf u > deep/1/2/3/4/5/leaf;"
                "printf '#!/bin/sh\\n' > run; chmod 755 run; ln -s a/b/f link; ln -s /etc/passwd abs;"
                "printf e > e; : > empty-file;"
                "git add -A; git -c user.name=t -c user.email=t@example.invalid commit -qm t; echo ok",
                d->path);
        _cleanup_free_ char *want = run("git -C '%s/r' rev-parse 'HEAD^{tree}'", d->path);
        _cleanup_free_ char *ls = run("git -C '%s/r' ls-tree -r -z HEAD | tr '\\0' '\\n'", d->path);

        /* Lines: "<mode> blob <hex>\t<path>". */
        GitPathEntry v[64];
        size_t n = 0;
        for (char *line = strtok(ls, "\n"); line; line = strtok(NULL, "\n")) {
                unsigned mode;
                char hex[GIT_OID_HEX_SIZE];
                char *tab = strchr(line, '\t');
                assert_non_null(tab);
                *tab = 0;
                assert_int_equal(sscanf(line, "%o blob %64s", &mode, hex), 2);
                assert_true(n < ELEMENTSOF(v));
                v[n].path = tab + 1;
                v[n].mode = mode;
                assert_int_equal(sha256_from_hex(hex, v[n].oid), 0);
                n++;
        }
        assert_int_equal(n, 11);

        uint8_t oid[GIT_OID_SIZE];
        char got[GIT_OID_HEX_SIZE];
        assert_int_equal(git_tree_id_from_paths(v, n, oid), 0);
        hex_of(oid, got);
        assert_string_equal(got, want);

        for (size_t i = 0; i < n / 2; i++) {
                GitPathEntry t = v[i];
                v[i] = v[n - 1 - i];
                v[n - 1 - i] = t;
        }
        assert_int_equal(git_tree_id_from_paths(v, n, oid), 0);
        hex_of(oid, got);
        assert_string_equal(got, want);

        assert_int_equal(git_tree_id_from_paths(NULL, 0, oid), 0);
        hex_of(oid, got);
        assert_string_equal(got, EMPTY_TREE);
}

static void test_tree_from_paths_refusals(void **state) {
        (void) state;
        uint8_t oid[GIT_OID_SIZE];
        char longcomp[GIT_NAME_MAX + 2], longpath[GIT_PATH_MAX + 2], deep[2 * (GIT_PATH_DEPTH_MAX + 1) + 1];

        memset(longcomp, 'c', GIT_NAME_MAX + 1);
        longcomp[GIT_NAME_MAX + 1] = 0;
        for (size_t i = 0; i < GIT_PATH_MAX + 1; i++)
                longpath[i] = (i % 100 == 99) ? '/' : 'p';
        longpath[GIT_PATH_MAX + 1] = 0;
        for (size_t i = 0; i < GIT_PATH_DEPTH_MAX + 1; i++) {
                deep[2 * i] = 'd';
                deep[2 * i + 1] = '/';
        }
        deep[2 * (GIT_PATH_DEPTH_MAX + 1) - 1] = 0; /* 257 components */

        const char *bad_paths[] = { "", "/a", "a/", "a//b", "./a", "a/./b", "a/../b", "..",
                                    longcomp, longpath, deep };
        for (size_t i = 0; i < ELEMENTSOF(bad_paths); i++) {
                GitPathEntry e = { .path = bad_paths[i], .mode = GIT_MODE_FILE };
                if (git_tree_id_from_paths(&e, 1, oid) != -EBADMSG)
                        fail_msg("path #%zu accepted", i);
        }
        const uint32_t bad_modes[] = { GIT_MODE_TREE, 0160000, 0100664, 0 };
        for (size_t i = 0; i < ELEMENTSOF(bad_modes); i++) {
                GitPathEntry e = { .path = "a", .mode = bad_modes[i] };
                assert_int_equal(git_tree_id_from_paths(&e, 1, oid), -EBADMSG);
        }
        GitPathEntry dup[] = { { .path = "x/y", .mode = GIT_MODE_FILE },
                               { .path = "x/y", .mode = GIT_MODE_EXECUTABLE } };
        assert_int_equal(git_tree_id_from_paths(dup, 2, oid), -EBADMSG);
        GitPathEntry conflict[] = { { .path = "a", .mode = GIT_MODE_FILE },
                                    { .path = "a.b", .mode = GIT_MODE_FILE },
                                    { .path = "a/b", .mode = GIT_MODE_FILE } };
        assert_int_equal(git_tree_id_from_paths(conflict, 3, oid), -EBADMSG);
        GitPathEntry deep_conflict[] = { { .path = "q/a", .mode = GIT_MODE_SYMLINK },
                                         { .path = "q/a/b", .mode = GIT_MODE_FILE } };
        assert_int_equal(git_tree_id_from_paths(deep_conflict, 2, oid), -EBADMSG);

        /* The limits themselves are accepted. */
        deep[2 * GIT_PATH_DEPTH_MAX - 1] = 0; /* 256 components */
        longcomp[GIT_NAME_MAX] = 0;
        GitPathEntry ok[] = { { .path = deep, .mode = GIT_MODE_FILE },
                              { .path = longcomp, .mode = GIT_MODE_FILE } };
        assert_int_equal(git_tree_id_from_paths(ok, 2, oid), 0);
}

/* The hasher must give every blob the id git_blob_id() gives it, whether it runs on its own
 * thread or inline, across ring wrap-arounds, multi-chunk blobs, empty blobs, dropped ids and
 * syncs in the middle. */
static void run_hasher(bool threaded) {
        _cleanup_(blob_hasher_freep) BlobHasher *h = NULL;
        _cleanup_(git_tree_builder_done) GitTreeBuilder tb = GIT_TREE_BUILDER_INIT;
        static uint8_t data[3 * BLOB_CHUNK_SIZE + 123];
        const size_t n = 200;
        uint8_t zero[GIT_OID_SIZE] = {};
        unsigned seed = 7;

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t) rand_r(&seed);
        assert_int_equal(blob_hasher_new(threaded, &h), 0);

        size_t lens[200];
        for (size_t i = 0; i < n; i++) {
                char name[16];
                snprintf(name, sizeof(name), "f%zu", i);
                lens[i] = i % 50 == 7 ? sizeof(data) : i % 9 == 0 ? 0 : (size_t) rand_r(&seed) % 70000;
                assert_int_equal(git_tree_builder_add(&tb, name, strlen(name), GIT_MODE_FILE, zero), 0);
                /* Entry n + i receives the id of the same bytes submitted as a file (below), or
                 * is dropped from the check when no file job is made for it. */
                snprintf(name, sizeof(name), "g%zu", i);
                assert_int_equal(git_tree_builder_add(&tb, name, strlen(name), GIT_MODE_FILE, zero), 0);

                /* Every 10th blob is first announced with a wrong length and dropped, the way
                 * the walk drops a file that changed size; the next blob must not suffer. */
                if (i % 10 == 3) {
                        uint8_t *b = blob_hasher_buffer(h);
                        memcpy(b, data, 10);
                        assert_int_equal(blob_hasher_submit(h, 10, true, 99, true, NULL, 0), 0);
                }
                size_t off = 0;
                bool first = true;
                do {
                        size_t k = MIN((size_t) BLOB_CHUNK_SIZE, lens[i] - off);
                        uint8_t *b = blob_hasher_buffer(h);
                        memcpy(b, data + off, k);
                        off += k;
                        bool last = off == lens[i];
                        assert_int_equal(blob_hasher_submit(h, k, first, lens[i], last, &tb, 2 * i), 0);
                        first = false;
                } while (off < lens[i]);
                /* Every 4th blob is also submitted as a whole file, as after copy_file_range. */
                if (i % 4 == 1) {
                        int fd = memfd_create("blob", MFD_CLOEXEC);
                        assert_true(fd >= 0);
                        assert_int_equal(write_all(fd, data, lens[i]), 0);
                        assert_int_equal(blob_hasher_submit_fd(h, fd, lens[i], &tb, 2 * i + 1), 0);
                }
                if (i == n / 2)
                        assert_int_equal(blob_hasher_sync(h), 0);
        }
        assert_int_equal(blob_hasher_sync(h), 0);
        for (size_t i = 0; i < n; i++) {
                uint8_t want[GIT_OID_SIZE];
                assert_int_equal(git_blob_id(data, lens[i], want), 0);
                assert_memory_equal(tb.entries[2 * i].oid, want, GIT_OID_SIZE);
                assert_memory_equal(tb.entries[2 * i + 1].oid, i % 4 == 1 ? want : zero, GIT_OID_SIZE);
        }
        assert_int_equal(blob_hasher_submit(h, BLOB_CHUNK_SIZE + 1, true, 0, true, NULL, 0), -EINVAL);

        /* A file shorter than announced is an error, reported by the next sync (inline: at
         * once), and the next blob is still right. */
        int fd = memfd_create("short", MFD_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write_all(fd, "abc", 3), 0);
        int r = blob_hasher_submit_fd(h, fd, 4, &tb, 0);
        if (r == 0)
                r = blob_hasher_sync(h);
        assert_int_equal(r, -EIO);
}

static void test_blob_hasher_threaded(void **state) {
        (void) state;
        run_hasher(true);
}

static void test_blob_hasher_inline(void **state) {
        (void) state;
        run_hasher(false);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_blob_ids, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test(test_header),
                cmocka_unit_test(test_builder_rules),
                cmocka_unit_test_setup_teardown(test_tree_from_paths_matches_git, tfw_tmpdir_setup,
                                                tfw_tmpdir_teardown),
                cmocka_unit_test(test_tree_from_paths_refusals),
                cmocka_unit_test(test_blob_hasher_threaded),
                cmocka_unit_test(test_blob_hasher_inline),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
