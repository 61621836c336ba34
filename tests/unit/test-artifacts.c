/* SPDX-License-Identifier: MIT */
/* The bounded artifact import (artifacts/import.h): the hostile tar corpus of threat 3, the
 * happy paths, the limits at and past their value, permission normalisation and the parser's
 * confinement. Every hostile stream goes through the real forked, confined import and through
 * the in-process pipeline the fuzz target uses; both must refuse it the same way, leave the
 * staging directory empty and write nothing beside it.
 * The forked import drops privileges, so those tests need root (they skip otherwise). */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "artifacts/import-internal.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

#define UNPRIV 65534
#define GROUP 4242
#define MiB (1u << 20)

/* ---- growable buffer and tar builders ------------------------------------------------------ */

typedef struct Buf {
        uint8_t *p;
        size_t len, cap;
} Buf;

static void buf_append(Buf *b, const void *p, size_t n) {
        if (b->len + n > b->cap) {
                size_t cap = MAX(b->cap * 2, b->len + n + 4096);
                b->p = realloc(b->p, cap);
                assert_non_null(b->p);
                b->cap = cap;
        }
        if (n)
                memcpy(b->p + b->len, p, n);
        b->len += n;
}

static void buf_free(Buf *b) {
        free(b->p);
        *b = (Buf) {};
}

static ssize_t buf_write_cb(struct archive *a _unused_, void *ud, const void *p, size_t n) {
        buf_append(ud, p, n);
        return (ssize_t) n;
}

/* A libarchive writer appending to b; format is ARCHIVE_FORMAT_TAR_*. */
static struct archive *tw_new(Buf *b, int format) {
        struct archive *a = archive_write_new();
        assert_non_null(a);
        assert_int_equal(archive_write_set_format(a, format), ARCHIVE_OK);
        assert_int_equal(archive_write_open2(a, b, NULL, buf_write_cb, NULL, NULL), ARCHIVE_OK);
        return a;
}

static void tw_add(struct archive *a, const char *name, unsigned type, unsigned perm,
                   const void *data, size_t len, const char *symlink, const char *hardlink) {
        struct archive_entry *ae = archive_entry_new();
        archive_entry_copy_pathname(ae, name);
        archive_entry_set_filetype(ae, type);
        archive_entry_set_perm(ae, perm);
        archive_entry_set_uid(ae, 1234);
        archive_entry_set_gid(ae, 1234);
        if (type == AE_IFREG && !hardlink)
                archive_entry_set_size(ae, (la_int64_t) len);
        if (symlink)
                archive_entry_copy_symlink(ae, symlink);
        if (hardlink)
                archive_entry_copy_hardlink(ae, hardlink);
        if (type == AE_IFCHR || type == AE_IFBLK)
                archive_entry_set_rdev(ae, makedev(1, 3));
        assert_true(archive_write_header(a, ae) >= ARCHIVE_WARN);
        if (len)
                assert_int_equal(archive_write_data(a, data, len), (la_ssize_t) len);
        archive_entry_free(ae);
}

static void tw_file(struct archive *a, const char *name, const char *data) {
        tw_add(a, name, AE_IFREG, 0644, data, strlen(data), NULL, NULL);
}
static void tw_dir(struct archive *a, const char *name) {
        tw_add(a, name, AE_IFDIR, 0755, NULL, 0, NULL, NULL);
}

static void tw_close(struct archive *a) {
        assert_int_equal(archive_write_close(a), ARCHIVE_OK);
        archive_write_free(a);
}

/* Hand-made ustar headers, for what libarchive's writer refuses to produce (size lies, GNU
 * sparse maps, raw bytes in names). */
static void octal(uint8_t *f, size_t width, uint64_t v) {
        char tmp[32];
        snprintf(tmp, sizeof(tmp), "%0*llo", (int) width - 1, (unsigned long long) v);
        memcpy(f, tmp, width - 1);
}

static void checksum(uint8_t h[512]) {
        unsigned sum = 0;
        memset(h + 148, ' ', 8);
        for (int i = 0; i < 512; i++)
                sum += h[i];
        char tmp[8];
        snprintf(tmp, sizeof(tmp), "%06o", sum);
        memcpy(h + 148, tmp, 7);
        h[155] = ' ';
}

static void raw_header_into(uint8_t h[512], const char *name, size_t name_len, char type,
                            uint64_t size) {
        memset(h, 0, 512);
        memcpy(h, name, MIN(name_len, (size_t) 100));
        octal(h + 100, 8, 0644);
        octal(h + 108, 8, 0);
        octal(h + 116, 8, 0);
        if (size < 077777777777ULL)
                octal(h + 124, 12, size);
        else {
                /* base-256 for sizes that do not fit 11 octal digits */
                h[124] = 0x80;
                for (int i = 0; i < 8; i++)
                        h[135 - i] = (uint8_t) (size >> (8 * i));
        }
        octal(h + 136, 12, 0);
        h[156] = (uint8_t) type;
        memcpy(h + 257, "ustar\0" "00", 8);
}

static void raw_header(Buf *b, const char *name, size_t name_len, char type, uint64_t size) {
        uint8_t h[512];
        raw_header_into(h, name, name_len, type, size);
        checksum(h);
        buf_append(b, h, 512);
}

static void raw_data(Buf *b, const void *p, size_t n) {
        static const uint8_t zero[512];
        buf_append(b, p, n);
        if (n % 512)
                buf_append(b, zero, 512 - n % 512);
}

static void raw_end(Buf *b) {
        static const uint8_t zero[1024];
        buf_append(b, zero, sizeof(zero));
}

/* An old-GNU sparse entry ('S'): up to 4 (offset, length) data regions, logical size realsize,
 * the regions' bytes as data. */
static void raw_sparse(Buf *b, const char *name, uint64_t realsize, const uint64_t (*map)[2],
                       size_t n_map, char fill) {
        uint8_t h[512];
        uint64_t stored = 0;

        assert_true(n_map <= 4);
        for (size_t i = 0; i < n_map; i++)
                stored += map[i][1];
        raw_header_into(h, name, strlen(name), 'S', stored);
        memcpy(h + 257, "ustar  \0", 8); /* GNU magic */
        for (size_t i = 0; i < n_map; i++) {
                octal(h + 386 + 24 * i, 12, map[i][0]);
                octal(h + 386 + 24 * i + 12, 12, map[i][1]);
        }
        if (realsize < 077777777777ULL)
                octal(h + 483, 12, realsize);
        else {
                h[483] = 0x80;
                for (int i = 0; i < 8; i++)
                        h[494 - i] = (uint8_t) (realsize >> (8 * i));
        }
        checksum(h);
        buf_append(b, h, 512);
        uint8_t *data = malloc(stored ? stored : 1);
        memset(data, fill, stored);
        raw_data(b, data, stored);
        free(data);
}

/* ---- running imports ---------------------------------------------------------------------- */

typedef struct Env {
        TestDir *d;
        int staging;
        ArtifactLimits limits;
} Env;

static int env_setup(void **state) {
        if (tfw_tmpdir_setup(state) < 0)
                return -1;
        TestDir *d = *state;
        Env *env = calloc(1, sizeof(*env));
        env->d = d;
        if (mkdirat(d->fd, "staging", 0700) < 0 || mkdirat(d->fd, "outside", 0700) < 0)
                return -1;
        env->staging = open_dir_at(d->fd, "staging");
        if (env->staging < 0)
                return -1;
        env->limits = (ArtifactLimits) {
                .max_bytes = MiB,
                .max_entries = 1000,
                .unpriv_uid = UNPRIV,
                .unpriv_gid = UNPRIV,
                .group = GROUP,
        };
        *state = env;
        return 0;
}

static int env_teardown(void **state) {
        Env *env = *state;
        safe_close(env->staging);
        *state = env->d;
        free(env);
        return tfw_tmpdir_teardown(state);
}

static bool is_root(void) {
        return geteuid() == 0;
}

