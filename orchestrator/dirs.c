/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "orchestrator/dirs.h"

/* mkdir -p for the operator's configured path; existing components are left as they are. */
static int mkdir_parents(const char *path) {
        char buf[PATH_MAX];
        size_t n = strlen(path);

        if (n >= sizeof(buf))
                return -ENAMETOOLONG;
        memcpy(buf, path, n + 1);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        return 0;
}

/* Open an existing absolute directory without following a symlink in its last component and
 * check its owner, group and mode; the fd on success. Shared by worker_dirs_open and doctor. */
static int check_dir(const char *key, const char *path, uid_t uid, gid_t gid, mode_t mode,
                     TfwError *e) {
        struct stat st;
        int r;

        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return tfw_error(e, errno, "bad_directory",
                                 "key '%s': cannot open '%s' as a directory (symlinks are refused): %m",
                                 key, path);
        if (fstat(fd, &st) < 0) {
                r = -errno;
                safe_close(fd);
                return tfw_error(e, -r, "bad_directory", "key '%s': cannot stat '%s'", key, path);
        }
        if (st.st_uid != uid || st.st_gid != gid || (st.st_mode & 07777) != mode) {
                safe_close(fd);
                return tfw_error(e, EPERM, "bad_directory",
                                 "key '%s': '%s' is owned by %u:%u with mode %04o; it must be %u:%u with mode %04o",
                                 key, path, (unsigned) st.st_uid, (unsigned) st.st_gid,
                                 (unsigned) (st.st_mode & 07777), (unsigned) uid, (unsigned) gid,
                                 (unsigned) mode);
        }
        return fd;
}

/* Open (or create) an absolute directory and check its owner and mode. */
static int ensure_dir(const char *key, const char *path, uid_t uid, gid_t gid, mode_t mode,
                      TfwError *e) {
        int r;

        r = mkdir_parents(path);
        if (r < 0)
                return tfw_error(e, r, "bad_directory", "key '%s': cannot create the parents of '%s': %s",
                                 key, path, strerror(-r));
        if (mkdir(path, 0700) >= 0) {
                /* New: set owner first, then the mode (chown clears setgid). */
                if (chown(path, uid, gid) < 0 || chmod(path, mode) < 0)
                        return tfw_error(e, errno, "bad_directory", "key '%s': cannot set up '%s': %m",
                                         key, path);
        } else if (errno != EEXIST)
                return tfw_error(e, errno, "bad_directory", "key '%s': cannot create '%s': %m", key, path);

        return check_dir(key, path, uid, gid, mode, e);
}

/* A subdirectory the worker owns outright: created if missing, and repaired if its mode or
 * owner drifted (only root can have changed it, and the worker is its sole user). */
static int ensure_subdir(int parent_fd, const char *parent_key, const char *name, gid_t gid,
                         mode_t mode, TfwError *e) {

        /* Created with the final permission bits: in a setgid parent it inherits the group
         * and the setgid bit, so no chmod of a setgid mode is needed. */
        if (mkdirat(parent_fd, name, mode & 0777) < 0 && errno != EEXIST)
                return tfw_error(e, errno, "bad_directory", "key '%s': cannot create '%s': %m",
                                 parent_key, name);
        int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return tfw_error(e, errno, "bad_directory", "key '%s': cannot open '%s': %m",
                                 parent_key, name);
        int r = ensure_owner_mode(fd, 0, gid, mode);
        if (r < 0) {
                safe_close(fd);
                return tfw_error(e, -r, "bad_directory", "key '%s': cannot set up '%s': %s",
                                 parent_key, name, strerror(-r));
        }
        return fd;
}

void worker_dirs_close(WorkerDirs *d) {
        d->state_fd = safe_close(d->state_fd);
        d->requests_fd = safe_close(d->requests_fd);
        d->scratch_fd = safe_close(d->scratch_fd);
        d->results_fd = safe_close(d->results_fd);
        d->staging_fd = safe_close(d->staging_fd);
        d->rejected_fd = safe_close(d->rejected_fd);
}

int worker_runsc_root_open(const Config *c, char *buf, size_t size, TfwError *e) {
        char path[PATH_MAX];
        if (config_runsc_root(c, buf, size) < 0 || config_runsc_root(c, path, sizeof(path)) < 0)
                return tfw_error(e, ENAMETOOLONG, "bad_directory", "the runsc root of '%s' is too long", c->name);
        *strrchr(path, '/') = 0;
        /* Also the default results_dir's parent, made by whoever came first (the unit's
         * RuntimeDirectory=, mkdir_parents under any umask): root's, and writable by root only. */
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return tfw_error(e, errno, "bad_directory", "cannot create the runtime directory '%s': %m", path);
        _cleanup_close_ int run = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (run < 0 || fstat(run, &st) < 0)
                return tfw_error(e, errno, "bad_directory",
                                 "cannot open the runtime directory '%s' (symlinks are refused): %m", path);
        if (st.st_uid != 0 || (st.st_mode & 022))
                return tfw_error(e, EPERM, "bad_directory",
                                 "the runtime directory '%s' is owned by %u with mode %04o; it must be root's and "
                                 "writable by root only", path, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777));
        int fd = ensure_subdir(run, "runtime directory", "runsc", 0, 0700, e);
        if (fd < 0)
                return fd;
        safe_close(fd);
        return 0;
}

int worker_dirs_open(const Config *c, WorkerDirs *ret, TfwError *e) {
        WorkerDirs d = WORKER_DIRS_NULL;
        int r;

        r = d.state_fd = ensure_dir("state_dir", c->state_dir, 0, 0, STATE_DIR_MODE, e);
        if (r < 0)
                goto fail;
        r = d.results_fd = ensure_dir("results_dir", c->results_dir, 0, c->container_gid,
                                      RESULTS_DIR_MODE, e);
        if (r < 0)
                goto fail;
        r = d.requests_fd = ensure_subdir(d.state_fd, "state_dir", "requests", 0, 0700, e);
        if (r < 0)
                goto fail;
        r = d.scratch_fd = ensure_subdir(d.state_fd, "state_dir", "scratch", 0, 0700, e);
        if (r < 0)
                goto fail;
        r = d.staging_fd = ensure_subdir(d.results_fd, "results_dir", ".staging", c->container_gid, 02700, e);
        if (r < 0)
                goto fail;
        r = d.rejected_fd = ensure_subdir(d.results_fd, "results_dir", ".rejected", c->container_gid,
                                          02750, e);
        if (r < 0)
                goto fail;

        *ret = d;
        return 0;
fail:
        worker_dirs_close(&d);
        return r;
}

int worker_dir_check(const Config *c, bool results, TfwError *e) {
        int fd = results ? check_dir("results_dir", c->results_dir, 0, c->container_gid, RESULTS_DIR_MODE, e)
                         : check_dir("state_dir", c->state_dir, 0, 0, STATE_DIR_MODE, e);
        if (fd < 0)
                return fd;
        safe_close(fd);
        return 0;
}
