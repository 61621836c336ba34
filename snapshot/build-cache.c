/* SPDX-License-Identifier: MIT */
/* The build cache's store (build-cache.h, docs/cache.md). Everything below <store>/cache is
 * made by this file only, reached through directory fds, never following a symlink. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/sha256.h"
#include "snapshot/build-cache.h"

#define CACHE_DIR "cache"
#define CURRENT "current"
#define META "meta"
#define OIDS "oids"
#define DATA "data"
#define EPOCH "epoch"
#define SLOT_MODE 0750
#define TAKE_IN_PREFIX "in-"
#define TRASH_PREFIX "trash-"
#define TAKE_IN_LOCK "lock"
#define TAKE_IN_FRESH_SECONDS 60
/* Deepest directory a take-in may hold (the importer allows 128 levels below /work). */
#define LINK_DEPTH_MAX 256
#define META_MAX 256

struct BuildCache {
        int dir_fd;
        int lock_fd;
        int take_in_lock_fd; /* flock'ed while this process's take-in exists */
        BuildCacheParams p;
        size_t n_paths;
};

size_t build_cache_n_paths(const BuildCache *c) {
        return c->n_paths;
}

char *const *build_cache_paths(const BuildCache *c) {
        return c->p.paths;
}

void build_cache_free(BuildCache *c) {
        if (!c)
                return;
        safe_close(c->take_in_lock_fd);
        safe_close(c->lock_fd);
        safe_close(c->dir_fd);
        free(c);
}

/* What a process that died left: a take-in whose lock nobody holds (a job killed mid-import,
 * or between the exchange and the removal of the cache it replaced), a clear's trash. */
static void sweep(BuildCache *c) {
        _cleanup_closedir_ DIR *d = opendir_fd(c->dir_fd);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                if (strncmp(de->d_name, TRASH_PREFIX, strlen(TRASH_PREFIX)) == 0) {
                        (void) rm_rf_at(c->dir_fd, de->d_name);
                        continue;
                }
                if (strncmp(de->d_name, TAKE_IN_PREFIX, strlen(TAKE_IN_PREFIX)) != 0)
                        continue;
                _cleanup_close_ int in = openat(c->dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int l = in >= 0 ? openat(in, TAKE_IN_LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC) : -EBADF;
                struct stat st;
                /* No lock file: its maker is between mkdir and the lock, or died there; only an
                 * old one goes (a take-in is made in microseconds). */
                bool stale = l >= 0 ? flock(l, LOCK_EX | LOCK_NB) >= 0
                                    : in >= 0 && fstat(in, &st) >= 0 && st.st_ctime + TAKE_IN_FRESH_SECONDS < time(NULL);
                if (stale)
                        (void) rm_rf_at(c->dir_fd, de->d_name);
        }
}

