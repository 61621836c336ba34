/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fd-util.h"
#include "macro.h"
#include "resolve.h"
#include "time-util.h"

int read_full_fd_bounded(int fd, size_t max, char **ret, size_t *ret_size) {
        _cleanup_free_ char *buf = NULL;
        size_t alloc, n = 0;

        if (max > SIZE_MAX / 2)
                return -EINVAL;
        /* Never trust st_size: it is only the attacker's claim. Grow as we read. */
        alloc = MIN(max + 2, (size_t) 4096);
        buf = malloc(alloc);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                if (n + 1 >= alloc) {
                        size_t want = MIN(alloc * 2, max + 2);
                        if (want <= alloc)
                                return -E2BIG;
                        char *nb = realloc(buf, want);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                        alloc = want;
                }
                /* Read at most up to max+1 bytes in total, never more. */
                size_t room = MIN(alloc - 1 - n, max + 1 - n);
                ssize_t k = read(fd, buf + n, room);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n > max)
                        return -E2BIG;
        }
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = n;
        return 0;
}

ssize_t read_available(int fd, void *buf, size_t size) {
        for (;;) {
                ssize_t n = read(fd, buf, size);
                if (n >= 0)
                        return n;
                if (errno == EAGAIN)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

int write_all(int fd, const void *buf, size_t len) {
        const char *p = buf;

        while (len > 0) {
                ssize_t k = write(fd, p, len);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -EIO;
                p += k;
                len -= (size_t) k;
        }
        return 0;
}

int flock_exclusive_within(int fd, uint64_t bound_usec) {
        usec_t deadline = now_monotonic() + bound_usec;
        while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK && errno != EINTR)
                        return -errno;
                if (now_monotonic() >= deadline)
                        return -ETIMEDOUT;
                (void) nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
        }
        return 0;
}

int fsync_fd(int fd) {
        if (fsync(fd) < 0)
                return -errno;
        return 0;
}

int tmp_file_name(const char *name, char *tmp) {
        uint64_t rnd;
        if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
                return -EIO;
        if (snprintf(tmp, NAME_MAX + 1, ".#%.200s.%016llx", name, (unsigned long long) rnd) >= NAME_MAX + 1)
                return -ENAMETOOLONG;
        return 0;
}

int tmp_file_open_at(int dir_fd, const char *name, char *tmp) {
        int r = tmp_file_name(name, tmp);
        if (r < 0)
                return r;
        int fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        return fd < 0 ? -errno : fd;
}

int tmp_file_commit_at(int dir_fd, const char *tmp, const char *name, int r) {
        if (r >= 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
                r = -errno;
        if (r < 0)
                (void) unlinkat(dir_fd, tmp, 0);
        return r;
}

/* Write through a temporary name renamed over name; durable: fsync the file before and the
 * directory after the rename. */
static int write_file_renamed_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode,
                                 uid_t uid, gid_t gid, bool durable) {
        char tmp[NAME_MAX + 1];
        int r;

        _cleanup_close_ int fd = tmp_file_open_at(dir_fd, name, tmp);
        if (fd < 0)
                return fd;
        r = write_all(fd, data, len);
        if (r >= 0 && (uid != (uid_t) -1 || gid != (gid_t) -1) && fchown(fd, uid, gid) < 0)
                r = -errno;
        if (r >= 0 && fchmod(fd, mode) < 0)
                r = -errno;
        if (r >= 0 && durable)
                r = fsync_fd(fd);
        r = tmp_file_commit_at(dir_fd, tmp, name, r);
        if (r < 0)
                return r;
        return durable ? fsync_fd(dir_fd) : 0;
}

int write_file_atomic_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode,
                         uid_t uid, gid_t gid) {
        return write_file_renamed_at(dir_fd, name, data, len, mode, uid, gid, true);
}

int write_file_replace_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode,
                          uid_t uid, gid_t gid) {
        return write_file_renamed_at(dir_fd, name, data, len, mode, uid, gid, false);
}

DIR *opendir_fd(int dir_fd) {
        int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return NULL;
        DIR *d = fdopendir(fd);
        if (!d) {
                int saved = errno;
                safe_close(fd);
                errno = saved;
                return NULL;
        }
        rewinddir(d); /* the copy shares dir_fd's position */
        return d;
}

