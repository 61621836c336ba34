/* SPDX-License-Identifier: MIT */
/* A lane's generation copied for a lane that waits for its first. See gen-mirror.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/proc-locks.h"
#include "gen-check.h"
#include "gen-clone.h"
#include "gen-index.h"
#include "gen-mirror.h"

#define MIRROR_NEW "mirror.new"
#define MIRROR_DROP "mirror.drop"
#define ADOPTED "adopted"
#define DENTS_SIZE (64 * 1024)

int gen_mirror_wanted(int store_fd, unsigned max_lanes, unsigned except) {
        for (unsigned k = 0; k < MIN(max_lanes, (unsigned) GEN_STORE_LANES_MAX); k++) {
                struct stat st;
                if (k == except)
                        continue;
                _cleanup_close_ int lane = gen_lane_dir_at(store_fd, k);
                if (lane < 0 || faccessat(lane, GEN_LANE_INDEX, F_OK, AT_SYMLINK_NOFOLLOW) >= 0)
                        continue;
                if (fstatat(lane, GEN_LANE_WANTS, &st, AT_SYMLINK_NOFOLLOW) >= 0 && flock_held_on(st.st_dev, st.st_ino) == 1)
                        return (int) k;
        }
        return -1;
}

int gen_mirror_make(GenLane *l) {
        int r = gen_mirror_drop(l->lane_fd);
        if (r < 0)
                return r;
        if (mkdirat(l->lane_fd, MIRROR_NEW, 0700) < 0)
                return -errno;
        _cleanup_close_ int dir = open_dir_at(l->lane_fd, MIRROR_NEW);
        _cleanup_close_ int tree = -EBADF;
        r = dir;
        if (r >= 0)
                r = mkdirat(dir, "tree", 0700) < 0 ? -errno : 0;
        if (r >= 0)
                r = tree = open_dir_at(dir, "tree");
        if (r >= 0)
                r = gen_clone_tree(l->tree_fd, tree);
        if (r >= 0)
                r = gen_index_copy(l->lane_fd, dir, GEN_LANE_INDEX);
        /* Complete: only now under the name a seed takes. */
        if (r >= 0 && renameat(l->lane_fd, MIRROR_NEW, l->lane_fd, GEN_LANE_MIRROR) < 0)
                r = -errno;
        if (r < 0)
                (void) rm_rf_at(l->lane_fd, MIRROR_NEW);
        return MIN(r, 0);
}

/* Every entry of from renamed into to (to holds none of their names). A directory read while
 * entries leave it may skip some: it is read again until it is empty. */
static int move_entries(int from, int to) {
        char buf[DENTS_SIZE];
        for (bool moved = true; moved;) {
                moved = false;
                if (lseek(from, 0, SEEK_SET) < 0)
                        return -errno;
                for (;;) {
                        ssize_t n = getdents64(from, buf, sizeof(buf));
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                break;
                        for (ssize_t off = 0; off < n;) {
                                const struct dirent64 *d = (const struct dirent64 *) (buf + off);
                                off += d->d_reclen;
                                if (streq(d->d_name, ".") || streq(d->d_name, ".."))
                                        continue;
                                if (renameat2(from, d->d_name, to, d->d_name, RENAME_NOREPLACE) < 0)
                                        return -errno;
                                moved = true;
                        }
                }
        }
        return 0;
}

int gen_mirror_take(int from_lane, GenLane *l) {
        int r = rm_rf_at(l->lane_fd, ADOPTED);
        if (r < 0)
                return r;
        /* Ours from here: no other process takes or drops it. */
        if (renameat(from_lane, GEN_LANE_MIRROR, l->lane_fd, ADOPTED) < 0)
                return errno == ENOENT ? 0 : -errno;
        _cleanup_close_ int dir = open_dir_at(l->lane_fd, ADOPTED);
        _cleanup_close_ int tree = dir < 0 ? dir : open_dir_at(dir, "tree");
        r = tree < 0 ? tree : move_entries(tree, l->tree_fd);
        /* The index last: l holds a generation only once every entry is in. */
        if (r >= 0 && renameat(dir, GEN_LANE_INDEX, l->lane_fd, GEN_LANE_INDEX) < 0)
                r = -errno;
        /* What is left (empty directories) goes now, or with the next take or drop. */
        (void) rm_rf_at(l->lane_fd, ADOPTED);
        return r < 0 ? r : 1;
}

int gen_mirror_drop(int lane_fd) {
        bool found = faccessat(lane_fd, MIRROR_DROP, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
        /* What a drop cut short left first: the rename below needs the name free. */
        int r = rm_rf_at(lane_fd, MIRROR_DROP);
        if (r < 0)
                return r;
        if (renameat(lane_fd, GEN_LANE_MIRROR, lane_fd, MIRROR_DROP) < 0 && errno != ENOENT)
                return -errno;
        const char *const names[] = { MIRROR_DROP, MIRROR_NEW, ADOPTED };
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                if (faccessat(lane_fd, names[i], F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                found = true;
                int q = rm_rf_at(lane_fd, names[i]);
                if (q < 0 && r == 0)
                        r = q;
        }
        return r < 0 ? r : found;
}
