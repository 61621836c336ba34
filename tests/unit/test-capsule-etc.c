/* SPDX-License-Identifier: MIT */
/* capsule/etc-files.c and capsule/host-zone.c: the files of a default capsule's /etc (issue 36)
 * and the host's zone they carry, read from a host root made in each test's directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "capsule/etc-files.h"
#include "capsule/host-zone.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

/* A TZif (v1) of one type: offset +0100, abbreviation "TST". */
static const char test_tzif[] = {
        'T', 'Z', 'i', 'f', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 4,
        0, 0, 0x0e, 0x10, 0, 0, /* utoff 3600, isdst 0, desigidx 0 */
        'T', 'S', 'T', 0,
};

static void mkdirs(int dir_fd, const char *path) {
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", path);
        for (char *p = buf; (p = strchr(p, '/')); p++) {
                *p = 0;
                assert_true(mkdirat(dir_fd, buf, 0755) == 0 || errno == EEXIST);
                *p = '/';
        }
        assert_true(mkdirat(dir_fd, buf, 0755) == 0 || errno == EEXIST);
}

/* A host root with a zone file at usr/share/zoneinfo/<name> and etc/. */
static void make_host(TestDir *d, const char *name, const char *data, size_t size) {
        char path[256];
        mkdirs(d->fd, "etc");
        if (!name)
                return;
        snprintf(path, sizeof(path), "usr/share/zoneinfo/%s", name);
        mkdirs(d->fd, path);
        assert_int_equal(unlinkat(d->fd, path, AT_REMOVEDIR), 0);
        tfw_write_file(d->fd, path, data, size);
}

/* The abbreviation and offset glibc finds in the file path. */
static void zone_of(const char *path, char *abbr, size_t n, long *off) {
        char tz[512];
        time_t t = 0;
        struct tm tm;
        snprintf(tz, sizeof(tz), ":%s", path);
        assert_int_equal(setenv("TZ", tz, 1), 0);
        tzset();
        assert_non_null(localtime_r(&t, &tm));
        assert_true(strftime(abbr, n, "%Z", &tm) > 0);
        *off = tm.tm_gmtoff;
        unsetenv("TZ");
        tzset();
}

static void assert_utc(const CapsuleZone *z) {
        assert_false(z->from_host);
        assert_string_equal(z->name, "Etc/UTC");
        assert_true(z->size >= 44);
        assert_memory_equal(z->tzif, "TZif", 4);
}

static void test_zone_names(void **state) {
        (void) state;
        const char *good[] = { "UTC", "Etc/UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires",
                               "Etc/GMT+5", "Etc/GMT-14", "right/Europe/Paris", "EST5EDT" };
        const char *bad[] = { "", "/Europe/Berlin", "Europe/", "Europe//Berlin", "../etc/shadow",
                              "Europe/../../x", ".", "Europe/Ber lin", "Europe/Berlin\n",
                              "Europe;rm", "Europe/Berlin$(x)",
                              "Aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" /* 65 */ };
        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                assert_true(capsule_zone_name_is_valid(good[i]));
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_false(capsule_zone_name_is_valid(bad[i]));
        assert_false(capsule_zone_name_is_valid(NULL));
}

/* The common case (Debian, systemd): /etc/localtime a link into zoneinfo. */
static void test_zone_from_link(void **state) {
        TestDir *d = *state;
        _cleanup_(capsule_zone_done) CapsuleZone z = {};

        make_host(d, "Europe/Testville", test_tzif, sizeof(test_tzif));
        assert_int_equal(symlinkat("../usr/share/zoneinfo/Europe/Testville", d->fd, "etc/localtime"), 0);
        tfw_write_file(d->fd, "etc/timezone", "Stale/Name\n", (size_t) -1);
        assert_int_equal(capsule_zone_read(d->fd, &z), 0);
        assert_true(z.from_host);
        assert_string_equal(z.name, "Europe/Testville"); /* the link wins over a stale file */
        assert_int_equal(z.size, sizeof(test_tzif));
        assert_memory_equal(z.tzif, test_tzif, sizeof(test_tzif));
}

