/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/root-dir.h"
#include "snapshot/gen-store.h"
#include "orchestrator/scratch.h"

int scratch_tmpfs_detached(const char *source, const char *size, const char *inodes, bool inode64, const char *what,
                          TfwError *e) {
        _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0)
                return tfw_error(e, errno, "scratch_tmpfs", "cannot open a tmpfs: %m");
        if (fsconfig(fs, FSCONFIG_SET_STRING, "source", source, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", inodes, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
            (inode64 && fsconfig(fs, FSCONFIG_SET_FLAG, "inode64", NULL, 0) < 0) ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return tfw_error(e, errno, "scratch_tmpfs", "cannot configure the %s tmpfs: %m", what);
        int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (mnt < 0)
                return tfw_error(e, errno, "scratch_tmpfs", "cannot mount the %s tmpfs: %m", what);
        return mnt;
}

int scratch_private_tmpfs(WorkerDirs *dirs, const char *state_dir, TfwError *e) {
        _cleanup_close_ int mnt = -EBADF;
        struct statfs sf;
        int fd, r;

        /* unshare() moves only the calling thread of a threaded process: refused then. */
        _cleanup_closedir_ DIR *tasks = opendir("/proc/self/task");
        unsigned n_tasks = 0;
        for (struct dirent *de; tasks && (de = readdir(tasks));)
                n_tasks += de->d_name[0] != '.';
        if (n_tasks != 1)
                return tfw_error(e, EBUSY, "scratch_tmpfs", "the worker has %u threads (or /proc is missing); "
                                 "a mount namespace of its own needs one", n_tasks);
        if (unshare(CLONE_NEWNS) < 0)
                return tfw_error(e, errno, "scratch_tmpfs", "cannot enter a mount namespace of its own: %m");
        /* Ours stay ours; the host's still come in (a workspace mounted later, /run). */
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                return tfw_error(e, errno, "scratch_tmpfs", "cannot make the mounts of its namespace private: %m");

        mnt = scratch_tmpfs_detached("tentaflake-scratch", SCRATCH_TMPFS_SIZE, SCRATCH_TMPFS_INODES, false, "scratch", e);
        if (mnt < 0)
                return mnt;
        /* The fds dirs_open made name the directories in the namespace left behind: the
         * same directories, looked up again here and checked to be those. */
        _cleanup_close_ int state = root_dir_open("key 'state_dir'", state_dir, false, 0, 0, 0, NULL, e);
        if (state < 0) {
                tfw_error_prefix(e, "cannot open state_dir again: ");
                return state;
        }
        fd = open_dir_at(state, "scratch");
        if (fd < 0)
                return tfw_error(e, -fd, "scratch_tmpfs", "cannot open state_dir/scratch again: %s", strerror(-fd));
        struct stat a, b;
        if (fstat(fd, &a) < 0 || fstat(dirs->scratch_fd, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
                safe_close(fd);
                return tfw_error(e, EXDEV, "scratch_tmpfs", "state_dir/scratch changed while the worker started");
        }
        r = move_mount(mnt, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
        safe_close(fd);
        if (r < 0)
                return tfw_error(e, errno, "scratch_tmpfs", "cannot mount the scratch tmpfs on state_dir/scratch: %m");

        /* From here on the tmpfs; or, when it cannot be opened, none at all: the caller goes
         * on with the directory below, which runsc must then see too. */
        fd = open_dir_at(state, "scratch");
        if (fd < 0 || fstatfs(fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC) {
                r = fd < 0 ? fd : -EXDEV;
                safe_close(fd);
                char path[PATH_MAX];
                if (snprintf(path, sizeof(path), "%s/scratch", state_dir) < (int) sizeof(path))
                        (void) umount2(path, MNT_DETACH);
                return tfw_error(e, -r, "scratch_tmpfs", "state_dir/scratch is not the tmpfs just mounted: %s",
                                 strerror(-r));
        }
        safe_close(dirs->scratch_fd);
        dirs->scratch_fd = fd;
        return 0;
}

unsigned scratch_store_lanes(const Config *c) {
        return MIN((unsigned) c->concurrency + 1, (unsigned) GEN_STORE_LANES_MAX);
}

int scratch_store_path(const Config *c, char *buf, size_t size) {
        int n = snprintf(buf, size, "%s/" SCRATCH_STORE_NAME, c->state_dir);
        return n > 0 && (size_t) n < size ? 0 : -ENAMETOOLONG;
}
