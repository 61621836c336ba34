/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/exec-path.h"
#include "common/macro.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static int try_dir(const char *dir, const char *name, char **ret) {
        _cleanup_free_ char *p = NULL;
        struct stat st;

        if (dir[0] != '/')
                return -ENOENT; /* a relative entry would depend on our cwd */
        if (asprintf(&p, "%s/%s", dir, name) < 0)
                return -ENOMEM;
        if (stat(p, &st) < 0 || !S_ISREG(st.st_mode) || access(p, X_OK) < 0)
                return -ENOENT;
        *ret = TAKE_PTR(p);
        return 0;
}

int find_executable(const char *name, const char *const *first, char **ret) {
        const char *path = getenv("PATH");
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;
        int r;

        if (!name || !*name || strchr(name, '/'))
                return -EINVAL;
        for (; first && *first; first++) {
                r = try_dir(*first, name, ret);
                if (r != -ENOENT)
                        return r;
        }
        copy = strdup(path && *path ? path : DEFAULT_PATH);
        if (!copy)
                return -ENOMEM;
        for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                r = try_dir(d, name, ret);
                if (r != -ENOENT)
                        return r;
        }
        return -ENOENT;
}
