/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "path-util.h"
#include "resolve.h"

#define RESOLVE_PATH (RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
#define RESOLVE_CHILD (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)

static long sys_openat2(int dfd, const char *name, uint64_t flags, uint64_t resolve) {
        struct open_how how = {.flags = flags, .resolve = resolve};
        return syscall(SYS_openat2, dfd, name, &how, sizeof(how));
}

bool openat2_usable(void) {
        /* ENOSYS from an old kernel or a filter, EPERM from older container profiles: either
         * way the fallback, which is never less strict, is used. */
        long fd = sys_openat2(AT_FDCWD, "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC, RESOLVE_PATH);
        if (fd < 0)
                return false;
        safe_close((int) fd);
        return true;
}

int openat_child(int dfd, const char *name, int flags, bool use_openat2) {
        long fd;

        if (!filename_is_valid(name))
                return -EINVAL;
        if (use_openat2)
                fd = sys_openat2(dfd, name, (uint64_t) (flags | O_NOFOLLOW | O_CLOEXEC), RESOLVE_CHILD);
        else
                fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : (int) fd;
}

int openat_child_same_mount(int dfd, const char *name, int flags) {
        if (!filename_is_valid(name))
                return -EINVAL;
        long fd = sys_openat2(dfd, name, (uint64_t) (flags | O_NOFOLLOW | O_CLOEXEC), RESOLVE_CHILD | RESOLVE_NO_XDEV);
        if (fd >= 0)
                return (int) fd;
        if (errno != ENOSYS && errno != EPERM)
                return -errno;
        /* No openat2: the mount-root attribute first (never reaching what is mounted), then
         * the open; a mount made in between is not caught here. */
        int r = mount_root_at(dfd, name);
        if (r > 0)
                return -EXDEV;
        if (r < 0 && r != -ENOSYS && r != -EINVAL)
                return r;
        fd = openat(dfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : (int) fd;
}

int open_dir_path_nofollow(const char *path, bool use_openat2) {
        const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

        if (!path_is_absolute_normalized(path))
                return -EINVAL;
        if (use_openat2) {
                /* No O_NOFOLLOW: with it a final symlink fails as ENOTDIR; without it,
                 * RESOLVE_NO_SYMLINKS refuses it (and every other symlink) with ELOOP. */
                long fd = sys_openat2(AT_FDCWD, path, flags & ~O_NOFOLLOW, RESOLVE_PATH);
                return fd < 0 ? -errno : (int) fd;
        }

        _cleanup_close_ int fd = open("/", flags);
        if (fd < 0)
                return -errno;
        for (const char *s = path + 1; *s;) {
                char comp[NAME_MAX + 1];
                const char *slash = strchr(s, '/');
                size_t n = slash ? (size_t) (slash - s) : strlen(s);

                if (n == 0 || n > NAME_MAX || (n == 1 && s[0] == '.') ||
                    (n == 2 && s[0] == '.' && s[1] == '.'))
                        return -EINVAL;
                memcpy(comp, s, n);
                comp[n] = 0;
                int next = openat(fd, comp, flags);
                if (next < 0) {
                        /* A symlink component fails with ENOTDIR under O_DIRECTORY (or ELOOP);
                         * report it as the loop it is, as openat2 does. */
                        int err = errno;
                        struct stat st;
                        if (err == ENOTDIR && fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) >= 0 &&
                            S_ISLNK(st.st_mode))
                                return -ELOOP;
                        return -err;
                }
                safe_close(fd);
                fd = next;
                s = slash ? slash + 1 : s + n;
        }
        return TAKE_FD(fd);
}
