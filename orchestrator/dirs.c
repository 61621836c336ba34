/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/root-dir.h"
#include "orchestrator/dirs.h"

/* fd's owner, group and mode are exactly uid:gid mode; otherwise a message naming key and path. */
static int check_owner_mode(const char *key, const char *path, int fd, uid_t uid, gid_t gid, mode_t mode,
                            TfwError *e) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return tfw_error(e, errno, "bad_directory", "key '%s': cannot stat '%s': %m", key, path);
        if (st.st_uid != uid || st.st_gid != gid || (st.st_mode & 07777) != mode)
                return tfw_error(e, EPERM, "bad_directory",
                                 "key '%s': '%s' is owned by %u:%u with mode %04o; it must be %u:%u with mode %04o",
                                 key, path, (unsigned) st.st_uid, (unsigned) st.st_gid,
                                 (unsigned) (st.st_mode & 07777), (unsigned) uid, (unsigned) gid,
                                 (unsigned) mode);
        return 0;
}

/* Open (create, with create) one of the configured directories by descriptor from "/"
 * (common/root-dir.h: no symlink anywhere, every ancestor root's alone) and check its owner and
 * mode; the fd on success. Shared by worker_dirs_open and doctor (which creates nothing). */
static int open_dir(const char *key, const char *path, bool create, uid_t uid, gid_t gid, mode_t mode,
                    TfwError *e) {
        char what[64];
        snprintf(what, sizeof(what), "key '%s'", key);
        _cleanup_close_ int fd = root_dir_open(what, path, create, uid, gid, mode, NULL, e);
        if (fd < 0)
                return fd;
        int r = check_owner_mode(key, path, fd, uid, gid, mode, e);
        if (r < 0)
                return r;
        return TAKE_FD(fd);
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
        d->store_fd = safe_close(d->store_fd);
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
         * RuntimeDirectory=, or root_dir_open here or for results_dir, 0755 whatever the umask):
         * root's, and writable by root only, reached by descriptor from "/". */
        _cleanup_close_ int run = root_dir_open("the runtime directory", path, true, 0, 0, 0755, NULL, e);
        if (run < 0)
                return run;
        struct stat st;
        if (fstat(run, &st) < 0)
                return tfw_error(e, errno, "bad_directory", "cannot stat the runtime directory '%s': %m", path);
        if (!root_dir_is_private(st.st_uid, st.st_mode))
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

        r = d.state_fd = open_dir("state_dir", c->state_dir, true, 0, 0, STATE_DIR_MODE, e);
        if (r < 0)
                goto fail;
        r = d.results_fd = open_dir("results_dir", c->results_dir, true, 0, c->container_gid,
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
        int fd = results ? open_dir("results_dir", c->results_dir, false, 0, c->container_gid, RESULTS_DIR_MODE, e)
                         : open_dir("state_dir", c->state_dir, false, 0, 0, STATE_DIR_MODE, e);
        if (fd < 0)
                return fd;
        safe_close(fd);
        return 0;
}
