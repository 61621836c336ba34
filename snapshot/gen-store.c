/* SPDX-License-Identifier: MIT */
/* The generation store's lanes. See gen-store.h and docs/snapshot.md, "Generations". */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/time-util.h"
#include "gen-check.h"
#include "gen-index.h"
#include "gen-mirror.h"
#include "gen-seed.h"
#include "gen-store.h"
#include "index-saver.h"

#define INDEX_NAME GEN_LANE_INDEX

void gen_lane_name(unsigned k, char buf[static GEN_LANE_NAME_MAX]) {
        snprintf(buf, GEN_LANE_NAME_MAX, "lane-%u", k);
}

int gen_lane_dir_at(int store_fd, unsigned k) {
        char name[GEN_LANE_NAME_MAX];
        gen_lane_name(k, name);
        return open_dir_at(store_fd, name);
}

void gen_lane_release(GenLane *l) {
        if (!l)
                return;
        /* The index written (or failed: then there is none) before the seal. */
        (void) gen_lane_index_wait(l, NULL);
        /* What the last update replaced: nothing names it but the trash. A failure leaves it
         * for the next update, which empties it first. */
        if (l->lane_fd >= 0)
                (void) rm_rf_at(l->lane_fd, GEN_LANE_TRASH);
        /* Sealed while the lock is still held: what a worker started later may trust
         * (gen-check.h). A seal that cannot be written leaves none: the lane is emptied then. */
        if (l->lock_fd >= 0 && l->tree_fd >= 0 && gen_lane_seal(l->lane_fd, l->tree_fd) < 0)
                (void) unlinkat(l->lane_fd, GEN_LANE_SEAL, 0);
        safe_close(l->update_fd);
        safe_close(l->wants_fd);
        safe_close(l->tree_fd);
        safe_close(l->lane_fd);
        safe_close(l->lock_fd); /* the flock goes with the last descriptor of it */
        gen_index_free(l->index);
        free(l->ro_path);
        free(l);
}

void gen_lane_let_go(GenLane *l) {
        if (!l)
                return;
        l->lock_fd = safe_close(l->lock_fd); /* no seal: see gen_lane_release */
        gen_lane_release(l);
}