static unsigned count_entries(int dir_fd) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        DIR *dir = fdopendir(fd);
        assert_non_null(dir);
        unsigned n = 0;
        struct dirent *de;
        while ((de = readdir(dir)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(dir);
        return n;
}

/* Nothing may appear beside staging: the test directory holds exactly staging/ and an empty
 * outside/ (the target of every traversal attempt). */
static void assert_contained(Env *env) {
        assert_int_equal(count_entries(env->d->fd), 2);
        _cleanup_close_ int out = open_dir_at(env->d->fd, "outside");
        assert_true(out >= 0);
        assert_int_equal(count_entries(out), 0);
}

static int memfd_with(const Buf *b) {
        int fd = memfd_create("tar", MFD_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(write_all(fd, b->p, b->len), 0);
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        return fd;
}

typedef struct Outcome {
        int r;
        TfwError e;
        ArtifactSummary s;
} Outcome;

static void import_forked(Env *env, const Buf *b, Outcome *o) {
        _cleanup_close_ int fd = memfd_with(b);
        *o = (Outcome) {};
        o->r = artifacts_import(fd, env->staging, &env->limits, &o->s, &o->e);
}

static void import_inproc(Env *env, const Buf *b, Outcome *o) {
        ArtifactLimits l = env->limits;
        if (!is_root())
                l.group = (gid_t) -1; /* chown to another group needs root (cache_profile sets
                                       * the owner to ourselves) */
        *o = (Outcome) {};
        o->r = artifacts_import_buffer(b->p ? (const void *) b->p : "", b->len, env->staging, &l,
                                       &o->s, &o->e);
}

static void assert_rejected(const Outcome *o, const char *code, const char *needle) {
        if (o->r >= 0)
                fail_msg("import succeeded; expected %s containing \"%s\"", code, needle);
        if (!o->e.code || !streq(o->e.code, code) || !strstr(o->e.message, needle))
                fail_msg("expected %s containing \"%s\", got %s: %s", code, needle,
                         o->e.code ? o->e.code : "(none)", o->e.message);
}

/* The stream must be refused by both pipelines with code and a message containing needle;
 * staging ends empty and nothing exists beside it. */
static void expect_reject(Env *env, const Buf *b, const char *code, const char *needle) {
        Outcome o;

        import_inproc(env, b, &o);
        assert_rejected(&o, code, needle);
        assert_int_equal(count_entries(env->staging), 0);
        assert_contained(env);

        if (!is_root()) {
                print_message("(forked import not run: needs root)\n");
                return;
        }
        import_forked(env, b, &o);
        assert_rejected(&o, code, needle);
        assert_int_equal(count_entries(env->staging), 0);
        assert_contained(env);
}

/* Both pipelines accept; the forked one's result stays in staging for inspection. */
static void expect_accept(Env *env, const Buf *b, ArtifactSummary *ret) {
        Outcome o, f;

        import_inproc(env, b, &o);
        if (o.r < 0)
                fail_msg("in-process import failed: %s: %s", o.e.code, o.e.message);
        assert_contained(env);
        *ret = o.s;
        if (!is_root())
                return;
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        import_forked(env, b, &f);
        if (f.r < 0)
                fail_msg("forked import failed: %s: %s", f.e.code, f.e.message);
        assert_int_equal(f.s.files, o.s.files);
        assert_int_equal(f.s.dirs, o.s.dirs);
        assert_int_equal(f.s.bytes, o.s.bytes);
        assert_contained(env);
}

static void assert_file(int dir_fd, const char *path, const void *data, size_t len) {
        _cleanup_close_ int fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                fail_msg("'%s': %s", path, strerror(errno));
        _cleanup_free_ char *got = NULL;
        size_t n = 0;
        assert_int_equal(read_full_fd_bounded(fd, 64 * MiB, &got, &n), 0);
        assert_int_equal(n, len);
        assert_memory_equal(got, data, len);
}

/* ---- the hostile corpus (threat 3) -------------------------------------------------------- */

/* CVE-2007-4559: a ".." name walks out of the extraction directory. */
static void test_dotdot(void **state) {
        Env *env = *state;
        Buf b = {};
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, "../outside/pwned", "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'..' component");
        buf_free(&b);

        a = tw_new(&b, ARCHIVE_FORMAT_TAR_USTAR);
        tw_file(a, "ok/../../outside/pwned", "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'..' component");
        buf_free(&b);
}

/* An absolute name writes wherever it says. */
static void test_absolute(void **state) {
        Env *env = *state;
        char name[4096];
        Buf b = {};
        snprintf(name, sizeof(name), "%s/outside/pwned", env->d->path);
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, name, "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "absolute name");
        buf_free(&b);
}

/* zip-slip through a link: a symlink to outside, then a file written through it. */
static void test_symlink_then_file(void **state) {
        Env *env = *state;
        char target[4096];
        Buf b = {};
        snprintf(target, sizeof(target), "%s/outside", env->d->path);
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_add(a, "link", AE_IFLNK, 0777, NULL, 0, target, NULL);
        tw_file(a, "link/pwned", "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'link': symbolic link");
        buf_free(&b);

        a = tw_new(&b, ARCHIVE_FORMAT_TAR_USTAR);
        tw_add(a, "rel", AE_IFLNK, 0777, NULL, 0, "../outside", NULL);
        tw_file(a, "rel/pwned", "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'rel': symbolic link");
        buf_free(&b);
}

/* A hard link to a host file would publish (or let a later entry overwrite) it. */
static void test_hardlink(void **state) {
        Env *env = *state;
        Buf b = {};
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_add(a, "shadow", AE_IFREG, 0644, NULL, 0, NULL, "/etc/shadow");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'shadow': hard link");
        buf_free(&b);

        /* A hard link to an earlier artifact is refused too. */
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_USTAR);
        tw_file(a, "first", "x");
        tw_add(a, "second", AE_IFREG, 0644, NULL, 0, NULL, "first");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'second': hard link");
        buf_free(&b);
}

static void test_devices_and_fifo(void **state) {
        Env *env = *state;
        static const struct {
                unsigned type;
                const char *why;
        } cases[] = {
                { AE_IFCHR, "'node': character device" },
                { AE_IFBLK, "'node': block device" },
                { AE_IFIFO, "'node': FIFO" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Buf b = {};
                struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
                tw_add(a, "node", cases[i].type, 0666, NULL, 0, NULL, NULL);
                tw_close(a);
                expect_reject(env, &b, ARTIFACT_CODE_REJECTED, cases[i].why);
                buf_free(&b);
        }
}

/* libarchive CVE-2021-31566 class: a directory, then the same name as a symlink, then a file
 * through it. */
static void test_dir_then_symlink(void **state) {
        Env *env = *state;
        Buf b = {};
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_dir(a, "d");
        tw_add(a, "d", AE_IFLNK, 0777, NULL, 0, "../outside", NULL);
        tw_file(a, "d/pwned", "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'d': symbolic link");
        buf_free(&b);
}

static void test_type_changes_and_duplicates(void **state) {
        Env *env = *state;
        Buf b = {};

        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, "x", "file");
        tw_dir(a, "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'x': changes type (a regular file");
        buf_free(&b);

        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_dir(a, "x");
        tw_file(a, "x", "file");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'x': changes type (a directory");
        buf_free(&b);

        /* A file used as a directory by a later name. */
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, "x", "file");
        tw_file(a, "x/y", "nested");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'x': changes type (a regular file");
        buf_free(&b);

        /* A second regular file of the same name, also spelled differently. */
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, "dup", "one");
        tw_file(a, "./dup", "two");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'./dup': duplicate entry");
        buf_free(&b);

        /* The staging directory itself as a file. */
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, ".", "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'.': a regular file named as a dir");
        buf_free(&b);
}

/* 10^6 empty entries: the importer stops at max_entries and the rest of the stream is never
 * read (the generator gets EPIPE long before the end). */
static void test_million_entries(void **state) {
        Env *env = *state;
        int p[2];

        if (!is_root())
                tfw_skip("the forked import needs root");
        env->limits.max_entries = 2000;
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t gen = fork();
        assert_true(gen >= 0);
        if (gen == 0) {
                signal(SIGPIPE, SIG_IGN);
                close(p[0]);
                static uint8_t block[64 * 512];
                for (unsigned i = 0; i < 1000000;) {
                        for (unsigned k = 0; k < 64; k++, i++) {
                                char name[32];
                                int n = snprintf(name, sizeof(name), "f%07u", i);
                                raw_header_into(block + 512 * k, name, (size_t) n, '0', 0);
                                checksum(block + 512 * k);
                        }
                        if (write_all(p[1], block, sizeof(block)) < 0)
                                _exit(0); /* EPIPE: the importer stopped reading */
                }
                _exit(1);
        }
        close(p[1]);
        ArtifactImport *imp = NULL;
        TfwError e = {};
        assert_int_equal(artifacts_import_start(p[0], env->staging, &env->limits, &imp, &e), 0);
        close(p[0]);
        ArtifactSummary s;
        int r = artifacts_import_finish(imp, &s, &e);
        assert_true(r < 0);
        assert_string_equal(e.code, ARTIFACT_CODE_TOO_LARGE);
        assert_non_null(strstr(e.message, "more than 2000 entries (at 'f0002000')"));
        int status;
        assert_int_equal(waitpid(gen, &status, 0), gen);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        assert_int_equal(count_entries(env->staging), 0);
        assert_contained(env);
}

/* Declared sizes are claims: too large (the stream ends first), too small (the rest is taken
 * for a header), absurd (base-256). */
static void test_declared_size_lies(void **state) {
        Env *env = *state;
        static const char payload[100] = "some bytes";
        Buf b = {};

        raw_header(&b, "big", 3, '0', (uint64_t) 1 << 30);
        raw_data(&b, payload, sizeof(payload));
        raw_end(&b);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "malformed tar stream");
        buf_free(&b);

        uint8_t junk[1000];
        memset(junk, 'J', sizeof(junk));
        raw_header(&b, "small", 5, '0', 10);
        raw_data(&b, junk, sizeof(junk));
        raw_end(&b);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "malformed tar stream");
        buf_free(&b);

        raw_header(&b, "huge", 4, '0', (uint64_t) 1 << 50);
        raw_data(&b, payload, sizeof(payload));
        raw_end(&b);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "malformed tar stream");
        buf_free(&b);
}

/* A sparse entry claims a huge logical size with almost no data: holes count as bytes. */
static void test_sparse_bomb(void **state) {
        Env *env = *state;
        Buf b = {};
        const uint64_t map[][2] = { { (1ULL << 40) - 512, 512 } };

        raw_sparse(&b, "bomb", 1ULL << 40, map, 1, 'B');
        raw_end(&b);
        expect_reject(env, &b, ARTIFACT_CODE_TOO_LARGE, "more than 1048576 bytes (at 'bomb')");
        buf_free(&b);

        /* Only a trailing hole, no data at all. */
        raw_sparse(&b, "hole", 1ULL << 40, NULL, 0, 0);
        raw_end(&b);
        expect_reject(env, &b, ARTIFACT_CODE_TOO_LARGE, "(at 'hole')");
        buf_free(&b);
}

/* A modest sparse file is fine: holes read back as zeros, the logical size counts. */
static void test_sparse_ok(void **state) {
        Env *env = *state;
        Buf b = {};
        const uint64_t map[][2] = { { 0, 512 }, { 8192, 1024 } };
        ArtifactSummary s;

        raw_sparse(&b, "sparse", 16384, map, 2, 'S');
        raw_end(&b);
        expect_accept(env, &b, &s);
        assert_int_equal(s.files, 1);
        assert_int_equal(s.bytes, 16384);
        uint8_t want[16384] = {};
        memset(want, 'S', 512);
        memset(want + 8192, 'S', 1024);
        assert_file(env->staging, "sparse", want, sizeof(want));
        buf_free(&b);
}

