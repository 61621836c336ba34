/* SPDX-License-Identifier: MIT */
/* Landlock for the job (capsule-init/landlock.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "capsule-init/landlock.h"

/* The rights of later ABIs, for headers older than them (Debian 12's knows ABI 2). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

#define FS_ABI1 ((LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1) /* EXECUTE .. MAKE_SYM, bits 0-12 */
#define FS_READ (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define FS_DEVICE (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)

/* The devices a job may write: the memory devices with their ioctls too (isatty(3) on a
 * redirection to /dev/null asks one), the terminal without (TIOCSTI and the like). */
static const struct {
        const char *path;
        uint64_t rights;
} devices[] = {
        { "/dev/null", FS_DEVICE | LANDLOCK_ACCESS_FS_IOCTL_DEV },
        { "/dev/zero", FS_DEVICE | LANDLOCK_ACCESS_FS_IOCTL_DEV },
        { "/dev/full", FS_DEVICE | LANDLOCK_ACCESS_FS_IOCTL_DEV },
        { "/dev/random", FS_DEVICE | LANDLOCK_ACCESS_FS_IOCTL_DEV },
        { "/dev/urandom", FS_DEVICE | LANDLOCK_ACCESS_FS_IOCTL_DEV },
        { "/dev/tty", FS_DEVICE },
};

/* Every filesystem right the kernel's ABI knows (ABI 4 added network rights, 6 scopes, 7
 * logging: none of them a filesystem right). */
static uint64_t fs_rights(long abi) {
        uint64_t r = FS_ABI1;
        if (abi >= 2)
                r |= LANDLOCK_ACCESS_FS_REFER;
        if (abi >= 3)
                r |= LANDLOCK_ACCESS_FS_TRUNCATE;
        if (abi >= 5)
                r |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
        return r;
}

static int fail(char *err, size_t err_size, int r, const char *step, const char *path) {
        if (err_size > 0)
                snprintf(err, err_size, "%s%s%s%s", step, path ? " '" : "", path ? path : "", path ? "'" : "");
        return r;
}

/* rights beneath path (on it, for a file). -ENOENT when it is not there (the caller decides). */
static int add_path(int ruleset, const char *path, uint64_t rights) {
        int fd = open(path, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct landlock_path_beneath_attr rule = { .allowed_access = rights, .parent_fd = fd };
        int r = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0 ? -errno : 0;
        close(fd);
        return r;
}

/* rights beneath the directory fd is open on. */
static int add_fd(int ruleset, int fd, uint64_t rights) {
        struct landlock_path_beneath_attr rule = { .allowed_access = rights, .parent_fd = fd };
        return syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0 ? -errno : 0;
}

static int add_rules(int ruleset, uint64_t handled, const char *const *writable, size_t n_writable,
                     const int *readable_fds, size_t n_readable, char *err, size_t err_size) {
        int r = add_path(ruleset, "/", FS_READ & handled);
        if (r < 0)
                return fail(err, err_size, r, "cannot grant reading beneath", "/");
        for (size_t i = 0; i < n_readable; i++)
                if (readable_fds[i] >= 0 &&
                    (r = add_fd(ruleset, readable_fds[i], (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR) & handled)) < 0)
                        return fail(err, err_size, r, "cannot grant reading beneath a directory init keeps open", NULL);
        for (size_t i = 0; i < n_writable; i++)
                if ((r = add_path(ruleset, writable[i], handled)) < 0)
                        return fail(err, err_size, r, "cannot grant writing beneath", writable[i]);
        for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++)
                if ((r = add_path(ruleset, devices[i].path, devices[i].rights & handled)) < 0 && r != -ENOENT)
                        return fail(err, err_size, r, "cannot grant writing to", devices[i].path);
        return 0;
}

int capsule_landlock_apply(const char *const *writable, size_t n_writable, const int *readable_fds, size_t n_readable,
                           char *err, size_t err_size) {
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        if (abi < 0)
                return fail(err, err_size, -errno, "Landlock is not available in this kernel", NULL);
        if (abi == 0)
                return fail(err, err_size, -EOPNOTSUPP, "Landlock is not available in this kernel", NULL);
        uint64_t handled = fs_rights(abi);
        struct landlock_ruleset_attr attr = { .handled_access_fs = handled };
        int ruleset = (int) syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
        if (ruleset < 0)
                return fail(err, err_size, -errno, "cannot create the Landlock ruleset", NULL);
        int r = add_rules(ruleset, handled, writable, n_writable, readable_fds, n_readable, err, err_size);
        /* Required for an unprivileged thread; init has it since its start. */
        if (r >= 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                r = fail(err, err_size, -errno, "cannot set no_new_privs", NULL);
        if (r >= 0 && syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
                r = fail(err, err_size, -errno, "cannot enforce the Landlock ruleset", NULL);
        close(ruleset);
        return r < 0 ? r : (int) abi;
}
