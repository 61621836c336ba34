/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/host-zone.h"
#include "common/fd-util.h"
#include "common/macro.h"

#define TIMEZONE_FILE_MAX 256

/* TZif version 1 with no transition and one type: offset 0, not DST, "UTC" (RFC 8536). glibc
 * reads it as the zone UTC; `date +%Z` says UTC. */
static const char utc_tzif[] = {
        'T', 'Z', 'i', 'f', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, /* isutcnt */ 0, 0, 0, 0, /* isstdcnt */ 0, 0, 0, 0, /* leapcnt */
        0, 0, 0, 0, /* timecnt */ 0, 0, 0, 1, /* typecnt */ 0, 0, 0, 4, /* charcnt */
        0, 0, 0, 0, 0, 0, /* utoff 0, isdst 0, desigidx 0 */
        'U', 'T', 'C', 0,
};

static bool zone_char_ok(char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '.' || c == '_' || c == '+' || c == '-';
}

bool capsule_zone_name_is_valid(const char *s) {
        size_t n = s ? strlen(s) : 0;

        if (n == 0 || n > CAPSULE_ZONE_NAME_MAX)
                return false;
        for (const char *p = s; *p;) {
                size_t k = strcspn(p, "/");
                if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                for (size_t i = 0; i < k; i++)
                        if (!zone_char_ok(p[i]))
                                return false;
                p += k;
                if (*p == '/' && !*++p)
                        return false; /* a trailing '/' */
        }
        return true;
}

/* The name after the last "zoneinfo/" of /etc/localtime's link target, into buf; "" when it is
 * not a link or names no zone. */
static void name_from_link(int root_fd, char *buf, size_t size) {
        char target[PATH_MAX];
        const char *name = NULL;

        buf[0] = 0;
        ssize_t k = readlinkat(root_fd, "etc/localtime", target, sizeof(target) - 1);
        if (k <= 0)
                return;
        target[k] = 0;
        for (char *p = target; (p = strstr(p, "zoneinfo/")); p++)
                if (p == target || p[-1] == '/')
                        name = p + strlen("zoneinfo/");
        if (name && capsule_zone_name_is_valid(name) && strlen(name) < size)
                strcpy(buf, name);
}

/* The first line of etc/timezone into buf; "" when there is none we trust. */
static void name_from_timezone(int root_fd, char *buf, size_t size) {
        _cleanup_close_ int fd = openat(root_fd, "etc/timezone",
                                        O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        _cleanup_free_ char *text = NULL;
        struct stat st;

        buf[0] = 0;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
            read_full_fd_bounded(fd, TIMEZONE_FILE_MAX, &text, NULL) < 0)
                return;
        text[strcspn(text, "\n")] = 0;
        if (capsule_zone_name_is_valid(text) && strlen(text) < size)
                strcpy(buf, text);
}

/* The TZif bytes of etc/localtime: 0, -ENOMEM, or another negative errno for a file that is
 * missing or no zone. */
static int read_tzif(int root_fd, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = openat(root_fd, "etc/localtime",
                                        O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        _cleanup_free_ char *data = NULL;
        struct stat st;
        size_t n;
        int r;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        r = read_full_fd_bounded(fd, CAPSULE_ZONE_MAX_BYTES, &data, &n);
        if (r < 0)
                return r;
        if (n < 44 || memcmp(data, "TZif", 4) != 0)
                return -EBADMSG;
        *ret = TAKE_PTR(data);
        *ret_size = n;
        return 0;
}

int capsule_zone_read(int root_fd, CapsuleZone *ret) {
        CapsuleZone z = {};
        int r;

        r = read_tzif(root_fd, &z.tzif, &z.size);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                z.tzif = malloc(sizeof(utc_tzif));
                if (!z.tzif)
                        return -ENOMEM;
                memcpy(z.tzif, utc_tzif, sizeof(utc_tzif));
                z.size = sizeof(utc_tzif);
                strcpy(z.name, CAPSULE_ZONE_UTC_NAME);
                *ret = z;
                return 0;
        }
        z.from_host = true;
        name_from_link(root_fd, z.name, sizeof(z.name));
        if (!z.name[0])
                name_from_timezone(root_fd, z.name, sizeof(z.name));
        *ret = z;
        return 0;
}

void capsule_zone_done(CapsuleZone *z) {
        free(z->tzif);
        *z = (CapsuleZone) {};
}
