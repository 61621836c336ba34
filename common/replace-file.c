/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/replace-file.h"

int write_file_replace_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode,
                          uid_t uid, gid_t gid) {
        char tmp[NAME_MAX + 1];
        uint64_t rnd;
        int r;

        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -EIO;
        if (snprintf(tmp, sizeof(tmp), ".#%.200s.%016llx", name, (unsigned long long) rnd) >=
            (int) sizeof(tmp))
                return -ENAMETOOLONG;

        _cleanup_close_ int fd =
                openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        r = write_all(fd, data, len);
        if (r >= 0 && (uid != (uid_t) -1 || gid != (gid_t) -1) && fchown(fd, uid, gid) < 0)
                r = -errno;
        if (r >= 0 && fchmod(fd, mode) < 0)
                r = -errno;
        if (r >= 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(dir_fd, tmp, 0);
        return r;
}