static void test_long_names(void **state) {
        Env *env = *state;
        char name[6000];
        Buf b = {};

        /* One component longer than NAME_MAX. */
        memset(name, 'c', 300);
        name[300] = 0;
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, name, "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "component longer than 255 bytes");
        buf_free(&b);

        /* A name longer than PATH_MAX, through pax and through GNU long-name records. */
        for (size_t i = 0; i < 5000; i += 10)
                memcpy(name + i, "abcdefghi/", 10);
        memcpy(name + 4999, "f", 2);
        static const int formats[] = { ARCHIVE_FORMAT_TAR_PAX_RESTRICTED,
                                       ARCHIVE_FORMAT_TAR_GNUTAR };
        for (size_t i = 0; i < ELEMENTSOF(formats); i++) {
                a = tw_new(&b, formats[i]);
                tw_file(a, name, "x");
                tw_close(a);
                expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "name longer than 4095 bytes");
                buf_free(&b);
        }
}

static void test_deep_nesting(void **state) {
        Env *env = *state;
        char name[1024] = "";
        Buf b = {};
        ArtifactSummary s;

        /* ARTIFACT_DEPTH_MAX components pass (127 implicit directories and the file)... */
        for (unsigned i = 0; i < ARTIFACT_DEPTH_MAX - 1; i++)
                strcat(name, "d/");
        strcat(name, "f");
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, name, "deep");
        tw_close(a);
        expect_accept(env, &b, &s);
        assert_int_equal(s.dirs, ARTIFACT_DEPTH_MAX - 1);
        assert_file(env->staging, name, "deep", 4);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        buf_free(&b);

        /* ...one more does not. */
        memmove(name + 2, name, strlen(name) + 1);
        memcpy(name, "d/", 2);
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, name, "deep");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "more than 128 levels deep");
        buf_free(&b);
}

static void test_bad_names(void **state) {
        Env *env = *state;
        static const struct {
                const char *name;
                size_t len;
                const char *why;
        } cases[] = {
                { "a//b", 4, "empty component" },
                { "a/./b", 5, "'.' component" },
                { "././a", 5, "'.' component" },
                { "a\nb", 3, "control character" },
                { "a\x7f", 2, "control character" },
                { "n\xc2\x9b" "2J.txt", 9, "control character" },         /* C1 CSI as UTF-8 (issue 46) */
                { "evil\xe2\x80\xaetxt.exe", 14, "control character" }, /* a bidi override */
                { "x\xe2\x81\xa6y", 5, "control character" },           /* a bidi isolate */
                { "\xff\xfe", 2, "not valid UTF-8" },
                { "\xc0\xaf", 2, "not valid UTF-8" }, /* overlong '/' */
                { "/etc/cron.d/x", 13, "absolute name" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Buf b = {};
                raw_header(&b, cases[i].name, cases[i].len, '0', 1);
                raw_data(&b, "x", 1);
                raw_end(&b);
                expect_reject(env, &b, ARTIFACT_CODE_REJECTED, cases[i].why);
                buf_free(&b);
        }
}

/* Only plain tar: a compressed stream is not decompressed. */
static void test_compressed_refused(void **state) {
        Env *env = *state;
        Buf b = {};
        struct archive *a = archive_write_new();
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
        assert_int_equal(archive_write_open2(a, &b, NULL, buf_write_cb, NULL, NULL), ARCHIVE_OK);
        tw_file(a, "a", "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "malformed tar stream");
        buf_free(&b);
}

static void test_trailing_garbage(void **state) {
        Env *env = *state;
        Buf b = {};
        ArtifactSummary s;

        if (!is_root())
                tfw_skip("the trailer is checked by the forked parser, which needs root");
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, "a", "x");
        tw_close(a);
        /* A few records of padding after the end marker are normal. */
        uint8_t *pad = calloc(1, 3 * ARTIFACT_TRAILER_MAX);
        buf_append(&b, pad, 64 * 1024);
        Outcome o;
        import_forked(env, &b, &o);
        assert_int_equal(o.r, 0);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        /* An unbounded tail is not. */
        buf_append(&b, pad, 3 * ARTIFACT_TRAILER_MAX);
        import_forked(env, &b, &o);
        assert_rejected(&o, ARTIFACT_CODE_REJECTED, "after the end of the archive");
        assert_int_equal(count_entries(env->staging), 0);
        free(pad);
        buf_free(&b);
        (void) s;
}

/* Bytes libarchive consumes without reporting them (here pax global headers, each within
 * libarchive's own size limit, which it reads and drops) still count: the parser stops
 * reading past what the limits can justify. */
static void pax_global(Buf *b, size_t n) {
        char *rec = malloc(n);
        memset(rec, 'c', n);
        int k = snprintf(rec, 32, "%zu comment=", n);
        rec[k] = 'c';
        rec[n - 1] = '\n';
        raw_header(b, "global", 6, 'g', n);
        raw_data(b, rec, n);
        free(rec);
}

static void test_stream_cap(void **state) {
        Env *env = *state;
        Buf b = {};

        if (!is_root())
                tfw_skip("the stream is bounded by the forked parser, which needs root");
        env->limits.max_entries = 10;
        for (int i = 0; i < 3; i++)
                pax_global(&b, 900 * 1024);
        raw_header(&b, "a", 1, '0', 1);
        raw_data(&b, "x", 1);
        raw_end(&b);
        Outcome o;
        import_forked(env, &b, &o);
        assert_rejected(&o, ARTIFACT_CODE_TOO_LARGE, "tar stream longer than");
        assert_int_equal(count_entries(env->staging), 0);
        assert_contained(env);

        /* With room for it in the limits, the same stream imports. */
        env->limits.max_bytes = 4 * MiB;
        import_forked(env, &b, &o);
        if (o.r < 0)
                fail_msg("%s: %s", o.e.code, o.e.message);
        assert_int_equal(o.s.files, 1);
        buf_free(&b);
}

/* A stream that stops in the middle (the capsule died) leaves nothing. */
static void test_truncated_stream(void **state) {
        Env *env = *state;
        Buf b = {};
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_file(a, "complete", "first file");
        char big[4096];
        memset(big, 'z', sizeof(big));
        tw_add(a, "cut", AE_IFREG, 0644, big, sizeof(big), NULL, NULL);
        tw_close(a);
        b.len = 3 * 512 + 1000; /* the first entry whole, the second's header, part of its data */
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "malformed tar stream");
        buf_free(&b);
}

/* ---- fixtures: small hostile tars made by tests/data/artifacts/make-fixtures.py ------------ */

static void test_fixtures(void **state) {
        Env *env = *state;
        static const struct {
                const char *file;
                const char *code;
                const char *why;
        } cases[] = {
                { "dotdot.tar", ARTIFACT_CODE_REJECTED, "'..' component" },
                { "absolute.tar", ARTIFACT_CODE_REJECTED, "absolute name" },
                { "symlink-then-file.tar", ARTIFACT_CODE_REJECTED, "symbolic link" },
                { "hardlink.tar", ARTIFACT_CODE_REJECTED, "hard link" },
                { "chardev.tar", ARTIFACT_CODE_REJECTED, "character device" },
                { "fifo.tar", ARTIFACT_CODE_REJECTED, "FIFO" },
                { "dir-then-symlink.tar", ARTIFACT_CODE_REJECTED, "symbolic link" },
                { "file-then-dir.tar", ARTIFACT_CODE_REJECTED, "changes type" },
                { "gnu-longname-dotdot.tar", ARTIFACT_CODE_REJECTED, "'..' component" },
                { "pax-path-override.tar", ARTIFACT_CODE_REJECTED, "'..' component" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char rel[128];
                Buf b = {};
                snprintf(rel, sizeof(rel), "artifacts/%s", cases[i].file);
                b.p = (uint8_t *) tfw_read_fixture(rel, &b.len);
                print_message("fixture %s\n", cases[i].file);
                expect_reject(env, &b, cases[i].code, cases[i].why);
                buf_free(&b);
                /* The fixtures aim their absolute and linked writes here. */
                assert_true(access("/tmp/tfw-fixture-pwned", F_OK) < 0 && errno == ENOENT);
        }

        Buf b = {};
        ArtifactSummary s;
        b.p = (uint8_t *) tfw_read_fixture("artifacts/ok-nested.tar", &b.len);
        expect_accept(env, &b, &s);
        assert_int_equal(s.files, 3);
        assert_file(env->staging, "docs/report.txt", "report\n", 7);
        buf_free(&b);
}

/* ---- happy paths and limits --------------------------------------------------------------- */

static void test_nested_and_empty(void **state) {
        Env *env = *state;
        Buf b = {};
        ArtifactSummary s;

        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_dir(a, "./");
        tw_dir(a, "./out/");
        tw_file(a, "./out/result.txt", "ok\n");
        tw_file(a, "./out/empty", "");
        tw_file(a, "implicit/parents/file", "made without directory entries");
        tw_dir(a, "implicit"); /* a directory entry after its contents: fine */
        tw_file(a, "\xc3\xa9t\xc3\xa9.txt", "utf-8 name");
        tw_close(a);
        expect_accept(env, &b, &s);
        assert_int_equal(s.files, 4);
        assert_int_equal(s.dirs, 3);
        assert_int_equal(s.bytes, 3 + 0 + 30 + 10);
        assert_file(env->staging, "out/result.txt", "ok\n", 3);
        assert_file(env->staging, "out/empty", "", 0);
        assert_file(env->staging, "implicit/parents/file", "made without directory entries", 30);
        assert_file(env->staging, "\xc3\xa9t\xc3\xa9.txt", "utf-8 name", 10);
        buf_free(&b);
}

static void test_empty_stream(void **state) {
        Env *env = *state;
        ArtifactSummary s;
        Buf b = {};

        /* Zero bytes (nothing was written) and an archive with no entry are both "none". */
        expect_accept(env, &b, &s);
        assert_int_equal(s.files + s.dirs + s.bytes, 0);
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_close(a);
        expect_accept(env, &b, &s);
        assert_int_equal(s.files + s.dirs + s.bytes, 0);
        buf_free(&b);
}

static void test_byte_limit(void **state) {
        Env *env = *state;
        ArtifactSummary s;
        Buf b = {};
        _cleanup_free_ char *data = malloc(MiB);
        memset(data, 'b', MiB);

        /* Exactly max_bytes over two files passes. */
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_add(a, "one", AE_IFREG, 0644, data, MiB - 100, NULL, NULL);
        tw_add(a, "two", AE_IFREG, 0644, data, 100, NULL, NULL);
        tw_close(a);
        expect_accept(env, &b, &s);
        assert_int_equal(s.bytes, MiB);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        buf_free(&b);

        /* One byte more does not. */
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_add(a, "one", AE_IFREG, 0644, data, MiB - 100, NULL, NULL);
        tw_add(a, "two", AE_IFREG, 0644, data, 101, NULL, NULL);
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_TOO_LARGE, "more than 1048576 bytes (at 'two')");
        buf_free(&b);
}