int build_cache_open(int store_fd, const BuildCacheParams *p, BuildCache **ret, TfwError *e) {
        size_t n = 0;
        while (p->paths && p->paths[n])
                n++;
        if (n == 0 || n > BUILD_CACHE_PATHS_MAX)
                return tfw_error(e, EINVAL, "build_cache", "between 1 and %d cache paths", BUILD_CACHE_PATHS_MAX);
        if (mkdirat(store_fd, CACHE_DIR, 0700) < 0 && errno != EEXIST)
                return tfw_error(e, errno, "build_cache", "cannot make the store's cache: %m");
        _cleanup_(build_cache_freep) BuildCache *c = calloc(1, sizeof(*c));
        if (!c)
                return tfw_error(e, ENOMEM, "build_cache", "out of memory");
        *c = (BuildCache) { .dir_fd = -EBADF, .lock_fd = -EBADF, .take_in_lock_fd = -EBADF, .p = *p, .n_paths = n };
        c->dir_fd = open_dir_at(store_fd, CACHE_DIR);
        if (c->dir_fd < 0)
                return tfw_error(e, -c->dir_fd, "build_cache", "cannot open the store's cache: %s", strerror(-c->dir_fd));
        if (fchmod(c->dir_fd, 0700) < 0)
                return tfw_error(e, errno, "build_cache", "cannot set the mode of the store's cache: %m");
        c->lock_fd = openat(c->dir_fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (c->lock_fd < 0)
                return tfw_error(e, errno, "build_cache", "cannot open the cache's lock: %m");
        sweep(c);
        *ret = TAKE_PTR(c);
        return 0;
}

static int lock(BuildCache *c, int how) {
        while (flock(c->lock_fd, how) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

static void unlock(BuildCache *c) {
        (void) flock(c->lock_fd, LOCK_UN);
}

/* A small text file of dir_fd: its bytes, NUL-terminated; -ENOENT when missing. */
static int read_small(int dir_fd, const char *name, char buf[static META_MAX]) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t k = read(fd, buf, META_MAX - 1);
        if (k < 0)
                return -errno;
        buf[k] = 0;
        return 0;
}

static int read_epoch(BuildCache *c, uint64_t *ret) {
        char buf[META_MAX];
        int r = read_small(c->dir_fd, EPOCH, buf);
        if (r == -ENOENT) {
                *ret = 0;
                return 0;
        }
        if (r < 0)
                return r;
        return sscanf(buf, "%" SCNu64, ret) == 1 ? 0 : -EBADMSG;
}

/* current/meta, or nothing (tree "") when there is no cache; under the lock. */
static int read_state(BuildCache *c, BuildCacheState *ret) {
        char buf[META_MAX], tree[GIT_OID_HEX_SIZE];
        BuildCacheState s = {};
        int r = read_epoch(c, &s.epoch);
        if (r < 0)
                return r;
        _cleanup_close_ int cur = openat(c->dir_fd, CURRENT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cur < 0 && errno != ENOENT)
                return -errno;
        if (cur >= 0) {
                r = read_small(cur, META, buf);
                if (r < 0)
                        return r;
                if (sscanf(buf, "%64s %" SCNu64 " %" SCNu64, tree, &s.bytes, &s.entries) != 3 || strlen(tree) != 64)
                        return -EBADMSG;
                memcpy(s.tree, tree, sizeof(s.tree));
        }
        *ret = s;
        return 0;
}

int build_cache_state(BuildCache *c, BuildCacheState *ret, TfwError *e) {
        int r = lock(c, LOCK_SH);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot lock the cache: %s", strerror(-r));
        r = read_state(c, ret);
        unlock(c);
        return r < 0 ? tfw_error(e, -r, "build_cache", "cannot read the cache's state: %s", strerror(-r)) : 0;
}

/* ---- the lane --------------------------------------------------------------------------- */

static int own_dir(int fd, const BuildCache *c) {
        return fchown(fd, c->p.uid, c->p.gid) < 0 || fchmod(fd, SLOT_MODE) < 0 ? -errno : 0;
}

/* Open (make when missing) the directory name of dir_fd as the job's; *made when made. */
static int dir_of_job(const BuildCache *c, int dir_fd, const char *name, bool *made) {
        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 || errno != ENOENT)
                return fd >= 0 ? fd : -errno;
        if (mkdirat(dir_fd, name, SLOT_MODE) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int r = own_dir(fd, c);
        if (r < 0) {
                safe_close(fd);
                return r;
        }
        *made = true;
        return fd;
}

/* Every component of path made a directory below tree_fd (the job's where made). */
static int mount_point(const BuildCache *c, int tree_fd, const char *path, bool *made, TfwError *e) {
        _cleanup_close_ int cur = -EBADF;
        char comp[NAME_MAX + 1];
        size_t len = strlen(path);

        for (size_t i = 0; i < len;) {
                const char *slash = memchr(path + i, '/', len - i);
                size_t m = slash ? (size_t) (slash - (path + i)) : len - i;
                if (m == 0 || m > NAME_MAX)
                        return tfw_error(e, EINVAL, "build_cache", "invalid cache path '%s'", path);
                memcpy(comp, path + i, m);
                comp[m] = 0;
                int fd = dir_of_job(c, cur >= 0 ? cur : tree_fd, comp, made);
                if (fd == -ENOTDIR || fd == -ELOOP)
                        return tfw_error(e, ENOTDIR, "cache_path_blocked",
                                         "the workspace's '%.*s' is not a directory, so the cache path '%s' cannot be mounted there",
                                         (int) (i + m), path, path);
                if (fd < 0)
                        return tfw_error(e, -fd, "build_cache", "cannot make the mount point of the cache path '%s': %s",
                                         path, strerror(-fd));
                safe_close(cur);
                cur = fd;
                i += m + 1;
        }
        return 0;
}

int build_cache_prepare_lane(BuildCache *c, GenLane *lane, bool *ret_made, TfwError *e) {
        bool made = false, slot_made = false;

        for (size_t i = 0; i < c->n_paths; i++) {
                char name[24];
                snprintf(name, sizeof(name), "%zu", i);
                int fd = dir_of_job(c, lane->cache_fd, name, &slot_made);
                if (fd >= 0)
                        fd = (own_dir(fd, c) < 0 ? (safe_close(fd), -errno) : fd);
                if (fd < 0)
                        return tfw_error(e, -fd, "build_cache", "cannot make the lane's cache slot %zu: %s", i, strerror(-fd));
                safe_close(fd);
                int r = mount_point(c, lane->tree_fd, c->p.paths[i], &made, e);
                if (r < 0)
                        return r;
        }
        *ret_made = made;
        return 0;
}

int build_cache_lane_empty(GenLane *lane) {
        _cleanup_closedir_ DIR *d = opendir_fd(lane->cache_fd);
        int r = 0;
        if (!d)
                return -errno;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                _cleanup_close_ int fd = openat(lane->cache_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int k = fd < 0 ? rm_rf_at(lane->cache_fd, de->d_name) : rm_rf_children(fd);
                if (k < 0 && r >= 0)
                        r = k;
        }
        return r;
}

/* src's entries into dst: files and symbolic links as hard links, directories made again with
 * their mode and times (owned by the job). */
static int link_tree(const BuildCache *c, int src, int dst, unsigned depth, uint64_t *budget) {
        if (depth > LINK_DEPTH_MAX)
                return -ELOOP;
        _cleanup_closedir_ DIR *d = opendir_fd(src);
        if (!d)
                return -errno;
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if ((*budget)-- == 0)
                        return -E2BIG;
                if (fstatat(src, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)) {
                        if (linkat(src, de->d_name, dst, de->d_name, 0) < 0)
                                return -errno;
                        continue;
                }
                if (!S_ISDIR(st.st_mode))
                        continue; /* the take-in makes nothing else */
                if (mkdirat(dst, de->d_name, 0700) < 0)
                        return -errno;
                _cleanup_close_ int s = openat(src, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int t = openat(dst, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (s < 0 || t < 0)
                        return -errno;
                if (fchown(t, c->p.uid, c->p.gid) < 0)
                        return -errno;
                int r = link_tree(c, s, t, depth + 1, budget);
                if (r < 0)
                        return r;
                struct timespec ts[2] = { st.st_atim, st.st_mtim };
                if (fchmod(t, st.st_mode & 07777) < 0 || futimens(t, ts) < 0)
                        return -errno;
        }
        return errno ? -errno : 0;
}

static int hand_out_slot(BuildCache *c, GenLane *lane, int data_fd, size_t i) {
        char name[24];
        snprintf(name, sizeof(name), "%zu", i);
        _cleanup_close_ int dst = openat(lane->cache_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int src = openat(data_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (dst < 0 || src < 0 || fstat(src, &st) < 0)
                return -errno;
        uint64_t budget = c->p.max_entries + 1;
        int r = link_tree(c, src, dst, 0, &budget);
        if (r < 0)
                return r;
        struct timespec ts[2] = { st.st_atim, st.st_mtim };
        return fchmod(dst, st.st_mode & 07777) < 0 || futimens(dst, ts) < 0 ? -errno : 0;
}

int build_cache_hand_out(BuildCache *c, GenLane *lane, BuildCacheState *ret, TfwError *e) {
        int r = build_cache_lane_empty(lane);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot empty the lane's cache slots: %s", strerror(-r));
        r = lock(c, LOCK_SH);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot lock the cache: %s", strerror(-r));
        BuildCacheState s;
        r = read_state(c, &s);
        _cleanup_close_ int data = -EBADF;
        if (r >= 0 && s.tree[0]) {
                data = open_dir_at(c->dir_fd, CURRENT "/" DATA);
                r = data < 0 ? data : 0;
                for (size_t i = 0; r >= 0 && i < c->n_paths; i++)
                        r = hand_out_slot(c, lane, data, i);
        }
        unlock(c);
        if (r < 0) {
                (void) build_cache_lane_empty(lane);
                return tfw_error(e, -r, "build_cache", "cannot hand the cache out to the lane: %s", strerror(-r));
        }
        *ret = s;
        return 0;
}

/* ---- the take-in ------------------------------------------------------------------------ */

static int take_in_name(const char *job_id, char buf[static NAME_MAX + 1]) {
        int n = snprintf(buf, NAME_MAX + 1, TAKE_IN_PREFIX "%s", job_id);
        return n > 0 && n <= NAME_MAX && !strchr(job_id, '/') && job_id[0] ? 0 : -EINVAL;
}

int build_cache_take_in_begin(BuildCache *c, const char *job_id, int *ret_fd, TfwError *e) {
        char name[NAME_MAX + 1];
        if (take_in_name(job_id, name) < 0)
                return tfw_error(e, EINVAL, "build_cache", "invalid job id");
        int r = rm_rf_at(c->dir_fd, name);
        if (r >= 0 && mkdirat(c->dir_fd, name, 0700) < 0)
                r = -errno;
        _cleanup_close_ int fd = -EBADF;
        int data = -EBADF;
        if (r >= 0 && (fd = open_dir_at(c->dir_fd, name)) < 0)
                r = fd;
        if (r >= 0) {
                safe_close(c->take_in_lock_fd);
                c->take_in_lock_fd = openat(fd, TAKE_IN_LOCK, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (c->take_in_lock_fd < 0 || flock(c->take_in_lock_fd, LOCK_EX | LOCK_NB) < 0)
                        r = -errno;
        }
        if (r >= 0 && mkdirat(fd, DATA, 0700) < 0)
                r = -errno;
        if (r >= 0 && (data = open_dir_at(fd, DATA)) < 0)
                r = data;
        if (r < 0) {
                (void) rm_rf_at(c->dir_fd, name);
                return tfw_error(e, -r, "build_cache", "cannot make the cache's take-in: %s", strerror(-r));
        }
        *ret_fd = data;
        return 0;
}

void build_cache_take_in_discard(BuildCache *c, const char *job_id) {
        char name[NAME_MAX + 1];
        if (take_in_name(job_id, name) >= 0)
                (void) rm_rf_at(c->dir_fd, name);
}

/* The take-in's data holds exactly the directories 0 .. n-1. */
static int check_slots(const BuildCache *c, int data_fd, TfwError *e) {
        _cleanup_closedir_ DIR *d = opendir_fd(data_fd);
        size_t seen = 0;
        if (!d)
                return tfw_error(e, errno, "build_cache", "cannot read the take-in: %m");
        struct dirent *de;
        while ((de = readdir(d))) {
                struct stat st;
                char *end;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                errno = 0;
                unsigned long i = strtoul(de->d_name, &end, 10);
                char canon[24];
                snprintf(canon, sizeof(canon), "%lu", i);
                if (errno || *end || i >= c->n_paths || !streq(canon, de->d_name) ||
                    fstatat(data_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        return tfw_error(e, EBADMSG, "cache_rejected", "the cache stream holds an unexpected top-level entry");
                seen++;
        }
        if (seen != c->n_paths)
                return tfw_error(e, EBADMSG, "cache_rejected", "the cache stream lacks %zu of its %zu paths",
                                 c->n_paths - seen, c->n_paths);
        return 0;
}

int build_cache_take_in_commit(BuildCache *c, const char *job_id, uint64_t since_epoch, BuildCacheState *ret,
                               TfwError *e) {
        _cleanup_(build_cache_oids_freep) BuildCacheOids *prev = NULL, *oids = NULL;
        char name[NAME_MAX + 1], meta[META_MAX];
        BuildCacheState s;
        int r;

        if (take_in_name(job_id, name) < 0)
                return tfw_error(e, EINVAL, "build_cache", "invalid job id");
        _cleanup_close_ int in = open_dir_at(c->dir_fd, name);
        _cleanup_close_ int data = in >= 0 ? open_dir_at(in, DATA) : in;
        if (data < 0) {
                r = tfw_error(e, -data, "build_cache", "cannot open the take-in: %s", strerror(-data));
                goto out;
        }
        r = check_slots(c, data, e);
        /* The current cache's blob ids (not locked: either cache is a true table of its inodes). */
        if (r >= 0)
                (void) build_cache_oids_load(c->dir_fd, CURRENT "/" OIDS, c->p.max_entries + BUILD_CACHE_PATHS_MAX, &prev);
        if (r >= 0)
                r = build_cache_tree_id(data, c->p.paths, c->p.max_entries, prev, &oids, &s, e);
        if (r < 0)
                goto out;
        int n = snprintf(meta, sizeof(meta), "%s %" PRIu64 " %" PRIu64 "\n", s.tree, s.bytes, s.entries);
        r = build_cache_oids_save(in, OIDS, oids);
        if (r >= 0)
                r = write_file_replace_at(in, META, meta, (size_t) n, 0600, 0, 0);
        if (r < 0) {
                r = tfw_error(e, -r, "build_cache", "cannot write the take-in's meta: %s", strerror(-r));
                goto out;
        }
        r = lock(c, LOCK_EX);
        if (r < 0) {
                r = tfw_error(e, -r, "build_cache", "cannot lock the cache: %s", strerror(-r));
                goto out;
        }
        uint64_t epoch;
        r = read_epoch(c, &epoch);
        if (r >= 0 && epoch != since_epoch)
                r = -ESTALE;
        if (r >= 0 && renameat2(c->dir_fd, name, c->dir_fd, CURRENT, RENAME_EXCHANGE) < 0) {
                r = -errno;
                if (r == -ENOENT)
                        r = renameat2(c->dir_fd, name, c->dir_fd, CURRENT, RENAME_NOREPLACE) < 0 ? -errno : 0;
        }
        unlock(c);
        if (r == -ESTALE)
                r = tfw_error(e, ESTALE, "cache_cleared", "the cache was cleared while the job ran: nothing kept");
        else if (r < 0)
                r = tfw_error(e, -r, "build_cache", "cannot replace the cache: %s", strerror(-r));
        if (r >= 0) {
                s.epoch = epoch;
                *ret = s;
        }
out:
        /* Either the take-in that was refused, or (exchanged) the cache it replaced. */
        (void) rm_rf_at(c->dir_fd, name);
        return r;
}

int build_cache_clear(BuildCache *c, TfwError *e) {
        int r = lock(c, LOCK_EX);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot lock the cache: %s", strerror(-r));
        uint64_t epoch;
        char buf[32];
        r = read_epoch(c, &epoch);
        if (r >= 0) {
                int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", epoch + 1);
                r = write_file_replace_at(c->dir_fd, EPOCH, buf, (size_t) n, 0600, 0, 0);
        }
        /* One rename under the lock (the cache is there whole, or gone), the removal after it. */
        char trash[64];
        snprintf(trash, sizeof(trash), TRASH_PREFIX "%" PRIu64, epoch + 1);
        if (r >= 0 && renameat(c->dir_fd, CURRENT, c->dir_fd, trash) < 0 && errno != ENOENT)
                r = -errno;
        unlock(c);
        if (r >= 0)
                (void) rm_rf_at(c->dir_fd, trash);
        return r < 0 ? tfw_error(e, -r, "build_cache", "cannot clear the cache: %s", strerror(-r)) : 0;
}