/* Is lane_fd/<ro> the read-only bind mount of the tree open at tree_fd? */
static int ro_mounted(int lane_fd, const char *ro_name, int tree_fd) {
        struct statx lane, ro;
        struct stat tree;

        if (statx(lane_fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &lane) < 0 ||
            statx(lane_fd, ro_name, AT_SYMLINK_NOFOLLOW, STATX_MNT_ID | STATX_INO, &ro) < 0 || fstat(tree_fd, &tree) < 0)
                return -errno;
        if (!(lane.stx_mask & STATX_MNT_ID) || !(ro.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        if (lane.stx_mnt_id == ro.stx_mnt_id)
                return 0;
        /* Something is mounted there: it must be the tree, read-only. */
        _cleanup_close_ int fd = openat(lane_fd, ro_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct statvfs sv;
        if (fd < 0 || fstatvfs(fd, &sv) < 0)
                return -errno;
        return ro.stx_ino == tree.st_ino && (sv.f_flag & ST_RDONLY) ? 1 : -EEXIST;
}

/* lane_fd/<ro> becomes a read-only, nosuid, nodev bind mount of the tree: made by descriptor
 * (open_tree), set read-only before it is attached, so it is never writable for an instant. */
static int mount_ro(int lane_fd, const char *ro_name, int tree_fd) {
        _cleanup_close_ int m = open_tree(tree_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (m < 0)
                return -errno;
        struct mount_attr a = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
        if (mount_setattr(m, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
                return -errno;
        _cleanup_close_ int target = openat(lane_fd, ro_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (target < 0)
                return -errno;
        if (move_mount(m, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return -errno;
        return 0;
}

int gen_store_mount_ro(int dir_fd, const char *ro_name, int tree_fd) {
        int r = ro_mounted(dir_fd, ro_name, tree_fd);
        return r == 0 ? mount_ro(dir_fd, ro_name, tree_fd) : r < 0 ? r : 0;
}

static int mkdir_ok(int dfd, const char *name) {
        return mkdirat(dfd, name, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

/* One tree of the lane (name) owned copy_uid:copy_gid with the mode given, and its read-only
 * bind mount (ro_name); returns the tree's fd and the mount's absolute path. */
static int lane_tree(GenLane *l, const char *store_path, const char *lane, const char *name, const char *ro_name,
                     uint32_t copy_uid, uint32_t copy_gid, mode_t mode, int *ret_fd, char **ret_ro_path, TfwError *e) {
        int r = mkdir_ok(l->lane_fd, name);
        if (r >= 0)
                r = mkdir_ok(l->lane_fd, ro_name);
        if (r < 0)
                return tfw_error(e, -r, "generation_store", "cannot make the store's %s/%s: %s", lane, name, strerror(-r));
        _cleanup_close_ int fd = open_dir_at(l->lane_fd, name);
        if (fd < 0)
                return tfw_error(e, -fd, "generation_store", "cannot open the store's %s/%s: %s", lane, name,
                                 strerror(-fd));
        if (fchown(fd, copy_uid, copy_gid) < 0 || fchmod(fd, mode) < 0)
                return tfw_error(e, errno, "generation_store", "cannot set the owner of the store's %s/%s: %m", lane, name);
        r = gen_store_mount_ro(l->lane_fd, ro_name, fd);
        if (r < 0)
                return tfw_error(e, -r, "generation_store", "cannot mount the store's %s/%s read-only: %s", lane, ro_name,
                                 strerror(-r));
        if (asprintf(ret_ro_path, "%s/%s/%s", store_path, lane, ro_name) < 0) {
                *ret_ro_path = NULL;
                return tfw_error(e, ENOMEM, "generation_store", "out of memory");
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The lane's trees, their mounts, their descriptors; the lock is already held. */
static int lane_open(GenLane *l, const char *store_path, const char *name, uint32_t copy_uid, uint32_t copy_gid,
                     TfwError *e) {
        return lane_tree(l, store_path, name, "tree", "ro", copy_uid, copy_gid, SNAPSHOT_GENERATION_ROOT_MODE,
                         &l->tree_fd, &l->ro_path, e);
}

int gen_lane_acquire(int store_fd, const char *store_path, unsigned max_lanes, uint32_t copy_uid, uint32_t copy_gid,
                     GenLane **ret, TfwError *e) {
        for (unsigned k = 0; k < MIN(max_lanes, (unsigned) GEN_STORE_LANES_MAX); k++) {
                char name[GEN_LANE_NAME_MAX];
                gen_lane_name(k, name);
                int r = mkdir_ok(store_fd, name);
                if (r < 0)
                        return tfw_error(e, -r, "generation_store", "cannot make the store's %s: %s", name, strerror(-r));
                GenLane *l = calloc(1, sizeof(*l));
                if (!l)
                        return tfw_error(e, ENOMEM, "generation_store", "out of memory");
                *l = (GenLane) { .number = k, .lock_fd = -EBADF, .tree_fd = -EBADF, .seeded_from = -1,
                                 .update_fd = -EBADF, .wants_fd = -EBADF,
                                 .mirrored_for = -1 };
                l->lane_fd = open_dir_at(store_fd, name);
                if (l->lane_fd >= 0)
                        l->lock_fd = openat(l->lane_fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (l->lane_fd < 0 || l->lock_fd < 0) {
                        r = l->lane_fd < 0 ? l->lane_fd : -errno;
                        gen_lane_release(l);
                        return tfw_error(e, -r, "generation_store", "cannot open the store's %s: %s", name, strerror(-r));
                }
                if (flock(l->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                        r = -errno;
                        gen_lane_release(l);
                        if (r == -EWOULDBLOCK)
                                continue;
                        return tfw_error(e, -r, "generation_store", "cannot lock the store's %s: %s", name, strerror(-r));
                }
                /* The seal goes before anything may change the tree (the root's owner below). */
                if (unlinkat(l->lane_fd, GEN_LANE_SEAL, 0) < 0 && errno != ENOENT) {
                        r = -errno;
                        gen_lane_release(l);
                        return tfw_error(e, -r, "generation_store", "cannot remove the seal of the store's %s: %s", name,
                                         strerror(-r));
                }
                r = lane_open(l, store_path, name, copy_uid, copy_gid, e);
                if (r < 0) {
                        gen_lane_release(l);
                        return r;
                }
                *ret = l;
                return 0;
        }
        return tfw_error(e, EBUSY, "generation_store", "every lane of the generation store is in use (%u)", max_lanes);
}

/* The lane no longer holds a generation: its index first, then its entries and its mirror. */
static int lane_empty(int lane_fd, int tree_fd) {
        if (unlinkat(lane_fd, INDEX_NAME, 0) < 0 && errno != ENOENT)
                return -errno;
        int r = rm_rf_children(tree_fd);
        return r < 0 ? r : MIN(gen_mirror_drop(lane_fd), 0);
}

/* The store is full: every lane no process holds gives its generation back. */
static void collect_unheld(int store_fd, unsigned max_lanes, unsigned except) {
        for (unsigned k = 0; k < MIN(max_lanes, (unsigned) GEN_STORE_LANES_MAX); k++) {
                if (k == except)
                        continue;
                _cleanup_close_ int lane = gen_lane_dir_at(store_fd, k);
                if (lane < 0)
                        continue;
                _cleanup_close_ int lock = openat(lane, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
                if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0)
                        continue;
                _cleanup_close_ int tree = open_dir_at(lane, "tree");
                if (tree >= 0)
                        (void) lane_empty(lane, tree);
                (void) rm_rf_at(lane, GEN_LANE_TRASH);
        }
}

/* No generation in l: its tree emptied, then made another lane's when one can be had (gen-seed.h),
 * *prev that lane's index (prev NULL: left for the next update to load). */
static int lane_start(GenLane *l, int store_fd, unsigned max_lanes, uint64_t max_entries, GenIndex **prev,
                      bool *busy, TfwError *e) {
        unsigned from;
        TfwError le = {};
        int r = rm_rf_children(l->tree_fd);
        if (r < 0)
                return tfw_error(e, -r, "generation_store", "cannot empty lane %u of the store: %s", l->number,
                                 strerror(-r));
        r = gen_lane_seed(l, store_fd, max_lanes, &from, busy);
        if (r > 0 && (!prev || gen_index_load(l->lane_fd, INDEX_NAME, max_entries, prev, &le) >= 0)) {
                l->seeded_from = (int) from;
                return 0;
        }
        /* None, or a part only: from nothing. */
        (void) unlinkat(l->lane_fd, INDEX_NAME, 0);
        r = rm_rf_children(l->tree_fd);
        return r < 0 ? tfw_error(e, -r, "generation_store", "cannot empty lane %u of the store: %s", l->number,
                                 strerror(-r)) : 0;
}

/* The lane's trash, empty (what a release that failed, or a process killed before it, left is
 * removed first: the store's space), or a negative errno: the update then removes what it
 * replaces at once. */
static int lane_trash(GenLane *l) {
        int r = rm_rf_at(l->lane_fd, GEN_LANE_TRASH);
        if (r < 0)
                return r;
        if (mkdirat(l->lane_fd, GEN_LANE_TRASH, 0700) < 0)
                return -errno;
        return open_dir_at(l->lane_fd, GEN_LANE_TRASH);
}

static int update_once(GenLane *l, int store_fd, unsigned max_lanes, const char *workspace, uint32_t copy_uid,
                       const SnapshotLimits *limits, SnapshotSummary *ret, TfwError *e) {
        _cleanup_(gen_index_freep) GenIndex *prev = TAKE_PTR(l->index), *next = NULL;
        TfwError le = {};
        /* The copy of the last generation, if any, goes before the tree changes: a mirror is
         * never older than its lane's generation (gen-mirror.h). */
        int r = gen_mirror_drop(l->lane_fd);
        if (r < 0)
                return tfw_error(e, -r, "generation_store", "cannot remove the mirror of lane %u: %s", l->number,
                                 strerror(-r));
        r = prev ? 0 : gen_index_load(l->lane_fd, INDEX_NAME, limits->max_entries, &prev, &le);
        /* No index (or one that cannot be read): the tree is not a complete generation. */
        if (r < 0 && (r = lane_start(l, store_fd, max_lanes, limits->max_entries, &prev, NULL, e)) < 0)
                return r;
        if (unlinkat(l->lane_fd, INDEX_NAME, 0) < 0 && errno != ENOENT)
                return tfw_error(e, errno, "generation_store", "cannot remove the index of lane %u: %m", l->number);
        SnapshotLimits lim = *limits;
        _cleanup_close_ int trash = lane_trash(l);
        lim.trash = trash >= 0;
        lim.trash_fd = trash;
        r = snapshot_update(workspace, l->tree_fd, prev, copy_uid, &lim, &next, ret, e);
        if (r >= 0)
                r = index_saver_start(TAKE_PTR(next), l->lane_fd, INDEX_NAME, &l->saver, e);
        if (r < 0)
                (void) rm_rf_children(l->tree_fd);
        return r;
}

int gen_lane_index_wait(GenLane *l, TfwError *e) {
        return index_saver_finish(TAKE_PTR(l->saver), e);
}

/* The lane's update lock, taken: not while another lane copies this one (gen-seed.h), which
 * holds it shared, briefly. */
static int lock_update(GenLane *l, TfwError *e) {
        int update = openat(l->lane_fd, GEN_LANE_UPDATE_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (update < 0)
                return tfw_error(e, errno, "generation_store", "cannot open the update lock of lane %u: %m", l->number);
        while (flock(update, LOCK_EX) < 0)
                if (errno != EINTR) {
                        int r = tfw_error(e, errno, "generation_store", "cannot lock lane %u for its update: %m", l->number);
                        safe_close(update);
                        return r;
                }
        return update;
}

int gen_lane_lock_update(GenLane *l, TfwError *e) {
        if (l->update_fd >= 0)
                return 0;
        int r = lock_update(l, e);
        if (r < 0)
                return r;
        l->update_fd = r;
        return 0;
}

/* l's holder waits for a source: its `wants` locked shared (gen-mirror.h), from now until l
 * has a generation or is released. A failure only loses the mirror. */
static void want_seed(GenLane *l) {
        if (l->wants_fd >= 0)
                return;
        int fd = openat(l->lane_fd, GEN_LANE_WANTS, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0)
                fd = safe_close(fd);
        l->wants_fd = fd;
}

int gen_lane_seed_ahead(GenLane *l, int store_fd, unsigned max_lanes, bool *ret_busy, TfwError *e) {
        *ret_busy = false;
        (void) gen_lane_index_wait(l, NULL); /* this process's own update's */
        _cleanup_close_ int update = lock_update(l, e);
        int r = update;
        if (r >= 0 && faccessat(l->lane_fd, INDEX_NAME, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                /* The index is loaded, and checked, by the update that comes with the request. */
                r = lane_start(l, store_fd, max_lanes, 0, NULL, ret_busy, e);
                if (r >= 0)
                        r = faccessat(l->lane_fd, INDEX_NAME, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
        } else if (r >= 0)
                r = 1;
        if (r == 0)
                want_seed(l);
        else
                l->wants_fd = safe_close(l->wants_fd);
        return r;
}

void gen_lane_mirror(GenLane *l, int store_fd, unsigned max_lanes) {
        TfwError e = {};
        _cleanup_close_ int update = TAKE_FD(l->update_fd);
        l->mirror_error = 0;
        l->mirrored_for = gen_mirror_wanted(store_fd, max_lanes, l->number);
        if (l->mirrored_for < 0) {
                /* No copy: the lock goes once the index is written (index-saver.h). */
                if (l->saver && update >= 0)
                        index_saver_hand_lock(l->saver, TAKE_FD(update));
                return;
        }
        usec_t t0 = now_monotonic();
        /* The mirror takes the index too. */
        int r = gen_lane_index_wait(l, &e);
        if (r >= 0 && update < 0)
                update = lock_update(l, &e);
        if (r >= 0)
                r = update < 0 ? update : gen_mirror_make(l);
        l->mirror_error = -MIN(r, 0);
        l->mirror_usec = now_monotonic() - t0;
}

int gen_lane_load_ahead(GenLane *l, uint64_t max_entries, TfwError *e) {
        if (l->index)
                return 1;
        (void) gen_lane_index_wait(l, NULL); /* this process's own update's */
        if (faccessat(l->lane_fd, INDEX_NAME, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        int r = gen_index_load(l->lane_fd, INDEX_NAME, max_entries, &l->index, e);
        return r < 0 ? r : 1;
}

int gen_lane_update(GenLane *l, int store_fd, unsigned max_lanes, const char *workspace, uint32_t copy_uid,
                    const SnapshotLimits *limits, SnapshotSummary *ret, TfwError *e) {
        /* The last update's index, if still being written: this one removes it first. */
        (void) gen_lane_index_wait(l, NULL);
        _cleanup_close_ int update = l->update_fd >= 0 ? TAKE_FD(l->update_fd) : lock_update(l, e);
        if (update < 0)
                return update;
        int r = update_once(l, store_fd, max_lanes, workspace, copy_uid, limits, ret, e);
        if (r == -ENOSPC || r == -EDQUOT) {
                collect_unheld(store_fd, max_lanes, l->number);
                r = update_once(l, store_fd, max_lanes, workspace, copy_uid, limits, ret, e);
                if (r == -ENOSPC || r == -EDQUOT)
                        tfw_error_prefix(e, "the generation store is full (limits.max_store_bytes): ");
        }
        if (r >= 0)
                l->update_fd = TAKE_FD(update);
        return r;
}

/* The lanes found at start, each locked (a lane a live process holds is left out). */
typedef struct Found {
        int lane_fd[GEN_STORE_LANES_MAX], lock_fd[GEN_STORE_LANES_MAX];
        struct timespec bound; /* the newest seal of them all */
} Found;

static void found_close(Found *f) {
        for (unsigned k = 0; k < GEN_STORE_LANES_MAX; k++) {
                safe_close(f->lane_fd[k]);
                safe_close(f->lock_fd[k]);
        }
}

static int found_lanes(int store_fd, Found *f, GenStoreReport report, void *userdata) {
        for (unsigned k = 0; k < GEN_STORE_LANES_MAX; k++) {
                char name[GEN_LANE_NAME_MAX];
                struct timespec t;
                gen_lane_name(k, name);
                int lane = open_dir_at(store_fd, name);
                if (lane == -ENOENT)
                        continue;
                if (lane < 0)
                        return lane;
                int lock = openat(lane, "lock", O_RDWR | O_NOFOLLOW | O_CLOEXEC);
                if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0) {
                        report(userdata, name, "held by a process still running: left as it is");
                        safe_close(lock);
                        safe_close(lane);
                        continue;
                }
                f->lane_fd[k] = lane;
                f->lock_fd[k] = lock;
                int r = gen_lane_seal_time(lane, &t);
                if (r < 0)
                        return r;
                if (r > 0 && (t.tv_sec > f->bound.tv_sec || (t.tv_sec == f->bound.tv_sec && t.tv_nsec > f->bound.tv_nsec)))
                        f->bound = t;
        }
        return 0;
}

/* A lane that failed: emptied (its index first), or removed whole past max_lanes. */
static int drop_lane(int store_fd, int lane, unsigned k, unsigned max_lanes, char *why, size_t why_size,
                     GenStoreReport report, void *userdata) {
        char name[GEN_LANE_NAME_MAX];
        size_t n = strlen(why);
        gen_lane_name(k, name);
        if (k >= max_lanes) {
                int r = rm_rf_at(store_fd, name);
                snprintf(why, why_size, "past the %u lanes of this configuration: %s", max_lanes, r < 0 ? strerror(-r) : "removed");
                report(userdata, name, why);
                return r;
        }
        _cleanup_close_ int tree = open_dir_at(lane, "tree");
        int q = tree >= 0 ? lane_empty(lane, tree) : tree == -ENOENT ? 0 : tree;
        if (q >= 0 && unlinkat(lane, GEN_LANE_SEAL, 0) < 0 && errno != ENOENT)
                q = -errno;
        snprintf(why + n, why_size - n, "; %s%s", q < 0 ? "cannot be emptied: " : "emptied", q < 0 ? strerror(-q) : "");
        report(userdata, name, why);
        return q;
}

/* After the lanes that failed are dropped: the mirrors found (gen-mirror.h), never used after a
 * restart, are dropped too. A link removed (a lane emptied, a mirror dropped) gives the files it
 * named a new ctime, which the next start would take for a change: the lanes kept are sealed
 * again, as they were checked. A mirror that cannot be removed is an error, as a lane that cannot
 * be emptied: the store must not be used. */
static int drop_mirrors(const Found *f, const bool *bad, GenStoreReport report, void *userdata) {
        bool dropped = false;
        int ret = 0;
        for (unsigned k = 0; k < GEN_STORE_LANES_MAX; k++) {
                char name[GEN_LANE_NAME_MAX], why[128];
                dropped = dropped || bad[k];
                if (f->lane_fd[k] < 0 || bad[k])
                        continue;
                int q = gen_mirror_drop(f->lane_fd[k]);
                if (q == 0)
                        continue;
                gen_lane_name(k, name);
                snprintf(why, sizeof(why), "%s%s", q < 0 ? "its mirror cannot be removed: " : "its mirror removed (never used after a restart)",
                         q < 0 ? strerror(-q) : "");
                report(userdata, name, why);
                dropped = true;
                if (q < 0 && ret == 0)
                        ret = q;
        }
        for (unsigned k = 0; dropped && k < GEN_STORE_LANES_MAX; k++) {
                char name[GEN_LANE_NAME_MAX], why[128];
                if (f->lane_fd[k] < 0 || bad[k])
                        continue;
                _cleanup_close_ int tree = open_dir_at(f->lane_fd[k], "tree");
                int q = tree < 0 ? tree : gen_lane_seal(f->lane_fd[k], tree);
                if (q >= 0)
                        continue;
                (void) unlinkat(f->lane_fd[k], GEN_LANE_SEAL, 0);
                gen_lane_name(k, name);
                snprintf(why, sizeof(why), "cannot be sealed again (%s): its seal removed, it is emptied at the next start",
                         strerror(-q));
                report(userdata, name, why);
        }
        return ret;
}

int gen_store_check(int store_fd, unsigned max_lanes, uint64_t max_entries, GenStoreReport report, void *userdata) {
        Found f = {};
        char why[GEN_STORE_LANES_MAX][512];
        bool bad[GEN_STORE_LANES_MAX] = {};
        int ret = 0;
        max_lanes = MIN(max_lanes, (unsigned) GEN_STORE_LANES_MAX);
        for (unsigned k = 0; k < GEN_STORE_LANES_MAX; k++)
                f.lane_fd[k] = f.lock_fd[k] = -EBADF;
        int r = found_lanes(store_fd, &f, report, userdata);
        /* Every lane checked before any is emptied: emptying one moves the ctimes of the files
         * it shares with another. */
        for (unsigned k = 0; r >= 0 && k < GEN_STORE_LANES_MAX; k++) {
                if (f.lane_fd[k] < 0)
                        continue;
                why[k][0] = 0;
                int c = k >= max_lanes ? 1 : gen_lane_check(f.lane_fd[k], max_entries, &f.bound, why[k], sizeof(why[k]));
                if (c < 0)
                        snprintf(why[k], sizeof(why[k]), "cannot be checked: %s", strerror(-c));
                bad[k] = c != 0;
        }
        for (unsigned k = 0; r >= 0 && k < GEN_STORE_LANES_MAX; k++)
                if (bad[k]) {
                        int q = drop_lane(store_fd, f.lane_fd[k], k, max_lanes, why[k], sizeof(why[k]), report, userdata);
                        if (q < 0 && ret == 0)
                                ret = q;
                }
        if (r >= 0) {
                int q = drop_mirrors(&f, bad, report, userdata);
                if (q < 0 && ret == 0)
                        ret = q;
        }
        found_close(&f);
        return r < 0 ? r : ret;
}

int gen_store_usage(int store_fd, unsigned max_lanes, GenStoreUsage *ret) {
        struct statvfs sv;
        if (fstatvfs(store_fd, &sv) < 0)
                return -errno;
        *ret = (GenStoreUsage) {
                .bytes = (uint64_t) (sv.f_blocks - sv.f_bfree) * sv.f_frsize,
                .max_bytes = (uint64_t) sv.f_blocks * sv.f_frsize,
                .inodes = (uint64_t) (sv.f_files - sv.f_ffree),
                .max_inodes = (uint64_t) sv.f_files,
        };
        for (unsigned k = 0; k < MIN(max_lanes, (unsigned) GEN_STORE_LANES_MAX); k++) {
                _cleanup_close_ int lane = gen_lane_dir_at(store_fd, k);
                if (lane >= 0 && faccessat(lane, INDEX_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
                        ret->lanes++;
        }
        return 0;
}