static void test_entry_limit(void **state) {
        Env *env = *state;
        ArtifactSummary s;
        Buf b = {};
        char name[32];

        env->limits.max_entries = 50;
        /* Exactly max_entries entries (a directory and 49 files) pass. */
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_USTAR);
        tw_dir(a, "d");
        for (int i = 0; i < 49; i++) {
                snprintf(name, sizeof(name), "d/f%02d", i);
                tw_file(a, name, "");
        }
        tw_close(a);
        expect_accept(env, &b, &s);
        assert_int_equal(s.files, 49);
        assert_int_equal(s.dirs, 1);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        buf_free(&b);

        /* One more does not. */
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_USTAR);
        tw_dir(a, "d");
        for (int i = 0; i < 50; i++) {
                snprintf(name, sizeof(name), "d/f%02d", i);
                tw_file(a, name, "");
        }
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_TOO_LARGE, "more than 50 entries (at 'd/f49')");
        buf_free(&b);

        /* Directories created implicitly count too: 49 levels and a file fill 50... */
        char deep[256] = "";
        for (int i = 0; i < 49; i++)
                strcat(deep, "i/");
        strcat(deep, "f");
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_USTAR);
        tw_file(a, deep, "");
        tw_close(a);
        expect_accept(env, &b, &s);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        buf_free(&b);
        /* ...and 50 levels and a file do not. */
        memmove(deep + 2, deep, strlen(deep) + 1);
        memcpy(deep, "i/", 2);
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_USTAR);
        tw_file(a, deep, "");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_TOO_LARGE, "more than 50 entries");
        buf_free(&b);
}

static void check_inode(int dir_fd, const char *path, mode_t want_mode, gid_t gid) {
        struct stat st;
        assert_int_equal(fstatat(dir_fd, path, &st, AT_SYMLINK_NOFOLLOW), 0);
        if ((st.st_mode & 07777) != want_mode || st.st_uid != 0 || st.st_gid != gid)
                fail_msg("'%s': mode %04o uid %u gid %u, want %04o 0 %u", path,
                         st.st_mode & 07777, st.st_uid, st.st_gid, want_mode, gid);
}

static void check_published(int staging) {
        check_inode(staging, "setuid-exec", 0640, GROUP);
        check_inode(staging, "open", 0640, GROUP);
        check_inode(staging, "wide", 02750, GROUP);
        check_inode(staging, "wide/inner", 02750, GROUP);
        check_inode(staging, "wide/inner/file", 0640, GROUP);
        check_inode(staging, "implicit", 02750, GROUP);
        check_inode(staging, "implicit/file", 0640, GROUP);
}

/* Whatever the stream says about modes and owners, published inodes are root:group, files
 * 0640 and directories 02750: below a plain root-owned staging directory (explicit chown and
 * chmod) and below a setgid one of the right group (inherited, as under RestrictSUIDSGID=). */
static void test_modes_and_owner(void **state) {
        Env *env = *state;
        Buf b = {};

        if (!is_root())
                tfw_skip("publishing as root:group needs root");
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_RESTRICTED);
        tw_add(a, "setuid-exec", AE_IFREG, 06777, "#!/bin/sh\n", 10, NULL, NULL);
        tw_add(a, "open", AE_IFREG, 0666, "x", 1, NULL, NULL);
        tw_add(a, "wide", AE_IFDIR, 01777, NULL, 0, NULL, NULL);
        tw_add(a, "wide/inner", AE_IFDIR, 0700, NULL, 0, NULL, NULL);
        tw_add(a, "wide/inner/file", AE_IFREG, 0600, "y", 1, NULL, NULL);
        tw_add(a, "implicit/file", AE_IFREG, 0755, "z", 1, NULL, NULL);
        tw_close(a);

        Outcome o;
        import_forked(env, &b, &o);
        if (o.r < 0)
                fail_msg("%s: %s", o.e.code, o.e.message);
        check_published(env->staging);
        assert_int_equal(artifact_dir_empty(env->staging), 0);

        assert_int_equal(fchown(env->staging, 0, GROUP), 0);
        assert_int_equal(fchmod(env->staging, 02750), 0);
        import_forked(env, &b, &o);
        if (o.r < 0)
                fail_msg("%s: %s", o.e.code, o.e.message);
        check_published(env->staging);
        buf_free(&b);
}

static void test_refuses_bad_setup(void **state) {
        Env *env = *state;
        TfwError e = {};
        ArtifactSummary s;
        Buf b = {};
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_USTAR);
        tw_file(a, "a", "x");
        tw_close(a);
        _cleanup_close_ int fd = memfd_with(&b);

        /* Never parse as root. */
        ArtifactLimits l = env->limits;
        l.unpriv_uid = 0;
        assert_int_equal(artifacts_import(fd, env->staging, &l, &s, &e), -EINVAL);
        l = env->limits;
        l.unpriv_gid = 0;
        assert_int_equal(artifacts_import(fd, env->staging, &l, &s, &e), -EINVAL);

        /* A staging directory with something in it is not ours to empty. */
        tfw_write_file(env->staging, "precious", "keep", (size_t) -1);
        assert_int_equal(artifacts_import(fd, env->staging, &env->limits, &s, &e), -ENOTEMPTY);
        assert_string_equal(e.code, ARTIFACT_CODE_FAILED);
        assert_file(env->staging, "precious", "keep", 4);
        buf_free(&b);
}

/* ---- the parser's confinement -------------------------------------------------------------- */

static pid_t find_child(pid_t parent) {
        DIR *proc = opendir("/proc");
        assert_non_null(proc);
        struct dirent *de;
        pid_t found = 0;
        while ((de = readdir(proc))) {
                char path[64], buf[512];
                pid_t pid = atoi(de->d_name);
                if (pid <= 0)
                        continue;
                snprintf(path, sizeof(path), "/proc/%d/stat", pid);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t n = read(fd, buf, sizeof(buf) - 1);
                close(fd);
                if (n <= 0)
                        continue;
                buf[n] = 0;
                char *rp = strrchr(buf, ')');
                int ppid;
                char st;
                if (rp && sscanf(rp + 2, "%c %d", &st, &ppid) == 2 && ppid == parent)
                        found = pid;
        }
        closedir(proc);
        return found;
}

static char *proc_status_field(pid_t pid, const char *field) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/status", pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        _cleanup_free_ char *text = NULL;
        assert_int_equal(read_full_fd_bounded(fd, 1 << 16, &text, NULL), 0);
        size_t fl = strlen(field);
        for (char *l = text; l && *l;) {
                char *nl = strchr(l, '\n');
                if (nl)
                        *nl = 0;
                if (strncmp(l, field, fl) == 0 && l[fl] == ':') {
                        char *v = l + fl + 1;
                        while (*v == '\t' || *v == ' ')
                                v++;
                        return strdup(v);
                }
                l = nl ? nl + 1 : NULL;
        }
        fail_msg("no %s in %s", field, path);
        return NULL;
}

static void assert_status(pid_t pid, const char *field, const char *want) {
        _cleanup_free_ char *v = proc_status_field(pid, field);
        if (!streq(v, want))
                fail_msg("parser %s: '%s', want '%s'", field, v, want);
}

/* The parser runs as the unprivileged uid with no groups and no capabilities, no_new_privs,
 * in seccomp filter mode, holding exactly two fds: the stream and the frames pipe. Observed
 * from outside, while it waits for more of the stream. */
static void test_parser_is_confined(void **state) {
        Env *env = *state;
        int p[2];

        if (!is_root())
                tfw_skip("dropping to an unprivileged uid needs root");
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        struct stat pst;
        assert_int_equal(fstat(p[0], &pst), 0);
        ArtifactImport *imp = NULL;
        TfwError e = {};
        assert_int_equal(artifacts_import_start(p[0], env->staging, &env->limits, &imp, &e), 0);
        close(p[0]);

        /* Half a header: the parser reads it only once confined, then waits for the rest. */
        uint8_t h[512];
        raw_header_into(h, "a", 1, '0', 1);
        checksum(h);
        assert_int_equal(write_all(p[1], h, 256), 0);
        int queued = 1;
        for (int i = 0; i < 10000 && queued > 0; i++) {
                assert_int_equal(ioctl(p[1], FIONREAD, &queued), 0);
                if (queued > 0)
                        usleep(1000);
        }
        assert_int_equal(queued, 0);

        pid_t parser = find_child(artifacts_import_pid(imp));
        assert_true(parser > 0);
        assert_status(parser, "Uid", "65534\t65534\t65534\t65534");
        assert_status(parser, "Gid", "65534\t65534\t65534\t65534");
        assert_status(parser, "Groups", "");
        assert_status(parser, "CapInh", "0000000000000000");
        assert_status(parser, "CapPrm", "0000000000000000");
        assert_status(parser, "CapEff", "0000000000000000");
        assert_status(parser, "CapBnd", "0000000000000000");
        assert_status(parser, "CapAmb", "0000000000000000");
        assert_status(parser, "NoNewPrivs", "1");
        assert_status(parser, "Seccomp", "2");

        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd", parser);
        DIR *fds = opendir(path);
        assert_non_null(fds);
        struct dirent *de;
        unsigned n = 0, stream = 0;
        while ((de = readdir(fds))) {
                char link[128], want[64];
                if (de->d_name[0] == '.')
                        continue;
                n++;
                ssize_t k = readlinkat(dirfd(fds), de->d_name, link, sizeof(link) - 1);
                assert_true(k > 0);
                link[k] = 0;
                snprintf(want, sizeof(want), "pipe:[%lu]", (unsigned long) pst.st_ino);
                if (streq(link, want))
                        stream++;
                else if (strncmp(link, "pipe:", 5) != 0)
                        fail_msg("parser holds fd %s -> %s", de->d_name, link);
        }
        closedir(fds);
        assert_int_equal(n, 2);
        assert_int_equal(stream, 1);

        /* Finish the stream properly: the confined parser still does its job. */
        assert_int_equal(write_all(p[1], h + 256, 256), 0);
        assert_int_equal(write_all(p[1], "x", 1), 0);
        static const uint8_t zero[511 + 1024];
        assert_int_equal(write_all(p[1], zero, sizeof(zero)), 0);
        close(p[1]);
        ArtifactSummary s;
        int r = artifacts_import_finish(imp, &s, &e);
        if (r < 0)
                fail_msg("%s: %s", e.code, e.message);
        assert_int_equal(s.files, 1);
}

