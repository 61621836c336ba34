/* SPDX-License-Identifier: MIT */
/* The shell prefix's program, checked (harness-prefix.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/root-dir.h"
#include "controller/harness-prefix.h"

/* dir/name, with dir's real path: only root may change any directory of it, nor the name. 0 with
 * *ret_st (the name's own, not followed), or a negative errno with e set. */
static int check_entry(const char *what, const char *dir, const char *name, struct stat *ret_st, TfwError *e) {
        _cleanup_free_ char *real = realpath(dir, NULL);
        if (!real)
                return tfw_error(e, errno, "bad_prefix", "%s: cannot resolve '%s': %m", what, dir);
        struct stat st;
        _cleanup_close_ int fd = -EBADF;
        if (!streq(real, "/") && (fd = root_dir_open(what, real, false, 0, 0, 0, NULL, e)) < 0)
                return fd;
        if (streq(real, "/") && (fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                return tfw_error(e, errno, "bad_prefix", "%s: cannot open '/': %m", what);
        if (fstat(fd, &st) < 0)
                return tfw_error(e, errno, "bad_prefix", "%s: cannot stat '%s': %m", what, real);
        if (!root_dir_is_private(st.st_uid, st.st_mode))
                return tfw_error(e, EPERM, "bad_prefix", "%s: '%s' is not root's alone (owner %u, mode %04o): whoever can "
                                 "write it could replace the prefix", what, real, (unsigned) st.st_uid, st.st_mode & 07777);
        if (fstatat(fd, name, ret_st, AT_SYMLINK_NOFOLLOW) < 0)
                return tfw_error(e, errno, "bad_prefix", "%s: '%s/%s': %m", what, real, name);
        if (ret_st->st_uid != 0)
                return tfw_error(e, EPERM, "bad_prefix", "%s: '%s/%s' is not root's", what, real, name);
        return 0;
}

/* The program a link leads to: a regular file of root's that nobody else can write, executable,
 * in directories only root can change. */
static int check_target(const char *what, const char *link, TfwError *e) {
        _cleanup_free_ char *real = realpath(link, NULL), *copy = NULL;
        if (!real)
                return tfw_error(e, errno, "bad_prefix", "%s: cannot resolve '%s': %m", what, link);
        if (!(copy = strdup(real)))
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        struct stat st;
        int r = check_entry(what, dirname(copy), strrchr(real, '/') + 1, &st, e);
        if (r < 0)
                return r;
        if (!S_ISREG(st.st_mode) || (st.st_mode & 022) || !(st.st_mode & 0111))
                return tfw_error(e, EPERM, "bad_prefix", "%s: '%s' is not a program only root can write (mode %04o)", what,
                                 real, st.st_mode & 07777);
        return 0;
}

int harness_prefix_program(const char *path, const char *exe, char **ret, TfwError *e) {
        _cleanup_free_ char *given = NULL, *dir = NULL, *out = NULL;
        const char *what = path ? "--prefix-program" : "the shell prefix";
        if (path ? !(given = strdup(path)) : asprintf(&given, "%.*s/" HARNESS_PREFIX_NAME,
                                                      (int) (strrchr(exe, '/') - exe), exe) < 0) {
                given = NULL; /* undefined after a failure: not to be freed */
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        }
        const char *slash = strrchr(given, '/');
        if (*given != '/' || !slash || !streq(slash + 1, HARNESS_PREFIX_NAME))
                return tfw_error(e, EINVAL, "bad_prefix", "%s: '%s' is not an absolute path ending in '" HARNESS_PREFIX_NAME
                                 "' (the name runs the worker as its shell)", what, given);
        if (!(dir = strndup(given, (size_t) MAX(slash - given, 1))))
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        struct stat st;
        int r = check_entry(what, dir, HARNESS_PREFIX_NAME, &st, e);
        if (r == -ENOENT && !path)
                return tfw_error(e, ENOENT, "bad_prefix", "no '%s' beside this program: the prefix must be a program only "
                                 "root can change ('make install' or the package puts it there; or give --prefix-program)",
                                 given);
        if (r >= 0)
                r = S_ISLNK(st.st_mode) || S_ISREG(st.st_mode) ? check_target(what, given, e)
                                                                : tfw_error(e, EPERM, "bad_prefix", "%s: '%s' is not a program",
                                                                            what, given);
        if (r < 0)
                return r;
        _cleanup_free_ char *real = realpath(dir, NULL);
        if (!real || asprintf(&out, "%s%s" HARNESS_PREFIX_NAME, real, streq(real, "/") ? "" : "/") < 0) {
                out = NULL;
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        }
        *ret = TAKE_PTR(out);
        return 0;
}