int open_dir_at(int dir_fd, const char *name) {
        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

int open_dir_components(int dir_fd, const char *path) {
        _cleanup_close_ int cur = -EBADF;
        char comp[NAME_MAX + 1];
        size_t len = strlen(path);

        if (path[0] == '/')
                return -EINVAL;
        for (size_t i = 0; i < len;) {
                const char *slash = memchr(path + i, '/', len - i);
                size_t m = slash ? (size_t) (slash - (path + i)) : len - i;
                if (m == 0 || m > NAME_MAX || (m == 1 && path[i] == '.') || (m == 2 && path[i] == '.' && path[i + 1] == '.'))
                        return m > NAME_MAX ? -ENAMETOOLONG : -EINVAL;
                memcpy(comp, path + i, m);
                comp[m] = 0;
                int fd = openat(cur >= 0 ? cur : dir_fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                safe_close(cur);
                cur = fd;
                i += m + 1;
        }
        if (cur >= 0)
                return TAKE_FD(cur);
        int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        return fd < 0 ? -errno : fd;
}

int mkdtemp_fd(const char *base, const char *prefix, char **ret_path) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/%sXXXXXX", base, prefix) < 0)
                return -ENOMEM;
        if (!mkdtemp(path))
                return -errno;
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                int r = -errno;
                (void) rmdir(path);
                return r;
        }
        if (ret_path)
                *ret_path = TAKE_PTR(path);
        return fd;
}

int mount_root_at(int dir_fd, const char *name) {
        struct statx sx;
        /* No field asked for: a FUSE file system without allow_other answers EACCES to a
         * getattr even for root, and an empty mask never reaches it. */
        if (statx(dir_fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC, 0, &sx) < 0)
                return -errno;
        return (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) && (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

static int rm_rf_children_depth(int fd, unsigned depth) {
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        int r = 0;

        if (depth > 4096)
                return -ELOOP;
        d = opendir_fd(fd);
        if (!d)
                return -errno;
        while ((errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (unlinkat(fd, de->d_name, 0) >= 0 || errno == ENOENT)
                        continue;
                /* The first error is the one returned (an EXDEV deep down, not the ENOTEMPTY
                 * it causes on the way up). */
                if (errno != EISDIR && errno != EPERM) {
                        r = r < 0 ? r : -errno;
                        continue;
                }
                _cleanup_close_ int sub = openat_child_same_mount(fd, de->d_name, O_RDONLY | O_DIRECTORY);
                if (sub < 0) {
                        r = r < 0 ? r : sub;
                        continue;
                }
                int k = rm_rf_children_depth(sub, depth + 1);
                if (k < 0 && r >= 0)
                        r = k;
                if (unlinkat(fd, de->d_name, AT_REMOVEDIR) < 0 && errno != ENOENT && r >= 0)
                        r = -errno;
        }
        if (errno != 0 && r >= 0)
                r = -errno;
        return r;
}

int rm_rf_at(int dir_fd, const char *name) {
        if (unlinkat(dir_fd, name, 0) >= 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        /* A path (callers' own directories, "/tmp/x"): its last component is still checked. */
        _cleanup_close_ int fd = -EBADF;
        if (strchr(name, '/'))
                fd = mount_root_at(dir_fd, name) > 0 ? -EXDEV : open_dir_at(dir_fd, name);
        else
                fd = openat_child_same_mount(dir_fd, name, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd == -ENOENT ? 0 : fd;
        int r = rm_rf_children_depth(fd, 0);
        if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && r >= 0)
                r = -errno;
        return r;
}

int ensure_owner_mode(int fd, uid_t uid, gid_t gid, mode_t mode) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if ((st.st_uid != uid || st.st_gid != gid) && fchown(fd, uid, gid) < 0)
                return -errno;
        /* chown may clear set-id bits: look again before deciding about the mode. */
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((st.st_mode & 07777) != mode && fchmod(fd, mode) < 0)
                return -errno;
        return 0;
}

bool fd_is_open(int fd) {
        return fcntl(fd, F_GETFD) >= 0;
}

int close_all_fds_except(int first, const int *keep, size_t n_keep) {
        /* Sort-free approach: close ranges between kept fds. keep is small (stdio + a channel). */
        int lo = first;
        for (;;) {
                int next = INT_MAX;
                for (size_t i = 0; i < n_keep; i++)
                        if (keep[i] >= lo && keep[i] < next)
                                next = keep[i];
                if (next > lo) {
                        unsigned hi = next == INT_MAX ? ~0U : (unsigned) next - 1;
                        if (syscall(SYS_close_range, (unsigned) lo, hi, 0) < 0) {
                                if (errno != ENOSYS)
                                        return -errno;
                                long max = sysconf(_SC_OPEN_MAX);
                                for (long f = lo; f <= (long) hi && f < max; f++)
                                        (void) close((int) f);
                        }
                }
                if (next == INT_MAX)
                        return 0;
                lo = next + 1;
        }
}

int rm_rf_children(int dir_fd) {
        return rm_rf_children_depth(dir_fd, 0);
}