/* What a stream that took over the parser would try next. Each must kill it (SIGSYS), and the
 * import must then fail with nothing published. */
static void hook_open(void) {
        int fd = (int) syscall(SYS_openat, AT_FDCWD, "/etc/hostname", O_RDONLY | O_CLOEXEC);
        (void) fd;
}
static void hook_socket(void) {
        (void) syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
}
static void hook_exec_memory(void) {
        (void) syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
}
static void hook_write_elsewhere(void) {
        /* Writing to any fd but the frames pipe (0 and 1 are closed, or the stream). */
        (void) syscall(SYS_write, 0, "x", 1);
        (void) syscall(SYS_write, 1, "x", 1);
}
static void hook_fork(void) {
        (void) syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
}

static void test_parser_seccomp(void **state) {
        Env *env = *state;
        static void (*const hooks[])(void) = { hook_open, hook_socket, hook_exec_memory,
                                               hook_write_elsewhere, hook_fork };
        Buf b = {};

        if (!is_root())
                tfw_skip("the parser's confinement needs root");
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_USTAR);
        tw_file(a, "a", "x");
        tw_close(a);
        for (size_t i = 0; i < ELEMENTSOF(hooks); i++) {
                Outcome o;
                artifacts_test_parser_hook = hooks[i];
                import_forked(env, &b, &o);
                artifacts_test_parser_hook = NULL;
                print_message("hook %zu: %s\n", i, o.e.message);
                assert_rejected(&o, ARTIFACT_CODE_REJECTED, "killed by signal 31");
                assert_int_equal(count_entries(env->staging), 0);
        }
        /* And without a hook the same stream imports: the kill came from the attempts. */
        Outcome o;
        import_forked(env, &b, &o);
        assert_int_equal(o.r, 0);
        buf_free(&b);
}

/* ---- the writer against a parser that lies (frames it would never send) --------------------- */

static void frame(Buf *b, uint32_t type, const void *p1, size_t n1, const void *p2, size_t n2) {
        uint32_t h[2] = { type, (uint32_t) (n1 + n2) };
        buf_append(b, h, sizeof(h));
        buf_append(b, p1, n1);
        buf_append(b, p2, n2);
}

static void frame_entry(Buf *b, uint32_t type, uint32_t flags, const char *name) {
        uint32_t head[2] = { type, flags };
        frame(b, FRAME_ENTRY, head, sizeof(head), name, strlen(name));
}

static void frame_data(Buf *b, uint64_t off, const char *data) {
        frame(b, FRAME_DATA, &off, sizeof(off), data, strlen(data));
}

static void frame_end(Buf *b, uint64_t size) {
        frame(b, FRAME_END, &size, sizeof(size), NULL, 0);
}

static void expect_frames_reject(Env *env, const Buf *b, const char *code, const char *needle) {
        ArtifactWriter w;
        TfwError e = {};
        size_t used = 0;
        assert_int_equal(artifact_writer_init(&w, env->staging, &env->limits, (uid_t) -1,
                                              (gid_t) -1, &e),
                         0);
        int r = artifact_writer_feed(&w, b->p, b->len, &used, &e);
        artifact_writer_done(&w);
        (void) artifact_dir_empty(env->staging);
        if (r >= 0)
                fail_msg("frames accepted; expected %s", needle);
        if (!streq(e.code, code) || !strstr(e.message, needle))
                fail_msg("expected %s \"%s\", got %s: %s", code, needle, e.code, e.message);
        assert_contained(env);
}

static void test_writer_distrusts_parser(void **state) {
        Env *env = *state;
        Buf b = {};

        frame_entry(&b, AE_IFREG, 0, "../outside/pwned");
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "'..' component");
        buf_free(&b);

        frame_entry(&b, AE_IFSOCK, 0, "sock");
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "socket");
        buf_free(&b);

        frame_entry(&b, AE_IFREG, ENTRY_FLAG_SYMLINK, "s");
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "symbolic link");
        buf_free(&b);

        frame_entry(&b, AE_IFREG, 0, "trailing/");
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "named as a directory");
        buf_free(&b);

        frame_data(&b, 0, "orphan");
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "data outside a regular file");
        buf_free(&b);

        frame_entry(&b, AE_IFDIR, 0, "dir");
        frame_data(&b, 0, "dir data");
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "data outside a regular file");
        buf_free(&b);

        /* Bytes are counted as written (holes included), whatever any header said. */
        frame_entry(&b, AE_IFREG, 0, "f");
        frame_data(&b, MiB - 2, "abc");
        expect_frames_reject(env, &b, ARTIFACT_CODE_TOO_LARGE, "more than 1048576 bytes (at 'f')");
        buf_free(&b);

        frame_entry(&b, AE_IFREG, 0, "f");
        frame_data(&b, 0, "abc");
        frame_end(&b, MiB + 1);
        expect_frames_reject(env, &b, ARTIFACT_CODE_TOO_LARGE, "more than 1048576 bytes");
        buf_free(&b);

        frame_entry(&b, AE_IFREG, 0, "f");
        frame_data(&b, 100, "abc");
        frame_data(&b, 50, "overlap");
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "data out of order");
        buf_free(&b);

        frame_entry(&b, AE_IFREG, 0, "f");
        frame_data(&b, UINT64_MAX - 1, "abc");
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "offset out of range");
        buf_free(&b);

        frame_entry(&b, AE_IFREG, 0, "f");
        frame_data(&b, 0, "abcdef");
        frame_end(&b, 3);
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "size smaller than its data");
        buf_free(&b);

        frame_entry(&b, AE_IFREG, 0, "f");
        frame(&b, FRAME_DONE, NULL, 0, NULL, 0);
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "end of stream inside an entry");
        buf_free(&b);

        frame(&b, FRAME_DONE, NULL, 0, NULL, 0);
        frame_entry(&b, AE_IFREG, 0, "late");
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "frame after the end");
        buf_free(&b);

        uint32_t h[2] = { FRAME_DATA, (uint32_t) FRAME_PAYLOAD_MAX + 1 };
        buf_append(&b, h, sizeof(h));
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "oversized frame");
        buf_free(&b);

        frame(&b, 99, NULL, 0, NULL, 0);
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "unknown frame");
        buf_free(&b);

        /* A failure message is printable whatever bytes it came with. */
        uint32_t kind = FRAME_FAIL_REJECTED;
        frame(&b, FRAME_FAIL, &kind, sizeof(kind), "bad\x1b[31m\n", 9);
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "bad?[31m?");
        buf_free(&b);

        /* A partial frame is left for the next read, not misparsed. */
        ArtifactWriter w;
        TfwError e = {};
        size_t used = 99;
        frame_entry(&b, AE_IFREG, 0, "whole");
        assert_int_equal(artifact_writer_init(&w, env->staging, &env->limits, (uid_t) -1,
                                              (gid_t) -1, &e),
                         0);
        assert_int_equal(artifact_writer_feed(&w, b.p, b.len - 1, &used, &e), 0);
        assert_int_equal(used, 0);
        assert_int_equal(artifact_writer_feed(&w, b.p, b.len, &used, &e), 0);
        assert_int_equal(used, b.len);
        artifact_writer_done(&w);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        buf_free(&b);
}

/* ---- the cache profile (threat 15: links kept inside the path, mtimes kept) ------------------ */

#define OWNER 4243
#define T0 1700000000LL

/* Switch env to the cache profile. Without root the inodes can only be chowned to ourselves
 * (and import_inproc leaves the group). */
static void cache_profile(Env *env) {
        env->limits.cache = true;
        env->limits.owner = is_root() ? OWNER : geteuid();
}

/* An entry with an mtime; pax interchange keeps its nanoseconds. */
static void tw_at(struct archive *a, const char *name, unsigned type, unsigned perm,
                  const char *data, const char *symlink, long long sec, long nsec) {
        struct archive_entry *ae = archive_entry_new();
        size_t len = data ? strlen(data) : 0;
        archive_entry_copy_pathname(ae, name);
        archive_entry_set_filetype(ae, type);
        archive_entry_set_perm(ae, perm);
        archive_entry_set_uid(ae, 1234);
        archive_entry_set_gid(ae, 1234);
        archive_entry_set_mtime(ae, (time_t) sec, nsec);
        if (type == AE_IFREG)
                archive_entry_set_size(ae, (la_int64_t) len);
        if (symlink)
                archive_entry_copy_symlink(ae, symlink);
        assert_true(archive_write_header(a, ae) >= ARCHIVE_WARN);
        if (len)
                assert_int_equal(archive_write_data(a, data, len), (la_ssize_t) len);
        archive_entry_free(ae);
}

