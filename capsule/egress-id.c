/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/egress-id.h"
#include "common/fd-util.h"
#include "common/root-dir.h"
#include "parser/config.h"

/* The largest buffer a user or group record may ask for (a group of many members). */
#define NSS_BUFFER_MAX (1024 * 1024)

void egress_id_init(EgressId *id) {
        *id = (EgressId) { .lock_fd = -EBADF };
}

void egress_id_release(EgressId *id) {
        id->lock_fd = safe_close(id->lock_fd);
        id->uid = 0;
}

void egress_id_abandon(EgressId *id) {
        id->lock_fd = -EBADF; /* not closed: the lock lives with this process */
        id->uid = 0;
}

/* Does the user (user) or group database name id? 1 yes, 0 no, a negative errno when the lookup
 * failed (the database cannot say: an unreachable directory service). The _r functions report
 * "not found" as 0 with no entry, or as one of ENOENT, ESRCH, EBADF and EPERM (getpwuid_r(3)). */
static int nss_names(bool user, uint32_t id) {
        size_t size = 16384;

        for (;;) {
                _cleanup_free_ char *buf = malloc(size);
                struct passwd pw, *pwp = NULL;
                struct group gr, *grp = NULL;
                if (!buf)
                        return -ENOMEM;
                int r = user ? getpwuid_r((uid_t) id, &pw, buf, size, &pwp)
                             : getgrgid_r((gid_t) id, &gr, buf, size, &grp);
                if (r == ERANGE && size < NSS_BUFFER_MAX) {
                        size *= 2;
                        continue;
                }
                if (r == 0)
                        return (user ? pwp != NULL : grp != NULL) ? 1 : 0;
                if (r == ENOENT || r == ESRCH || r == EBADF || r == EPERM)
                        return 0;
                return -r;
        }
}

/* Byte k of fd: F_WRLCK to take it (1 taken, 0 another holds it), F_UNLCK to give it back. */
static int lock_byte(int fd, uint32_t k, short type) {
        struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = (off_t) k, .l_len = 1 };
        if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
                return 1;
        return errno == EAGAIN || errno == EACCES ? 0 : -errno;
}

int egress_id_take_at(int dir_fd, uint32_t first, uint32_t count, EgressId *ret, TfwError *e) {
        unsigned held = 0, named = 0, unknown = 0;
        int lookup_error = 0;
        struct stat st;

        if (count == 0 || first > UINT32_MAX - (count - 1))
                return tfw_error(e, EINVAL, "capsule_setup", "egress: an empty range of proxy ids");
        _cleanup_close_ int fd = openat(dir_fd, EGRESS_ID_LOCK, O_CREAT | O_RDWR | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC,
                                        0600);
        if (fd < 0 || fstat(fd, &st) < 0)
                return tfw_error(e, errno, "capsule_setup", "egress: cannot open the proxies' lock file '%s': %m",
                                 EGRESS_ID_LOCK);
        if (!S_ISREG(st.st_mode))
                return tfw_error(e, EBADF, "capsule_setup", "egress: the proxies' lock file '%s' is not a regular file",
                                 EGRESS_ID_LOCK);
        /* A random first candidate, then the ones after it in turn (wrapping): each id is tried
         * at most once, so a range of at most EGRESS_ID_TRIES ids is tried whole (random
         * candidates missed its last free id now and then: 1.6 % of the time for 16 of 16). */
        uint32_t start = 0;
        if (getrandom(&start, sizeof(start), 0) != (ssize_t) sizeof(start))
                return tfw_error(e, errno, "capsule_setup", "egress: getrandom: %m");
        unsigned tries = MIN((uint32_t) EGRESS_ID_TRIES, count);
        for (unsigned i = 0; i < tries; i++) {
                uint32_t k = (uint32_t) (((uint64_t) start + i) % count), uid = first + k;
                int r = lock_byte(fd, k, F_WRLCK);
                if (r < 0)
                        return tfw_error(e, -r, "capsule_setup", "egress: cannot lock the proxy id %" PRIu32 ": %s",
                                         uid, strerror(-r));
                if (r == 0) {
                        held++;
                        continue;
                }
                int u = nss_names(true, uid), g = u == 0 ? nss_names(false, uid) : 0;
                if (u == 0 && g == 0) {
                        *ret = (EgressId) { .uid = (uid_t) uid, .lock_fd = TAKE_FD(fd) };
                        return 0;
                }
                /* Someone's, or the database cannot say: never ours. */
                if (u > 0 || g > 0)
                        named++;
                else {
                        unknown++;
                        if (!lookup_error)
                                lookup_error = u < 0 ? -u : -g;
                }
                r = lock_byte(fd, k, F_UNLCK);
                if (r < 0)
                        return tfw_error(e, -r, "capsule_setup", "egress: cannot unlock the proxy id %" PRIu32 ": %s",
                                         uid, strerror(-r));
        }
        if (unknown > 0 && held + named == 0)
                return tfw_error(e, lookup_error, "capsule_setup",
                                 "egress: no proxy id could be taken in %" PRIu32 "..%" PRIu32 ": the user database "
                                 "could not say whether %u of them belong to a user or group (%s)",
                                 first, first + (count - 1), unknown, strerror(lookup_error));
        return tfw_error(e, EBUSY, "capsule_setup",
                         "egress: no free proxy id in %" PRIu32 "..%" PRIu32 ": %u tried, %u held by other "
                         "proxies, %u the id of a user or group, %u unknown to a failing user database",
                         first, first + (count - 1), tries, held, named, unknown);
}

int egress_id_take(EgressId *ret, TfwError *e) {
        TfwError de = {0};
        struct stat st;

        _cleanup_close_ int dir_fd = root_dir_open("the egress proxies' lock directory", EGRESS_ID_DIR, true, 0, 0,
                                                   0700, NULL, &de);
        if (dir_fd == -EROFS)
                return tfw_error(e, EROFS, "capsule_setup", "egress: %s (under systemd the network drop-in gives it: "
                                 "RuntimeDirectory=tentaflake-egress-ids, docs/install.md, \"Network for jobs\")",
                                 de.message);
        if (dir_fd < 0)
                return tfw_error(e, -dir_fd, "capsule_setup", "egress: %s", de.message);
        if (fstat(dir_fd, &st) < 0)
                return tfw_error(e, errno, "capsule_setup", "egress: cannot stat '%s': %m", EGRESS_ID_DIR);
        if (!root_dir_is_private(st.st_uid, st.st_mode))
                return tfw_error(e, EPERM, "capsule_setup", "egress: '%s' (owner %u, mode %04o) must be root's and "
                                 "writable by nobody else: whoever can write it can hold or free the proxies' ids",
                                 EGRESS_ID_DIR, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777));
        return egress_id_take_at(dir_fd, CONFIG_EGRESS_ID_FIRST, CONFIG_EGRESS_ID_COUNT, ret, e);
}