/* A copied /etc/localtime: the bytes from it, the name from /etc/timezone's first line. */
static void test_zone_from_copy(void **state) {
        TestDir *d = *state;
        _cleanup_(capsule_zone_done) CapsuleZone z = {}, z2 = {};

        make_host(d, NULL, NULL, 0);
        tfw_write_file(d->fd, "etc/localtime", test_tzif, sizeof(test_tzif));
        tfw_write_file(d->fd, "etc/timezone", "Europe/Testville\nsecond line\n", (size_t) -1);
        assert_int_equal(capsule_zone_read(d->fd, &z), 0);
        assert_true(z.from_host);
        assert_string_equal(z.name, "Europe/Testville");
        assert_memory_equal(z.tzif, test_tzif, sizeof(test_tzif));

        /* A name that is no zone name is dropped; the bytes stay. */
        assert_int_equal(unlinkat(d->fd, "etc/timezone", 0), 0);
        tfw_write_file(d->fd, "etc/timezone", "../../etc/shadow\n", (size_t) -1);
        assert_int_equal(capsule_zone_read(d->fd, &z2), 0);
        assert_true(z2.from_host);
        assert_string_equal(z2.name, "");
        assert_int_equal(z2.size, sizeof(test_tzif));
}

/* No zone, or none we can use: UTC, as glibc would assume, never a read past the bound. */
static void test_zone_fallback_utc(void **state) {
        TestDir *d = *state;
        char big[CAPSULE_ZONE_MAX_BYTES + 1];

        make_host(d, NULL, NULL, 0);
        for (int i = 0; i < 5; i++) {
                _cleanup_(capsule_zone_done) CapsuleZone z = {};
                (void) unlinkat(d->fd, "etc/localtime", 0);
                (void) unlinkat(d->fd, "etc/localtime", AT_REMOVEDIR);
                if (i == 1) /* not a TZif */
                        tfw_write_file(d->fd, "etc/localtime", "Europe/Berlin\n", (size_t) -1);
                if (i == 2) { /* past the bound, with the magic */
                        memset(big, 0, sizeof(big));
                        memcpy(big, "TZif", 4);
                        tfw_write_file(d->fd, "etc/localtime", big, sizeof(big));
                }
                if (i == 3) /* a FIFO: never waited on */
                        assert_int_equal(mkfifoat(d->fd, "etc/localtime", 0644), 0);
                if (i == 4) /* a directory */
                        assert_int_equal(mkdirat(d->fd, "etc/localtime", 0755), 0);
                assert_int_equal(capsule_zone_read(d->fd, &z), 0);
                assert_utc(&z);
        }
        /* A dangling link into zoneinfo: UTC too, not the link's name. */
        _cleanup_(capsule_zone_done) CapsuleZone z = {};
        assert_int_equal(unlinkat(d->fd, "etc/localtime", AT_REMOVEDIR), 0);
        assert_int_equal(symlinkat("../usr/share/zoneinfo/Europe/Gone", d->fd, "etc/localtime"), 0);
        assert_int_equal(capsule_zone_read(d->fd, &z), 0);
        assert_utc(&z);
}

static char *read_at(int dir_fd, const char *name, size_t *size, mode_t *mode) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        char *text = NULL;
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &st), 0);
        *mode = st.st_mode & 07777;
        assert_int_equal(read_full_fd_bounded(fd, 1 << 20, &text, size), 0);
        return text;
}