static void tw_link(struct archive *a, const char *name, const char *target) {
        tw_at(a, name, AE_IFLNK, 0777, NULL, target, T0, 0);
}

/* A stream of one link (its parents implicit). */
static void one_link(Buf *b, const char *name, const char *target) {
        struct archive *a = tw_new(b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_link(a, name, target);
        tw_close(a);
}

static void check_cache_inode(int dir_fd, const char *path, mode_t type, mode_t mode,
                              long long sec, long nsec) {
        struct stat st;
        if (fstatat(dir_fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
                fail_msg("'%s': %s", path, strerror(errno));
        if ((st.st_mode & S_IFMT) != type)
                fail_msg("'%s': type %o, want %o", path, st.st_mode & S_IFMT, type);
        if (type != S_IFLNK && (st.st_mode & 07777) != mode)
                fail_msg("'%s': mode %04o, want %04o", path, st.st_mode & 07777, mode);
        uid_t uid = is_root() ? OWNER : geteuid();
        if (st.st_uid != uid || (is_root() && st.st_gid != GROUP))
                fail_msg("'%s': owner %u:%u, want %u:%u", path, st.st_uid, st.st_gid, uid, GROUP);
        if (sec >= 0 && (st.st_mtim.tv_sec != sec || st.st_mtim.tv_nsec != nsec))
                fail_msg("'%s': mtime %lld.%09ld, want %lld.%09ld", path,
                         (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec, sec, nsec);
}

static void assert_link(int dir_fd, const char *path, const char *target) {
        char buf[PATH_MAX + 1];
        ssize_t n = readlinkat(dir_fd, path, buf, sizeof(buf));
        if (n < 0)
                fail_msg("'%s': %s", path, strerror(errno));
        buf[n] = 0;
        assert_string_equal(buf, target);
}

/* The kernel as an independent judge: every link below staging, resolved from its top-level
 * directory with RESOLVE_BENEATH, must not try to leave it (EXDEV). */
static void links_beneath(int top_fd, int dir_fd, char *rel, size_t len) {
        _cleanup_closedir_ DIR *d = opendir_fd(dir_fd);
        assert_non_null(d);
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                size_t n = strlen(de->d_name);
                assert_true(len + n + 2 < PATH_MAX);
                snprintf(rel + len, PATH_MAX - len, "%s%s", len ? "/" : "", de->d_name);
                if (de->d_type == DT_LNK) {
                        struct open_how how = { .flags = O_PATH | O_CLOEXEC,
                                                .resolve = RESOLVE_BENEATH };
                        long fd = syscall(SYS_openat2, top_fd, rel, &how, sizeof(how));
                        if (fd < 0 && errno == EXDEV)
                                fail_msg("link '%s' leaves its top-level directory", rel);
                        if (fd >= 0)
                                close((int) fd);
                } else if (de->d_type == DT_DIR) {
                        _cleanup_close_ int sub = open_dir_at(dir_fd, de->d_name);
                        assert_true(sub >= 0);
                        links_beneath(top_fd, sub, rel, len + (len ? 1 : 0) + n);
                }
                rel[len] = 0;
        }
}

static void assert_links_beneath(int staging) {
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH };
        long probe = syscall(SYS_openat2, staging, ".", &how, sizeof(how));
        if (probe < 0 && errno == ENOSYS) {
                print_message("(no openat2: the links' confinement is not double-checked)\n");
                return;
        }
        close((int) probe);
        _cleanup_closedir_ DIR *d = opendir_fd(staging);
        assert_non_null(d);
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                assert_int_equal(de->d_type, DT_DIR); /* top level: directories only */
                _cleanup_close_ int top = open_dir_at(staging, de->d_name);
                assert_true(top >= 0);
                char rel[PATH_MAX] = "";
                links_beneath(top, top, rel, 0);
        }
}

/* Both pipelines accept; check runs on each one's result. */
typedef void (*cache_check_t)(Env *env, const ArtifactSummary *s);
static void cache_accept(Env *env, const Buf *b, cache_check_t check) {
        Outcome o;

        import_inproc(env, b, &o);
        if (o.r < 0)
                fail_msg("in-process import failed: %s: %s", o.e.code, o.e.message);
        check(env, &o.s);
        assert_links_beneath(env->staging);
        assert_contained(env);
        if (!is_root()) {
                print_message("(forked import not run: needs root)\n");
                return;
        }
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        import_forked(env, b, &o);
        if (o.r < 0)
                fail_msg("forked import failed: %s: %s", o.e.code, o.e.message);
        check(env, &o.s);
        assert_links_beneath(env->staging);
        assert_contained(env);
}

static void build_cache_tree(Buf *b) {
        struct archive *a = tw_new(b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_at(a, "0/", AE_IFDIR, 0755, NULL, NULL, T0 + 1, 100);
        tw_at(a, "0/a/", AE_IFDIR, 02777, NULL, NULL, T0 + 2, 200);
        tw_at(a, "0/a/run", AE_IFREG, 04755, "#!/bin/sh\n", NULL, T0 + 3, 300);
        tw_at(a, "0/a/l", AE_IFLNK, 0777, NULL, "../b", T0 + 4, 400);
        tw_at(a, "0/b", AE_IFREG, 0666, "data", NULL, T0 + 5, 500);
        /* Implicit parents, then the directory's entry after its contents. */
        tw_at(a, "0/a/deep/er/f", AE_IFREG, 0600, "x", NULL, T0 + 6, 600);
        tw_at(a, "0/a/deep/er/", AE_IFDIR, 0700, NULL, NULL, T0 + 7, 700);
        tw_at(a, "0/a/dl", AE_IFLNK, 0777, NULL, "deep/./er/", T0 + 8, 800);
        /* A non-ASCII target, through the confined parser's charset conversion. */
        tw_at(a, "0/a/u", AE_IFLNK, 0777, NULL, "../\xc3\xa9t\xc3\xa9", T0 + 9, 900);
        tw_at(a, "1/x/y/", AE_IFDIR, 0755, NULL, NULL, T0 + 10, 999999999);
        tw_at(a, "1/x/y/z", AE_IFREG, 0640, "", NULL, T0 + 11, 1);
        tw_at(a, "1/ln", AE_IFLNK, 0777, NULL, "x/y/z", T0 + 12, 2);
        tw_close(a);
}

static void check_cache_tree(Env *env, const ArtifactSummary *s) {
        int st = env->staging;

        assert_int_equal(s->files, 4);
        assert_int_equal(s->dirs, 7); /* 0 0/a 0/a/deep 0/a/deep/er 1 1/x 1/x/y */
        assert_int_equal(s->links, 4);
        /* The files' bytes and the links' targets. */
        assert_int_equal(s->bytes, 10 + 4 + 1 + 0 + 4 + 10 + 8 + 5);
        check_cache_inode(st, "0", S_IFDIR, 0750, T0 + 1, 100);
        check_cache_inode(st, "0/a", S_IFDIR, 0750, T0 + 2, 200);
        check_cache_inode(st, "0/a/run", S_IFREG, 0750, T0 + 3, 300);
        check_cache_inode(st, "0/a/l", S_IFLNK, 0, T0 + 4, 400);
        check_cache_inode(st, "0/b", S_IFREG, 0640, T0 + 5, 500);
        check_cache_inode(st, "0/a/deep", S_IFDIR, 0750, -1, 0);
        check_cache_inode(st, "0/a/deep/er/f", S_IFREG, 0640, T0 + 6, 600);
        check_cache_inode(st, "0/a/deep/er", S_IFDIR, 0750, T0 + 7, 700);
        check_cache_inode(st, "0/a/dl", S_IFLNK, 0, T0 + 8, 800);
        check_cache_inode(st, "0/a/u", S_IFLNK, 0, T0 + 9, 900);
        check_cache_inode(st, "1", S_IFDIR, 0750, -1, 0);
        check_cache_inode(st, "1/x", S_IFDIR, 0750, -1, 0);
        check_cache_inode(st, "1/x/y", S_IFDIR, 0750, T0 + 10, 999999999);
        check_cache_inode(st, "1/x/y/z", S_IFREG, 0640, T0 + 11, 1);
        check_cache_inode(st, "1/ln", S_IFLNK, 0, T0 + 12, 2);
        assert_link(st, "0/a/l", "../b");
        assert_link(st, "0/a/dl", "deep/./er/");
        assert_link(st, "0/a/u", "../\xc3\xa9t\xc3\xa9");
        assert_link(st, "1/ln", "x/y/z");
        assert_file(st, "0/a/run", "#!/bin/sh\n", 10);
        assert_file(st, "0/b", "data", 4);
}

/* Files (one executable), nested and implicit directories, links that stay inside their
 * top-level directory; owner:group, modes and mtimes (nanoseconds included) as specified,
 * directory mtimes surviving the entries added below them; the same below a setgid staging
 * directory, which must not pass its bit on. */
static void test_cache_tree(void **state) {
        Env *env = *state;
        Buf b = {};

        cache_profile(env);
        build_cache_tree(&b);
        cache_accept(env, &b, check_cache_tree);
        if (is_root()) {
                assert_int_equal(artifact_dir_empty(env->staging), 0);
                assert_int_equal(fchown(env->staging, 0, GROUP), 0);
                assert_int_equal(fchmod(env->staging, 02750), 0);
                cache_accept(env, &b, check_cache_tree);
        }
        buf_free(&b);
}

static void check_one_link(Env *env, const ArtifactSummary *s) {
        assert_int_equal(s->links, 1);
        (void) env;
}

/* Link targets: relative and, read lexically from the link's directory, never out of the
 * link's top-level component. */
static void test_cache_link_targets(void **state) {
        Env *env = *state;
        static const struct {
                const char *name, *target;
        } ok[] = {
                { "0/a/l", "../b" },
                { "0/l", "." },
                { "0/l", "./x/./y//" },
                { "0/a/b/l", "../../c" },
                { "0/a/b/l", "./.././../" },
        };
        static const struct {
                const char *name, *target, *why;
        } bad[] = {
                { "0/l", "/etc", "cache entry '0/l': absolute link target '/etc'" },
                { "0/l", "../1/x", "cache entry '0/l': link target '../1/x' leaves its top-level" },
                { "0/l", "../../x", "link target '../../x' leaves its top-level directory" },
                { "0/x/l", "../../../y", "cache entry '0/x/l': link target '../../../y' leaves" },
                { "0/l", "..", "link target '..' leaves" },
                { "0/l", "./../0/x", "leaves its top-level directory" },
                /* d may be a link, and the kernel resolves "d/.." from where d points. */
                { "0/l", "d/../x", "link target 'd/../x' has '..' after a name" },
                { "0/l", "", "cache entry '0/l': symbolic link with an empty target" },
        };

        cache_profile(env);
        for (size_t i = 0; i < ELEMENTSOF(ok); i++) {
                Buf b = {};
                print_message("accept %s -> %s\n", ok[i].name, ok[i].target);
                one_link(&b, ok[i].name, ok[i].target);
                cache_accept(env, &b, check_one_link);
                assert_link(env->staging, ok[i].name, ok[i].target);
                assert_int_equal(artifact_dir_empty(env->staging), 0);
                buf_free(&b);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                Buf b = {};
                print_message("refuse %s -> '%s'\n", bad[i].name, bad[i].target);
                one_link(&b, bad[i].name, bad[i].target);
                expect_reject(env, &b, ARTIFACT_CODE_REJECTED, bad[i].why);
                buf_free(&b);
        }

        /* The escape a lexical reading alone would let through: deep/l is ".." twice (0
         * itself), so "d/deep/l/../../.." is, to the kernel, three levels above 0. */
        Buf b = {};
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_at(a, "0/d/deep/", AE_IFDIR, 0755, NULL, NULL, T0, 0);
        tw_link(a, "0/d/deep/l", "../..");
        tw_link(a, "0/s", "d/deep/l/../../..");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "cache entry '0/s': link target");
        buf_free(&b);

        /* Target length: PATH_MAX - 1 bytes pass, PATH_MAX do not. */
        char target[PATH_MAX + 1];
        for (size_t i = 0; i < PATH_MAX - 1; i += 2)
                memcpy(target + i, "a/", 2);
        target[PATH_MAX - 1] = 0; /* 4095 bytes, ending in "a" */
        assert_int_equal(strlen(target), PATH_MAX - 1);
        one_link(&b, "0/long", target);
        cache_accept(env, &b, check_one_link);
        assert_link(env->staging, "0/long", target);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        buf_free(&b);
        target[PATH_MAX - 1] = 'a';
        target[PATH_MAX] = 0;
        one_link(&b, "0/long", target);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "link target longer than 4095 bytes");
        buf_free(&b);
}

