/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/init-path.h"
#include "common/path-util.h"

#define INIT_NAME "tentaflake-capsule-init"

int capsule_find_init(char *buf, size_t size, TfwError *e) {
        return capsule_find_helper(INIT_NAME, "capsule init", buf, size, e);
}

int capsule_find_helper(const char *name, const char *what, char *buf, size_t size, TfwError *e) {
        char exe[PATH_MAX];
        struct stat st;
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

        buf[0] = 0;
        if (n > 0) {
                exe[n] = 0;
                char *slash = strrchr(exe, '/');
                if (slash) {
                        *slash = 0;
                        if (path_join_buf(buf, size, exe, name) < 0 || stat(buf, &st) < 0)
                                buf[0] = 0;
                }
        }
        if (!buf[0] && path_join_buf(buf, size, TFW_LIBEXECDIR, name) < 0)
                return tfw_error(e, ENAMETOOLONG, "capsule_setup", "the %s path is too long", what);
        if (stat(buf, &st) < 0)
                return tfw_error(e, errno, "capsule_setup",
                                 "the %s '%s' is missing: %m (this worker looks beside itself, then in "
                                 "%s, the libexec directory it was built for: install with the PREFIX it was built "
                                 "with, e.g. 'make install PREFIX=/usr', which rebuilds what names that path)",
                                 what, buf, TFW_LIBEXECDIR);
        if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
                return tfw_error(e, EPERM, "capsule_setup",
                                 "the %s '%s' must be a root-owned file writable only by root", what, buf);
        return 0;
}