/* Every file of the capsule's /etc, with its content and mode; the zone as glibc reads it. */
static void test_etc_write(void **state) {
        TestDir *d = *state;
        _cleanup_(capsule_zone_done) CapsuleZone z = {};
        const char *names[] = { "passwd", "group", "hosts", "nsswitch.conf", "host.conf", "localtime",
                                "timezone" };
        const char *want[] = { "root:x:0:0::/root:/bin/sh\n", "root:x:0:\n", NULL, NULL, "multi on\n",
                               NULL, "Europe/Testville\n" };
        char abbr[16], path[512];
        long off;

        make_host(d, "Europe/Testville", test_tzif, sizeof(test_tzif));
        assert_int_equal(symlinkat("../usr/share/zoneinfo/Europe/Testville", d->fd, "etc/localtime"), 0);
        assert_int_equal(capsule_zone_read(d->fd, &z), 0);
        assert_int_equal(mkdirat(d->fd, "out", 0755), 0);
        _cleanup_close_ int out = open_dir_at(d->fd, "out");
        assert_true(out >= 0);
        mode_t old = umask(077);
        assert_int_equal(capsule_etc_write(out, want[0], want[1], &z), 0);
        umask(old);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                size_t size;
                mode_t mode;
                _cleanup_free_ char *text = read_at(out, names[i], &size, &mode);
                assert_int_equal(mode, 0644);
                if (want[i])
                        assert_string_equal(text, want[i]);
                if (streq(names[i], "localtime"))
                        assert_memory_equal(text, test_tzif, sizeof(test_tzif));
                if (streq(names[i], "hosts")) {
                        assert_non_null(strstr(text, "127.0.0.1\tlocalhost\n"));
                        assert_non_null(strstr(text, "::1\tlocalhost ip6-localhost ip6-loopback\n"));
                        assert_non_null(strstr(text, "127.0.1.1\tcapsule\n"));
                }
                if (streq(names[i], "nsswitch.conf")) {
                        assert_non_null(strstr(text, "passwd:\tfiles\n"));
                        assert_non_null(strstr(text, "group:\tfiles\n"));
                        assert_non_null(strstr(text, "hosts:\tfiles dns\n"));
                }
        }
        snprintf(path, sizeof(path), "%s/out/localtime", d->path);
        zone_of(path, abbr, sizeof(abbr), &off);
        assert_string_equal(abbr, "TST");
        assert_int_equal(off, 3600);

        /* Files are made, never written through: a second write refuses. */
        assert_int_equal(capsule_etc_write(out, want[0], want[1], &z), -EEXIST);
}

/* The built-in UTC is a zone glibc reads as UTC; a zone without a name has no timezone file. */
static void test_etc_write_utc(void **state) {
        TestDir *d = *state;
        _cleanup_(capsule_zone_done) CapsuleZone z = {};
        char abbr[16], path[512];
        long off;

        make_host(d, NULL, NULL, 0);
        assert_int_equal(capsule_zone_read(d->fd, &z), 0);
        assert_utc(&z);
        assert_int_equal(capsule_etc_write(d->fd, "", "", &z), 0);
        snprintf(path, sizeof(path), "%s/localtime", d->path);
        zone_of(path, abbr, sizeof(abbr), &off);
        assert_string_equal(abbr, "UTC");
        assert_int_equal(off, 0);
        size_t size;
        mode_t mode;
        _cleanup_free_ char *tz = read_at(d->fd, "timezone", &size, &mode);
        assert_string_equal(tz, "Etc/UTC\n");

        z.name[0] = 0;
        assert_int_equal(mkdirat(d->fd, "nameless", 0755), 0);
        _cleanup_close_ int out = open_dir_at(d->fd, "nameless");
        assert_int_equal(capsule_etc_write(out, "", "", &z), 0);
        assert_int_equal(faccessat(out, "timezone", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(errno, ENOENT);
        assert_int_equal(faccessat(out, "localtime", F_OK, AT_SYMLINK_NOFOLLOW), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_zone_names),
                cmocka_unit_test_setup_teardown(test_zone_from_link, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_zone_from_copy, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_zone_fallback_utc, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_etc_write, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_etc_write_utc, tfw_tmpdir_setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