/* What the cache profile refuses besides link targets; every refusal names a cache entry and
 * leaves staging empty. */
static void test_cache_refusals(void **state) {
        Env *env = *state;
        Buf b = {};

        cache_profile(env);
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_file(a, "0/first", "x");
        tw_add(a, "0/h", AE_IFREG, 0644, NULL, 0, NULL, "0/first");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "cache entry '0/h': hard link");
        buf_free(&b);

        static const struct {
                unsigned type;
                const char *why;
        } nodes[] = {
                { AE_IFIFO, "cache entry '0/node': FIFO" },
                { AE_IFCHR, "cache entry '0/node': character device" },
                { AE_IFBLK, "cache entry '0/node': block device" },
        };
        for (size_t i = 0; i < ELEMENTSOF(nodes); i++) {
                a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
                tw_add(a, "0/node", nodes[i].type, 0666, NULL, 0, NULL, NULL);
                tw_close(a);
                expect_reject(env, &b, ARTIFACT_CODE_REJECTED, nodes[i].why);
                buf_free(&b);
        }

        /* The top level holds one directory per cache path, and nothing else. */
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_file(a, "0", "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED,
                      "cache entry '0': a top-level regular file");
        buf_free(&b);
        one_link(&b, "0", "x");
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED,
                      "cache entry '0': a top-level symbolic link");
        buf_free(&b);
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_dir(a, "./");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "'./': the staging directory itself");
        buf_free(&b);

        /* Nothing is ever written through a link, and links are no exception to the
         * duplicate and type-change rules. */
        static const struct {
                const char *first, *second, *why;
        } pairs[] = {
                { "link", "file below", "'0/l': changes type (a symbolic link, then a directory)" },
                { "link", "dir", "'0/l': changes type (a symbolic link, then a directory)" },
                { "link", "file", "'0/l': changes type (a symbolic link, then a regular file)" },
                { "link", "link", "cache entry '0/l': duplicate entry" },
                { "dir", "link", "'0/l': changes type (a directory, then a symbolic link)" },
                { "file", "link", "'0/l': changes type (a regular file, then a symbolic link)" },
        };
        for (size_t i = 0; i < ELEMENTSOF(pairs); i++) {
                a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
                const char *kinds[] = { pairs[i].first, pairs[i].second };
                for (size_t k = 0; k < 2; k++) {
                        if (streq(kinds[k], "link"))
                                tw_link(a, "0/l", "d");
                        else if (streq(kinds[k], "dir"))
                                tw_dir(a, "0/l");
                        else if (streq(kinds[k], "file"))
                                tw_file(a, "0/l", "x");
                        else
                                tw_file(a, "0/l/pwned", "x");
                }
                tw_close(a);
                expect_reject(env, &b, ARTIFACT_CODE_REJECTED, pairs[i].why);
                buf_free(&b);
        }
        /* The names follow the artifact rules. */
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_file(a, "0/../outside/pwned", "x");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_REJECTED, "cache entry '0/../outside/pwned': '..'");
        buf_free(&b);
}

static void check_nothing(Env *env, const ArtifactSummary *s) {
        (void) env;
        (void) s;
}

/* max_bytes counts the links' targets with the files' bytes; max_entries counts implicit
 * directories; the messages name the cache. */
static void test_cache_limits(void **state) {
        Env *env = *state;
        Buf b = {};

        cache_profile(env);
        env->limits.max_bytes = 10;
        struct archive *a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_file(a, "0/f", "8 bytes.");
        tw_link(a, "0/l", "ab");
        tw_close(a);
        cache_accept(env, &b, check_nothing);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        buf_free(&b);
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_file(a, "0/f", "8 bytes.");
        tw_link(a, "0/l", "abc");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_TOO_LARGE, "cache: more than 10 bytes (at '0/l')");
        buf_free(&b);

        env->limits.max_bytes = MiB;
        env->limits.max_entries = 3;
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_link(a, "0/a/l", "x"); /* 0 and 0/a implicitly, and the link */
        tw_close(a);
        cache_accept(env, &b, check_nothing);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        buf_free(&b);
        a = tw_new(&b, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
        tw_link(a, "0/a/l", "x");
        tw_file(a, "0/b", "");
        tw_close(a);
        expect_reject(env, &b, ARTIFACT_CODE_TOO_LARGE, "cache: more than 3 entries (at '0/b')");
        buf_free(&b);
}

static void frame_attr(Buf *b, int64_t sec, uint32_t nsec, uint32_t perm, const char *target,
                       size_t len) {
        uint8_t fixed[FRAME_ATTR_FIXED];
        memcpy(fixed, &sec, 8);
        memcpy(fixed + 8, &nsec, 4);
        memcpy(fixed + 12, &perm, 4);
        frame(b, FRAME_ATTR, fixed, sizeof(fixed), target, len);
}

/* Feed b to a writer of the given profile; 0 or the error. */
static int feed_frames(Env *env, bool cache, const Buf *b, TfwError *e) {
        ArtifactWriter w;
        ArtifactLimits l = env->limits;
        size_t used = 0;
        l.cache = cache;
        assert_int_equal(artifact_writer_init(&w, env->staging, &l, (uid_t) -1, (gid_t) -1, e), 0);
        int r = artifact_writer_feed(&w, b->p, b->len, &used, e);
        if (r >= 0 && used != b->len)
                r = tfw_error(e, EPROTO, "partial", "partial frame left");
        artifact_writer_done(&w);
        return r;
}

static void expect_cache_frames_reject(Env *env, const Buf *b, const char *needle) {
        env->limits.cache = true;
        expect_frames_reject(env, b, ARTIFACT_CODE_REJECTED, needle);
        env->limits.cache = false;
}

