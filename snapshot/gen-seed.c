/* SPDX-License-Identifier: MIT */
/* A lane's first generation from another lane's. See gen-seed.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "gen-check.h"
#include "gen-seed.h"
#include "snapshot.h"

#define SEED_DEPTH_MAX 512
#define INDEX_MAX (1u << 30)

static int clone_dir(int src, int dst, unsigned depth);

/* One entry of src into dst: a directory made and filled, a file linked. */
static int clone_entry(int src, int dst, const char *name, unsigned depth) {
        struct stat st;
        if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (S_ISREG(st.st_mode))
                return linkat(src, name, dst, name, 0) < 0 ? -errno : 0;
        if (!S_ISDIR(st.st_mode))
                return -EBADMSG; /* a generation holds files and directories only */
        if (mkdirat(dst, name, 0700) < 0)
                return -errno;
        _cleanup_close_ int s = open_dir_at(src, name);
        _cleanup_close_ int d = s >= 0 ? open_dir_at(dst, name) : s;
        if (d < 0)
                return d;
        int r = clone_dir(s, d, depth + 1);
        if (r < 0)
                return r;
        struct timespec times[2] = { st.st_atim, st.st_mtim };
        if (fchown(d, st.st_uid, st.st_gid) < 0 || fchmod(d, st.st_mode & 07777) < 0 || futimens(d, times) < 0)
                return -errno;
        return 0;
}

static int clone_dir(int src, int dst, unsigned depth) {
        if (depth > SEED_DEPTH_MAX)
                return -ELOOP;
        _cleanup_closedir_ DIR *d = opendir_fd(src);
        if (!d)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(d));) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                int r = clone_entry(src, dst, de->d_name, depth);
                if (r < 0)
                        return r;
        }
        return errno ? -errno : 0;
}

/* The source's index, copied byte for byte (gen_index_save's file: it is loaded, bounded, by the
 * walk that follows). */
static int copy_index(int from_lane, int to_lane) {
        _cleanup_close_ int fd = openat(from_lane, GEN_LANE_INDEX, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        if (fd < 0)
                return -errno;
        int r = read_full_fd_bounded(fd, INDEX_MAX, &buf, &len);
        return r < 0 ? r : write_file_replace_at(to_lane, GEN_LANE_INDEX, buf, len, 0600, 0, 0);
}

/* Clone lane (its tree) into l, its index too. */
static int clone_lane(GenLane *l, int lane, int tree) {
        int r = clone_dir(tree, l->tree_fd, 0);
        return r < 0 ? r : copy_index(lane, l->lane_fd);
}

/* Lane k as the source: one no process holds, sealed (released with a complete generation),
 * locked while it is read and sealed again after; or one held but not being changed (its
 * update lock taken shared: its holder waits for the copy before it changes it), whose index
 * says it is complete, and which its holder seals when it releases it. */
static int seed_from(GenLane *l, int store_fd, unsigned k) {
        char name[32];
        struct timespec t;
        snprintf(name, sizeof(name), "lane-%u", k);
        _cleanup_close_ int lane = open_dir_at(store_fd, name);
        if (lane < 0)
                return 0;
        _cleanup_close_ int lock = openat(lane, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int tree = open_dir_at(lane, "tree");
        if (lock < 0 || tree < 0)
                return 0;
        if (flock(lock, LOCK_EX | LOCK_NB) >= 0) {
                if (gen_lane_seal_time(lane, &t) <= 0 || faccessat(lane, GEN_LANE_INDEX, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        return 0;
                int r = clone_lane(l, lane, tree);
                /* Its files' ctimes moved (the links): sealed again, its tree and index unchanged. */
                if (gen_lane_seal(lane, tree) < 0)
                        (void) unlinkat(lane, GEN_LANE_SEAL, 0);
                return r < 0 ? r : 1;
        }
        _cleanup_close_ int update = openat(lane, GEN_LANE_UPDATE_LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (update < 0 || flock(update, LOCK_SH | LOCK_NB) < 0 ||
            faccessat(lane, GEN_LANE_INDEX, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        int r = clone_lane(l, lane, tree);
        return r < 0 ? r : 1;
}

int gen_lane_seed(GenLane *l, int store_fd, unsigned max_lanes, unsigned *ret_from) {
        for (unsigned k = 0; k < MIN(max_lanes, (unsigned) GEN_STORE_LANES_MAX); k++) {
                if (k == l->number)
                        continue;
                int r = seed_from(l, store_fd, k);
                if (r != 0) {
                        if (r > 0)
                                *ret_from = k;
                        return r;
                }
        }
        return 0;
}
