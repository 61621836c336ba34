/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/path-util.h"
#include "common/resolve.h"
#include "common/root-dir.h"

/* The walked prefix of path for messages: "/" for the root, else its first n bytes. */
static const char *prefix_of(const char *path, size_t n, char *buf, size_t size) {
        if (n == 0)
                return "/";
        snprintf(buf, size, "%.*s", (int) n, path);
        return buf;
}

/* fd (path's first n bytes: an ancestor, or with n == strlen(path) the directory itself) is
 * not on a FUSE file system, whose owners and modes are whatever its server (possibly the
 * controller's, with user_allow_other) answers. */
static int refuse_fuse(const char *what, const char *path, int fd, size_t n, TfwError *e) {
        char shown[PATH_MAX];
        struct statfs sf;

        prefix_of(path, n, shown, sizeof(shown));
        if (fstatfs(fd, &sf) < 0)
                return tfw_error(e, errno, "bad_directory", "%s: cannot statfs '%s': %m", what, shown);
        if (sf.f_type != FUSE_SUPER_MAGIC)
                return 0;
        if (n == strlen(path))
                return tfw_error(e, EPERM, "bad_directory", "%s: '%s' is on a FUSE file system: its owner "
                                 "and mode are what its server says", what, path);
        return tfw_error(e, EPERM, "bad_directory", "%s: '%s' is below '%s', which is on a FUSE file system: "
                         "its owner and mode are what its server says", what, path, shown);
}

/* dir (path's first n bytes) is an ancestor: root's, writable by root only, not on FUSE. */
static int check_ancestor(const char *what, const char *path, int dir, size_t n, TfwError *e) {
        char shown[PATH_MAX];
        struct stat st;
        int r;

        if (fstat(dir, &st) < 0)
                return tfw_error(e, errno, "bad_directory", "%s: cannot stat '%s': %m", what,
                                 prefix_of(path, n, shown, sizeof(shown)));
        r = refuse_fuse(what, path, dir, n, e);
        if (r < 0)
                return r;
        if (!root_dir_is_private(st.st_uid, st.st_mode))
                return tfw_error(e, EPERM, "bad_directory",
                                 "%s: '%s' is below '%s', which is owned by %u:%u with mode %04o: every "
                                 "directory above it must be root's and writable by root only (a world-writable "
                                 "one such as /tmp is refused, sticky or not)",
                                 what, path, prefix_of(path, n, shown, sizeof(shown)), (unsigned) st.st_uid,
                                 (unsigned) st.st_gid, (unsigned) (st.st_mode & 07777));
        return 0;
}

/* Why openat_child() refused comp (path's first n bytes) below dir, as the user reads it. */
static int open_failed(const char *what, const char *path, int dir, const char *comp, size_t n, int r,
                       TfwError *e) {
        char shown[PATH_MAX];
        struct stat st;

        prefix_of(path, n, shown, sizeof(shown));
        if ((r == -ELOOP || r == -ENOTDIR) && fstatat(dir, comp, &st, AT_SYMLINK_NOFOLLOW) >= 0)
                return S_ISLNK(st.st_mode)
                               ? tfw_error(e, ELOOP, "bad_directory", "%s: '%s' is a symlink; symlinks are "
                                                                       "refused anywhere in '%s'", what, shown, path)
                               : tfw_error(e, ENOTDIR, "bad_directory", "%s: '%s' is not a directory",
                                           what, shown);
        if (r == -ENOENT)
                return tfw_error(e, ENOENT, "bad_directory", "%s: '%s' does not exist", what, shown);
        return tfw_error(e, -r, "bad_directory", "%s: cannot open '%s': %s", what, shown, strerror(-r));
}

int root_dir_open(const char *what, const char *path, bool create, uid_t uid, gid_t gid, mode_t mode,
                  bool *ret_created, TfwError *e) {
        const bool use_openat2 = openat2_usable();
        char comp[NAME_MAX + 1];
        int r;

        if (!path_is_absolute_normalized(path) || streq(path, "/"))
                return tfw_error(e, EINVAL, "bad_directory", "%s: '%s' is not an absolute, normalised path "
                                                             "below /", what, path);
        if (strlen(path) >= PATH_MAX)
                return tfw_error(e, ENAMETOOLONG, "bad_directory", "%s: '%s' is too long", what, path);
        _cleanup_close_ int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir < 0)
                return tfw_error(e, errno, "bad_directory", "%s: cannot open '/': %m", what);

        for (const char *s = path + 1;;) {
                const char *slash = strchr(s, '/');
                size_t n = slash ? (size_t) (slash - s) : strlen(s), walked = (size_t) (s - path) - 1;
                bool last = !slash, made = false;

                r = check_ancestor(what, path, dir, walked, e);
                if (r < 0)
                        return r;
                if (n > NAME_MAX)
                        return tfw_error(e, ENAMETOOLONG, "bad_directory", "%s: a component of '%s' is too "
                                                                           "long", what, path);
                memcpy(comp, s, n);
                comp[n] = 0;
                int next = openat_child(dir, comp, O_RDONLY | O_DIRECTORY, use_openat2);
                if (next == -ENOENT && create) {
                        /* Only root can write dir: no one else can have made, or can swap, comp. */
                        if (mkdirat(dir, comp, last ? 0700 : 0755) >= 0)
                                made = true;
                        else if (errno != EEXIST)
                                return tfw_error(e, errno, "bad_directory", "%s: cannot create '%.*s': %m",
                                                 what, (int) (walked + 1 + n), path);
                        next = openat_child(dir, comp, O_RDONLY | O_DIRECTORY, use_openat2);
                }
                if (next < 0)
                        return open_failed(what, path, dir, comp, walked + 1 + n, next, e);
                _cleanup_close_ int child = next;
                if (made) {
                        r = last ? ensure_owner_mode(child, uid, gid, mode) : ensure_owner_mode(child, 0, 0, 0755);
                        if (r < 0)
                                return tfw_error(e, -r, "bad_directory", "%s: cannot set up '%.*s': %s", what,
                                                 (int) (walked + 1 + n), path, strerror(-r));
                }
                if (last) {
                        r = refuse_fuse(what, path, child, strlen(path), e);
                        if (r < 0)
                                return r;
                        if (ret_created)
                                *ret_created = made;
                        return TAKE_FD(child);
                }
                safe_close(dir);
                dir = TAKE_FD(child);
                s = slash + 1;
        }
}