/* The writer against a parser that lies about ATTR frames. */
static void test_cache_frames(void **state) {
        Env *env = *state;
        Buf b = {};

        frame_entry(&b, AE_IFDIR, 0, "0");
        expect_cache_frames_reject(env, &b, "entry without attributes");
        buf_free(&b);

        frame_attr(&b, T0, 0, 0755, NULL, 0);
        frame_attr(&b, T0, 0, 0755, NULL, 0);
        frame_entry(&b, AE_IFDIR, 0, "0");
        expect_cache_frames_reject(env, &b, "two attribute frames");
        buf_free(&b);

        frame_attr(&b, T0, 0, 0644, NULL, 0);
        frame_entry(&b, AE_IFREG, 0, "0/f");
        frame_attr(&b, T0, 0, 0644, NULL, 0);
        expect_cache_frames_reject(env, &b, "attributes out of order");
        buf_free(&b);

        frame_attr(&b, T0, 0, 0755, NULL, 0);
        frame(&b, FRAME_DONE, NULL, 0, NULL, 0);
        expect_cache_frames_reject(env, &b, "attributes without an entry");
        buf_free(&b);

        /* UTIME_NOW and UTIME_OMIT are nanosecond values too: never from the stream. */
        static const uint32_t bad_nsec[] = { 1000000000u, (1u << 30) - 1, (1u << 30) - 2,
                                             UINT32_MAX };
        for (size_t i = 0; i < ELEMENTSOF(bad_nsec); i++) {
                frame_attr(&b, T0, bad_nsec[i], 0755, NULL, 0);
                frame_entry(&b, AE_IFDIR, 0, "0");
                expect_cache_frames_reject(env, &b, "cache entry '0': mtime nanoseconds");
                buf_free(&b);
        }

        frame_attr(&b, T0, 0, 0644, "x", 1);
        frame_entry(&b, AE_IFREG, 0, "0/f");
        expect_cache_frames_reject(env, &b, "a link target for an entry that is not a link");
        buf_free(&b);

        frame_attr(&b, T0, 0, 0644, "x", 1);
        frame_entry(&b, AE_IFREG, ENTRY_FLAG_SYMLINK, "0/f");
        expect_cache_frames_reject(env, &b, "cache entry '0/f': a regular file with a link target");
        buf_free(&b);

        frame_attr(&b, T0, 0, 0777, NULL, 0);
        frame_entry(&b, AE_IFLNK, ENTRY_FLAG_SYMLINK, "0/l");
        expect_cache_frames_reject(env, &b, "symbolic link with an empty target");
        buf_free(&b);

        frame_attr(&b, T0, 0, 0777, "a\0b", 3);
        frame_entry(&b, AE_IFLNK, ENTRY_FLAG_SYMLINK, "0/l");
        expect_cache_frames_reject(env, &b, "NUL byte in the link target");
        buf_free(&b);

        char big[PATH_MAX + 1];
        memset(big, 'a', sizeof(big));
        frame_attr(&b, T0, 0, 0777, big, PATH_MAX);
        frame_entry(&b, AE_IFLNK, ENTRY_FLAG_SYMLINK, "0/l");
        expect_cache_frames_reject(env, &b, "link target longer than 4095 bytes");
        buf_free(&b);
}

/* ATTR in both profiles: a malformed one is refused by both; the artifact profile otherwise
 * ignores it; the cache profile applies it. */
static void test_attr_frames(void **state) {
        Env *env = *state;
        TfwError e = {};
        Buf b = {};
        char big[PATH_MAX + 1];

        memset(big, 'a', sizeof(big));
        /* A malformed ATTR is refused by both profiles. */
        for (int cache = 0; cache < 2; cache++) {
                uint8_t shortp[FRAME_ATTR_FIXED - 1] = {};
                frame(&b, FRAME_ATTR, shortp, sizeof(shortp), NULL, 0);
                assert_true(feed_frames(env, cache, &b, &e) < 0);
                assert_non_null(strstr(e.message, "bad attribute frame"));
                buf_free(&b);
                frame_attr(&b, T0, 0, 0777, big, PATH_MAX + 1);
                assert_true(feed_frames(env, cache, &b, &e) < 0);
                assert_non_null(strstr(e.message, "bad attribute frame"));
                buf_free(&b);
        }

        /* The artifact profile ignores well-formed ATTR frames, wherever they are, and still
         * refuses what it always refused. */
        frame_attr(&b, T0, 2000000000u, 0777, "../../etc", 9);
        frame_attr(&b, T0, 0, 0777, NULL, 0);
        frame_entry(&b, AE_IFREG, 0, "f");
        frame_attr(&b, T0, 0, 0777, NULL, 0);
        frame_data(&b, 0, "abc");
        frame_end(&b, 3);
        frame(&b, FRAME_DONE, NULL, 0, NULL, 0);
        if (feed_frames(env, false, &b, &e) < 0)
                fail_msg("%s: %s", e.code, e.message);
        assert_file(env->staging, "f", "abc", 3);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        buf_free(&b);
        frame_attr(&b, T0, 0, 0777, "target", 6);
        frame_entry(&b, AE_IFLNK, ENTRY_FLAG_SYMLINK, "l");
        expect_frames_reject(env, &b, ARTIFACT_CODE_REJECTED, "artifact 'l': symbolic link");
        buf_free(&b);

        /* A complete cache stream of frames, as the parser sends it. */
        frame_attr(&b, T0, 5, 0755, NULL, 0);
        frame_entry(&b, AE_IFDIR, 0, "0/");
        frame_end(&b, 0);
        frame_attr(&b, T0 + 1, 6, 0777, "f", 1);
        frame_entry(&b, AE_IFLNK, ENTRY_FLAG_SYMLINK, "0/l");
        frame_end(&b, 0);
        frame_attr(&b, T0 + 2, 7, 0700, NULL, 0);
        frame_entry(&b, AE_IFREG, 0, "0/f");
        frame_data(&b, 0, "abc");
        frame_end(&b, 3);
        frame(&b, FRAME_DONE, NULL, 0, NULL, 0);
        if (feed_frames(env, true, &b, &e) < 0)
                fail_msg("%s: %s", e.code, e.message);
        struct stat st;
        assert_int_equal(fstatat(env->staging, "0", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(st.st_mtim.tv_sec == T0 && st.st_mtim.tv_nsec == 5);
        assert_int_equal(fstatat(env->staging, "0/l", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISLNK(st.st_mode) && st.st_mtim.tv_sec == T0 + 1 && st.st_mtim.tv_nsec == 6);
        assert_int_equal(fstatat(env->staging, "0/f", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(st.st_mtim.tv_sec == T0 + 2 && st.st_mtim.tv_nsec == 7);
        assert_int_equal(st.st_mode & 07777, 0750);
        assert_int_equal(artifact_dir_empty(env->staging), 0);
        buf_free(&b);
}

/* Cache profile: the top level holds the cache paths' directories and, when the caller names
 * it (limits.top_file), that one regular file (the list of what the job removed); any other file
 * there, and any hard link, is refused. Streams made by Python's tarfile (pax, as init writes them). */
static void top_stream(Env *env, const char *name, bool hard, Buf *ret) {
        _cleanup_free_ char *cmd = NULL;
        assert_true(asprintf(&cmd,
                             "cd '%s' && python3 -c 'import tarfile,sys,io; t=tarfile.open(\"k.tar\",\"w\",format=tarfile.PAX_FORMAT); "
                             "d=tarfile.TarInfo(\"0\"); d.type=tarfile.DIRTYPE; d.mode=0o755; t.addfile(d); "
                             "i=tarfile.TarInfo(sys.argv[1]); i.mode=0o644; data=b\"0/gone\\n\"; "
                             "i.size=0 if sys.argv[2]==\"1\" else len(data); "
                             "i.type=tarfile.LNKTYPE if sys.argv[2]==\"1\" else tarfile.REGTYPE; i.linkname=sys.argv[1] if sys.argv[2]==\"1\" else \"\"; "
                             "t.addfile(i, None if sys.argv[2]==\"1\" else io.BytesIO(data)); t.close()' '%s' %d",
                             env->d->path, name, hard ? 1 : 0) > 0);
        assert_int_equal(system(cmd), 0);
        _cleanup_close_ int fd = openat(env->d->fd, "k.tar", O_RDONLY | O_CLOEXEC);
        char *p = NULL;
        size_t n = 0;
        assert_int_equal(read_full_fd_bounded(fd, 1 << 20, &p, &n), 0);
        *ret = (Buf) {};
        buf_append(ret, p, n);
        free(p);
}

static void test_cache_top_file(void **state) {
        Env *env = *state;
        struct stat st;
        Buf b;
        Outcome o;

        env->limits.cache = true;
        env->limits.owner = getuid();
        env->limits.top_file = "deleted";
        top_stream(env, "deleted", false, &b);
        import_inproc(env, &b, &o);
        assert_int_equal(o.r, 0);
        assert_int_equal(fstatat(env->staging, "deleted", &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISREG(st.st_mode) && st.st_size == 7);
        buf_free(&b);
        assert_int_equal(artifact_dir_empty(env->staging), 0);

        /* Another name; the name as a hard link (once a kept file); without the caller's name. */
        top_stream(env, "other", false, &b);
        import_inproc(env, &b, &o);
        assert_rejected(&o, "artifact_rejected", "a top-level regular file");
        assert_int_equal(count_entries(env->staging), 0);
        buf_free(&b);
        top_stream(env, "0/x", true, &b);
        import_inproc(env, &b, &o);
        assert_rejected(&o, "artifact_rejected", "hard link");
        assert_int_equal(count_entries(env->staging), 0);
        buf_free(&b);
        env->limits.top_file = NULL;
        top_stream(env, "deleted", false, &b);
        import_inproc(env, &b, &o);
        assert_rejected(&o, "artifact_rejected", "a top-level regular file");
        buf_free(&b);
}

int main(void) {
        const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, env_setup, env_teardown)
                T(test_dotdot),
                T(test_absolute),
                T(test_symlink_then_file),
                T(test_hardlink),
                T(test_devices_and_fifo),
                T(test_dir_then_symlink),
                T(test_type_changes_and_duplicates),
                T(test_million_entries),
                T(test_declared_size_lies),
                T(test_sparse_bomb),
                T(test_sparse_ok),
                T(test_long_names),
                T(test_deep_nesting),
                T(test_bad_names),
                T(test_compressed_refused),
                T(test_trailing_garbage),
                T(test_stream_cap),
                T(test_truncated_stream),
                T(test_fixtures),
                T(test_nested_and_empty),
                T(test_empty_stream),
                T(test_byte_limit),
                T(test_entry_limit),
                T(test_modes_and_owner),
                T(test_refuses_bad_setup),
                T(test_parser_is_confined),
                T(test_parser_seccomp),
                T(test_writer_distrusts_parser),
                T(test_cache_tree),
                T(test_cache_link_targets),
                T(test_cache_refusals),
                T(test_cache_limits),
                T(test_cache_frames),
                T(test_cache_top_file),
                T(test_attr_frames),
#undef T
        };
        if (getenv("TFW_TEST_FILTER"))
                cmocka_set_test_filter(getenv("TFW_TEST_FILTER"));
        return cmocka_run_group_tests(tests, NULL, NULL);
}
