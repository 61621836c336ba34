/* SPDX-License-Identifier: MIT */
/* The build cache's store (build-cache.h, docs/cache.md). Everything below <store>/cache is
 * made by this file and cache-merge.c only, reached through directory fds, never following a
 * symlink. */
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
#include "parser/config.h"
#include "snapshot/build-cache.h"
#include "snapshot/cache-merge.h"

#define CACHE_DIR "cache"
#define VERSIONS "v"
#define VERSIONS_RO "ro"
#define CURRENT "current"
#define META "meta"
#define OIDS "oids"
#define DATA "data"
#define PIN "pin"
#define EPOCH "epoch"
#define SLOT_MODE 0750
/* A version's data/ is root's alone: the job's overlay holds data/<i> open (init keeps it for
 * after the job, and gVisor lists init's descriptors to a process of the job's uid in
 * /proc/1/fd), and `..` from there must lead nowhere, not to the version's meta or another
 * version (tests/integration/test-cache.sh, "init's descriptors lead nowhere else"). */
#define DATA_MODE 0710
/* The versions directory, each version and its data/ are root's, with group
 * CONFIG_CAPSULE_ROOT_ID allowed to pass (not to list): a runc capsule's init, root of its user
 * namespace as that id, mounts the job's overlays from data/<i> (docs/capsule-engines.md).
 * No process of a runsc capsule, nor any job, has that group. */
#define PASS_MODE 0710

static int pass_for_capsule_root(int fd, mode_t mode) {
        return fchown(fd, 0, CONFIG_CAPSULE_ROOT_ID) < 0 || fchmod(fd, mode) < 0 ? -errno : 0;
}
#define TAKE_IN_PREFIX "in-"
#define TRASH_PREFIX "trash-"
#define FRESH_PREFIX "new-"
#define TAKE_IN_LOCK "lock"
#define TAKE_IN_FRESH_SECONDS 60
#define META_MAX 256
#define VERSION_NAME_MAX 24
/* The largest version number (capsule/protocol.h, CAPSULE_CACHE_VERSION_MAX). */
#define VERSION_MAX UINT64_C(999999999999)

struct BuildCache {
        int dir_fd;
        int versions_fd;
        int lock_fd;
        int take_in_lock_fd; /* flock'ed while this process's take-in exists */
        int pin_fd;          /* flock'ed shared on the version handed out */
        uint64_t pinned;     /* its number */
        bool retired;        /* a version was moved to the trash by this process */
        char *versions_path;
        BuildCacheParams p;
        size_t n_paths;
};

size_t build_cache_n_paths(const BuildCache *c) {
        return c->n_paths;
}

char *const *build_cache_paths(const BuildCache *c) {
        return c->p.paths;
}

const char *build_cache_versions_path(const BuildCache *c) {
        return c->versions_path;
}

static void remove_trash(BuildCache *c);

void build_cache_free(BuildCache *c) {
        if (!c)
                return;
        /* What this job retired goes now, after its result (a version of 22,000 entries takes
         * about 150 ms to remove). */
        if (c->retired)
                remove_trash(c);
        safe_close(c->pin_fd);
        safe_close(c->take_in_lock_fd);
        safe_close(c->lock_fd);
        safe_close(c->versions_fd);
        safe_close(c->dir_fd);
        free(c->versions_path);
        free(c);
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

static int read_number(int dir_fd, const char *name, uint64_t *ret) {
        char buf[META_MAX], *end;
        int r = read_small(dir_fd, name, buf);
        if (r == -ENOENT) {
                *ret = 0;
                return 0;
        }
        if (r < 0)
                return r;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        return errno || end == buf || (*end && *end != '\n') ? -EBADMSG : (*ret = v, 0);
}

static int write_number(int dir_fd, const char *name, uint64_t v) {
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", v);
        return write_file_replace_at(dir_fd, name, buf, (size_t) n, 0600, 0, 0);
}

static void version_name(uint64_t v, char buf[static VERSION_NAME_MAX]) {
        snprintf(buf, VERSION_NAME_MAX, "%" PRIu64, v);
}

/* A version's number from its name: decimal, canonical, in range; -1 otherwise. */
static int64_t version_of(const char *name) {
        char *end, canon[VERSION_NAME_MAX];
        errno = 0;
        unsigned long long v = strtoull(name, &end, 10);
        if (errno || end == name || *end || v > VERSION_MAX)
                return -1;
        version_name(v, canon);
        return streq(canon, name) ? (int64_t) v : -1;
}

/* ---- versions --------------------------------------------------------------------------- */

/* Version n's state (its meta; version 0 is the empty cache). */
static int version_state(BuildCache *c, uint64_t n, BuildCacheState *ret) {
        char buf[META_MAX], tree[GIT_OID_HEX_SIZE], name[VERSION_NAME_MAX];
        BuildCacheState s = { .version = n };
        if (n > 0) {
                version_name(n, name);
                _cleanup_close_ int v = openat(c->versions_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (v < 0)
                        return -errno;
                int r = read_small(v, META, buf);
                if (r < 0)
                        return r;
                if (sscanf(buf, "%64s %" SCNu64 " %" SCNu64 " %" SCNu64, tree, &s.bytes, &s.entries, &s.files) != 4 ||
                    strlen(tree) != 64)
                        return -EBADMSG;
                memcpy(s.tree, tree, sizeof(s.tree));
        }
        *ret = s;
        return 0;
}

/* The current cache's state, under the lock. */
static int read_state(BuildCache *c, BuildCacheState *ret) {
        uint64_t epoch, cur;
        int r = read_number(c->dir_fd, EPOCH, &epoch);
        if (r >= 0)
                r = read_number(c->dir_fd, CURRENT, &cur);
        if (r >= 0)
                r = version_state(c, cur, ret);
        if (r >= 0)
                ret->epoch = epoch;
        return r;
}

int build_cache_state(BuildCache *c, BuildCacheState *ret, TfwError *e) {
        int r = lock(c, LOCK_SH);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot lock the cache: %s", strerror(-r));
        r = read_state(c, ret);
        unlock(c);
        return r < 0 ? tfw_error(e, -r, "build_cache", "cannot read the cache's state: %s", strerror(-r)) : 0;
}

/* Version 0, the empty cache: its data/<i> the job's empty directories, its pin. */
static int make_empty_version(BuildCache *c) {
        _cleanup_close_ int v = -EBADF, data = -EBADF, pin = -EBADF;
        if (mkdirat(c->versions_fd, "0", 0700) < 0 && errno != EEXIST)
                return -errno;
        if ((v = open_dir_at(c->versions_fd, "0")) < 0)
                return v;
        if (pass_for_capsule_root(v, PASS_MODE) < 0)
                return -errno;
        if (mkdirat(v, DATA, DATA_MODE) < 0 && errno != EEXIST)
                return -errno;
        if ((data = open_dir_at(v, DATA)) < 0)
                return data;
        if (pass_for_capsule_root(data, DATA_MODE) < 0)
                return -errno;
        for (size_t i = 0; i < c->n_paths; i++) {
                char name[24];
                snprintf(name, sizeof(name), "%zu", i);
                if (mkdirat(data, name, SLOT_MODE) < 0 && errno != EEXIST)
                        return -errno;
                _cleanup_close_ int slot = open_dir_at(data, name);
                if (slot < 0)
                        return slot;
                if (fchown(slot, c->p.uid, c->p.gid) < 0 || fchmod(slot, SLOT_MODE) < 0)
                        return -errno;
        }
        pin = openat(v, PIN, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        return pin < 0 ? -errno : 0;
}

/* The versions that are not current and that no job pins (never version 0), moved out of v/
 * under the lock (so that current cannot change meanwhile), to be removed after it. */
static void retire_versions(BuildCache *c) {
        uint64_t cur = 0;
        if (lock(c, LOCK_SH) < 0)
                return;
        _cleanup_closedir_ DIR *v = read_number(c->dir_fd, CURRENT, &cur) >= 0 ? opendir_fd(c->versions_fd) : NULL;
        struct dirent *de;
        while (v && (de = readdir(v))) {
                char trash[sizeof(TRASH_PREFIX) + VERSION_NAME_MAX];
                int64_t n = version_of(de->d_name);
                if (n <= 0 || (uint64_t) n == cur || (uint64_t) n == c->pinned)
                        continue;
                _cleanup_close_ int dir = openat(c->versions_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int pin = dir >= 0 ? openat(dir, PIN, O_RDWR | O_NOFOLLOW | O_CLOEXEC) : -EBADF;
                snprintf(trash, sizeof(trash), TRASH_PREFIX "%" PRIi64, n);
                /* A version is made whole in a take-in and renamed here with its pin. */
                if (pin >= 0 && flock(pin, LOCK_EX | LOCK_NB) >= 0 && renameat(c->versions_fd, de->d_name, c->dir_fd, trash) >= 0)
                        c->retired = true;
        }
        unlock(c);
}

static void remove_trash(BuildCache *c) {
        _cleanup_closedir_ DIR *d = opendir_fd(c->dir_fd);
        struct dirent *de;
        while (d && (de = readdir(d)))
                if (strncmp(de->d_name, TRASH_PREFIX, strlen(TRASH_PREFIX)) == 0)
                        (void) rm_rf_at(c->dir_fd, de->d_name);
        c->retired = false;
}

/* What a process that died left, and what nobody needs: a take-in whose lock nobody holds, a
 * version retired (retire_versions()) and not removed yet. */
static void sweep(BuildCache *c) {
        retire_versions(c);
        remove_trash(c);
        _cleanup_closedir_ DIR *d = opendir_fd(c->dir_fd);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                bool fresh = strncmp(de->d_name, FRESH_PREFIX, strlen(FRESH_PREFIX)) == 0;
                if (!fresh && strncmp(de->d_name, TAKE_IN_PREFIX, strlen(TAKE_IN_PREFIX)) != 0)
                        continue;
                _cleanup_close_ int in = openat(c->dir_fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int l = in >= 0 && !fresh ? openat(in, TAKE_IN_LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC) : -EBADF;
                struct stat st;
                /* One being made: its maker is between mkdir and the rename, or died there; only
                 * an old one goes (a take-in is made in microseconds). */
                bool stale = !fresh && l >= 0 ? flock(l, LOCK_EX | LOCK_NB) >= 0
                                              : in >= 0 && fstat(in, &st) >= 0 && st.st_ctime + TAKE_IN_FRESH_SECONDS < time(NULL);
                if (stale)
                        (void) rm_rf_at(c->dir_fd, de->d_name);
        }
}

static int open_store(BuildCache *c, int store_fd, TfwError *e) {
        if (mkdirat(store_fd, CACHE_DIR, 0700) < 0 && errno != EEXIST)
                return tfw_error(e, errno, "build_cache", "cannot make the store's cache: %m");
        c->dir_fd = open_dir_at(store_fd, CACHE_DIR);
        if (c->dir_fd < 0)
                return tfw_error(e, -c->dir_fd, "build_cache", "cannot open the store's cache: %s", strerror(-c->dir_fd));
        if (fchmod(c->dir_fd, 0700) < 0)
                return tfw_error(e, errno, "build_cache", "cannot set the mode of the store's cache: %m");
        c->lock_fd = openat(c->dir_fd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (c->lock_fd < 0)
                return tfw_error(e, errno, "build_cache", "cannot open the cache's lock: %m");
        if ((mkdirat(c->dir_fd, VERSIONS, 0700) < 0 && errno != EEXIST) ||
            (mkdirat(c->dir_fd, VERSIONS_RO, 0700) < 0 && errno != EEXIST))
                return tfw_error(e, errno, "build_cache", "cannot make the store's cache versions: %m");
        c->versions_fd = open_dir_at(c->dir_fd, VERSIONS);
        if (c->versions_fd < 0)
                return tfw_error(e, -c->versions_fd, "build_cache", "cannot open the store's cache versions: %s",
                                 strerror(-c->versions_fd));
        if (pass_for_capsule_root(c->versions_fd, PASS_MODE) < 0)
                return tfw_error(e, errno, "build_cache", "cannot set the mode of the store's cache versions: %m");
        int r = make_empty_version(c);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot make the empty cache: %s", strerror(-r));
        r = gen_store_mount_ro(c->dir_fd, VERSIONS_RO, c->versions_fd);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot mount the cache's versions read-only: %s", strerror(-r));
        if (asprintf(&c->versions_path, "%s/" CACHE_DIR "/" VERSIONS_RO, c->p.store_path) < 0) {
                c->versions_path = NULL;
                return tfw_error(e, ENOMEM, "build_cache", "out of memory");
        }
        return 0;
}

int build_cache_open(int store_fd, const BuildCacheParams *p, BuildCache **ret, TfwError *e) {
        size_t n = 0;
        while (p->paths && p->paths[n])
                n++;
        if (n == 0 || n > BUILD_CACHE_PATHS_MAX)
                return tfw_error(e, EINVAL, "build_cache", "between 1 and %d cache paths", BUILD_CACHE_PATHS_MAX);
        if (!p->store_path || p->store_path[0] != '/')
                return tfw_error(e, EINVAL, "build_cache", "the store's path must be absolute");
        _cleanup_(build_cache_freep) BuildCache *c = calloc(1, sizeof(*c));
        if (!c)
                return tfw_error(e, ENOMEM, "build_cache", "out of memory");
        *c = (BuildCache) { .dir_fd = -EBADF, .versions_fd = -EBADF, .lock_fd = -EBADF, .take_in_lock_fd = -EBADF,
                            .pin_fd = -EBADF, .p = *p, .n_paths = n };
        int r = open_store(c, store_fd, e);
        if (r < 0)
                return r;
        sweep(c);
        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- the lane's mount points -------------------------------------------------------------------------- */

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
        bool made = false;
        for (size_t i = 0; i < c->n_paths; i++) {
                int r = mount_point(c, lane->tree_fd, c->p.paths[i], &made, e);
                if (r < 0)
                        return r;
        }
        *ret_made = made;
        return 0;
}

int build_cache_hand_out(BuildCache *c, BuildCacheState *ret, TfwError *e) {
        char name[VERSION_NAME_MAX];
        if (c->pin_fd >= 0)
                return tfw_error(e, EBUSY, "build_cache", "the cache was handed out already");
        int r = lock(c, LOCK_SH);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot lock the cache: %s", strerror(-r));
        BuildCacheState s;
        r = read_state(c, &s);
        if (r >= 0) {
                version_name(s.version, name);
                _cleanup_close_ int v = openat(c->versions_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                c->pin_fd = v >= 0 ? openat(v, PIN, O_RDWR | O_NOFOLLOW | O_CLOEXEC) : -EBADF;
                if (c->pin_fd < 0 || flock(c->pin_fd, LOCK_SH) < 0)
                        r = -errno;
        }
        unlock(c);
        if (r < 0) {
                c->pin_fd = safe_close(c->pin_fd);
                return tfw_error(e, -r, "build_cache", "cannot hand the cache out: %s", strerror(-r));
        }
        c->pinned = s.version;
        *ret = s;
        return 0;
}

/* ---- the take-in ------------------------------------------------------------------------ */

static int take_in_name(const char *job_id, char buf[static NAME_MAX + 1]) {
        int n = snprintf(buf, NAME_MAX + 1, TAKE_IN_PREFIX "%s", job_id);
        return n > 0 && n <= NAME_MAX && !strchr(job_id, '/') && job_id[0] ? 0 : -EINVAL;
}

/* The take-in is made as new-<job> and named in-<job> only once its lock is held: a sweep
 * meanwhile never takes it for one whose process died. */
int build_cache_take_in_begin(BuildCache *c, const char *job_id, int *ret_fd, TfwError *e) {
        char name[NAME_MAX + 1], fresh[NAME_MAX + 1];
        if (take_in_name(job_id, name) < 0 || snprintf(fresh, sizeof(fresh), FRESH_PREFIX "%s", job_id) >= (int) sizeof(fresh))
                return tfw_error(e, EINVAL, "build_cache", "invalid job id");
        int r = rm_rf_at(c->dir_fd, name);
        if (r >= 0)
                r = rm_rf_at(c->dir_fd, fresh);
        if (r >= 0 && mkdirat(c->dir_fd, fresh, 0700) < 0)
                r = -errno;
        _cleanup_close_ int fd = -EBADF;
        int data = -EBADF;
        if (r >= 0 && (fd = open_dir_at(c->dir_fd, fresh)) < 0)
                r = fd;
        if (r >= 0)
                r = pass_for_capsule_root(fd, PASS_MODE);
        if (r >= 0) {
                safe_close(c->take_in_lock_fd);
                c->take_in_lock_fd = openat(fd, TAKE_IN_LOCK, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (c->take_in_lock_fd < 0 || flock(c->take_in_lock_fd, LOCK_EX | LOCK_NB) < 0)
                        r = -errno;
        }
        if (r >= 0 && mkdirat(fd, DATA, DATA_MODE) < 0)
                r = -errno;
        if (r >= 0 && (data = open_dir_at(fd, DATA)) < 0)
                r = data;
        if (r >= 0) /* whatever the umask */
                r = pass_for_capsule_root(data, DATA_MODE);
        if (r >= 0 && renameat2(c->dir_fd, fresh, c->dir_fd, name, RENAME_NOREPLACE) < 0)
                r = -errno;
        if (r < 0) {
                safe_close(data);
                (void) rm_rf_at(c->dir_fd, fresh);
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

/* The next version's number: one past the largest there is (under the exclusive lock). */
static int next_version(BuildCache *c, uint64_t *ret) {
        _cleanup_closedir_ DIR *d = opendir_fd(c->versions_fd);
        uint64_t max = 0;
        if (!d)
                return -errno;
        struct dirent *de;
        while ((de = readdir(d))) {
                int64_t n = version_of(de->d_name);
                if (n > 0 && (uint64_t) n > max)
                        max = (uint64_t) n;
        }
        if (max >= VERSION_MAX)
                return -EOVERFLOW;
        *ret = max + 1;
        return 0;
}

/* The take-in made whole: its tree id and size within the bounds, meta, oids and pin written. */
static int take_in_seal(BuildCache *c, int in, int data, int base_version, BuildCacheState *s, TfwError *e) {
        _cleanup_(build_cache_oids_freep) BuildCacheOids *prev = NULL, *oids = NULL;
        char meta[META_MAX];
        (void) build_cache_oids_load(base_version, OIDS, c->p.max_entries + BUILD_CACHE_PATHS_MAX, &prev);
        TfwError te = {};
        int r = build_cache_tree_id(data, c->p.paths, c->p.max_entries, prev, &oids, s, &te);
        if (r == -E2BIG)
                return tfw_error(e, E2BIG, "cache_too_large", "the cache would hold more than %" PRIu64 " entries",
                                 c->p.max_entries);
        if (r < 0) {
                *e = te;
                return r;
        }
        if (s->entries > c->p.max_entries + c->n_paths || s->bytes > c->p.max_bytes)
                return tfw_error(e, E2BIG, "cache_too_large", "the cache would hold %" PRIu64 " bytes in %" PRIu64
                                 " entries, over its bounds (%" PRIu64 " bytes, %" PRIu64 " entries)",
                                 s->bytes, s->entries, c->p.max_bytes, c->p.max_entries);
        int n = snprintf(meta, sizeof(meta), "%s %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", s->tree, s->bytes, s->entries,
                         s->files);
        r = build_cache_oids_save(in, OIDS, oids);
        if (r >= 0)
                r = write_file_replace_at(in, META, meta, (size_t) n, 0600, 0, 0);
        _cleanup_close_ int pin = r >= 0 ? openat(in, PIN, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600) : -EBADF;
        if (r >= 0 && pin < 0)
                r = -errno;
        return r < 0 ? tfw_error(e, -r, "build_cache", "cannot write the take-in's meta: %s", strerror(-r)) : 0;
}

/* Under the exclusive lock: the take-in becomes version n and current, unless a clear came. */
static int take_in_publish(BuildCache *c, const char *name, uint64_t since_epoch, BuildCacheState *s, TfwError *e) {
        char vname[VERSION_NAME_MAX] = "";
        uint64_t epoch = 0, n = 0;
        int r = lock(c, LOCK_EX);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot lock the cache: %s", strerror(-r));
        r = read_number(c->dir_fd, EPOCH, &epoch);
        if (r >= 0 && epoch != since_epoch)
                r = -ESTALE;
        if (r >= 0)
                r = next_version(c, &n);
        if (r >= 0) {
                version_name(n, vname);
                if (renameat(c->dir_fd, name, c->versions_fd, vname) < 0)
                        r = -errno;
        }
        if (r >= 0 && (r = write_number(c->dir_fd, CURRENT, n)) < 0)
                (void) rm_rf_at(c->versions_fd, vname);
        unlock(c);
        if (r == -ESTALE)
                return tfw_error(e, ESTALE, "cache_cleared", "the cache was cleared while the job ran: nothing kept");
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot replace the cache: %s", strerror(-r));
        s->epoch = epoch;
        s->version = n;
        return 0;
}

int build_cache_take_in_commit(BuildCache *c, const char *job_id, uint64_t since_epoch, BuildCacheState *ret,
                               TfwError *e) {
        char name[NAME_MAX + 1], vname[VERSION_NAME_MAX];
        BuildCacheState s = {};
        CacheMerge m;
        int r;

        if (take_in_name(job_id, name) < 0)
                return tfw_error(e, EINVAL, "build_cache", "invalid job id");
        if (c->pin_fd < 0)
                return tfw_error(e, EINVAL, "build_cache", "a take-in without a hand-out");
        version_name(c->pinned, vname);
        _cleanup_close_ int in = open_dir_at(c->dir_fd, name);
        _cleanup_close_ int data = in >= 0 ? open_dir_at(in, DATA) : in;
        _cleanup_close_ int base = open_dir_at(c->versions_fd, vname);
        _cleanup_close_ int base_data = base >= 0 ? open_dir_at(base, DATA) : base;
        if (data < 0 || base_data < 0) {
                r = tfw_error(e, data < 0 ? -data : -base_data, "build_cache", "cannot open the take-in: %s",
                              strerror(data < 0 ? -data : -base_data));
                goto out;
        }
        r = cache_merge(base_data, data, c->n_paths, c->p.uid, c->p.gid, c->p.max_entries, &m, e);
        if (r >= 0 && !m.changed) {
                /* Nothing to keep: the cache stays as it is, whatever happened to it meanwhile. */
                r = version_state(c, c->pinned, &s);
                if (r < 0)
                        r = tfw_error(e, -r, "build_cache", "cannot read the cache's state: %s", strerror(-r));
                s.epoch = since_epoch;
                s.files_unchanged = s.files;
                goto out;
        }
        if (r >= 0)
                r = take_in_seal(c, in, data, base, &s, e);
        if (r >= 0)
                r = take_in_publish(c, name, since_epoch, &s, e);
        s.changed = r >= 0;
        s.files_unchanged = m.files_linked;
out:
        /* A take-in refused, or made nothing; published, it is not there any more. */
        (void) rm_rf_at(c->dir_fd, name);
        if (r >= 0) {
                *ret = s;
                c->pin_fd = safe_close(c->pin_fd);
                c->pinned = 0;
                retire_versions(c); /* removed by build_cache_free(), after the result */
        }
        return r;
}

int build_cache_clear(BuildCache *c, TfwError *e) {
        int r = lock(c, LOCK_EX);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot lock the cache: %s", strerror(-r));
        uint64_t epoch;
        r = read_number(c->dir_fd, EPOCH, &epoch);
        if (r >= 0)
                r = write_number(c->dir_fd, EPOCH, epoch + 1);
        /* One unlink under the lock: the next job is handed the empty cache. */
        if (r >= 0 && unlinkat(c->dir_fd, CURRENT, 0) < 0 && errno != ENOENT)
                r = -errno;
        unlock(c);
        if (r >= 0)
                sweep(c);
        return r < 0 ? tfw_error(e, -r, "build_cache", "cannot clear the cache: %s", strerror(-r)) : 0;
}

/* ---- a store found at start ------------------------------------------------------------- */

/* Is version n (current) whole: meta, oids, pin and data there, and data's tree id, bytes,
 * entries and files those of its meta? 0 yes; 1 no (why set); negative errno. */
static int version_whole(BuildCache *c, uint64_t n, char *why, size_t why_size) {
        char name[VERSION_NAME_MAX];
        BuildCacheState meta, now;
        _cleanup_(build_cache_oids_freep) BuildCacheOids *oids = NULL;
        version_name(n, name);
        int r = version_state(c, n, &meta);
        if (r < 0)
                return snprintf(why, why_size, "its meta cannot be read: %s", strerror(-r)), 1;
        _cleanup_close_ int v = open_dir_at(c->versions_fd, name);
        _cleanup_close_ int data = v >= 0 ? open_dir_at(v, DATA) : v;
        if (data < 0)
                return snprintf(why, why_size, "its data cannot be opened: %s", strerror(-data)), 1;
        if (faccessat(v, PIN, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
                return snprintf(why, why_size, "it has no pin: %m"), 1;
        r = build_cache_oids_load(v, OIDS, c->p.max_entries + BUILD_CACHE_PATHS_MAX, &oids);
        if (r < 0)
                return snprintf(why, why_size, "its oids cannot be read: %s", strerror(-r)), 1;
        TfwError te = {};
        r = build_cache_tree_id(data, c->p.paths, c->p.max_entries, oids, NULL, &now, &te);
        if (r < 0)
                return snprintf(why, why_size, "its data cannot be read: %.600s", te.message[0] ? te.message : strerror(-r)), 1;
        if (memcmp(now.tree, meta.tree, sizeof(meta.tree)) != 0 || now.bytes != meta.bytes ||
            now.entries != meta.entries || now.files != meta.files)
                return snprintf(why, why_size, "its data is not what its meta describes (tree %.12s, %" PRIu64
                                " bytes; the meta says %.12s, %" PRIu64 " bytes)", now.tree, now.bytes, meta.tree,
                                meta.bytes), 1;
        return 0;
}

/* Every new-* (a version half-made by a process that is gone: nothing of this worker runs yet). */
static int drop_fresh(BuildCache *c, GenStoreReport report, void *userdata) {
        _cleanup_closedir_ DIR *d = opendir_fd(c->dir_fd);
        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir(d));) {
                if (strncmp(de->d_name, FRESH_PREFIX, strlen(FRESH_PREFIX)) != 0)
                        continue;
                char what[NAME_MAX + 16];
                snprintf(what, sizeof(what), "cache/%s", de->d_name);
                int r = rm_rf_at(c->dir_fd, de->d_name);
                report(userdata, what, r < 0 ? "a take-in half-made: cannot be removed" : "a take-in half-made: removed");
                if (r < 0)
                        return r;
        }
        return 0;
}

int build_cache_check(int store_fd, const BuildCacheParams *p, GenStoreReport report, void *userdata, TfwError *e) {
        _cleanup_(build_cache_freep) BuildCache *c = NULL;
        char why[768], what[64];
        uint64_t cur = 0;
        /* Opening sweeps: take-ins no process holds, versions retired or neither current nor
         * pinned (a pin goes with its process). */
        int r = build_cache_open(store_fd, p, &c, e);
        if (r < 0)
                return r;
        r = drop_fresh(c, report, userdata);
        if (r >= 0)
                r = lock(c, LOCK_EX);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot check the cache: %s", strerror(-r));
        r = read_number(c->dir_fd, CURRENT, &cur);
        int q = r < 0 ? (snprintf(why, sizeof(why), "its number cannot be read: %s", strerror(-r)), 1)
                : cur > 0 ? version_whole(c, cur, why, sizeof(why)) : 0;
        if (q < 0)
                snprintf(why, sizeof(why), "cannot be checked: %s", strerror(-q));
        if (q != 0 && unlinkat(c->dir_fd, CURRENT, 0) < 0 && errno != ENOENT)
                r = -errno;
        unlock(c);
        if (q != 0) {
                snprintf(what, sizeof(what), "cache version %" PRIu64, cur);
                size_t n = strlen(why);
                snprintf(why + n, sizeof(why) - n, "; dropped: the next job starts from the empty cache");
                report(userdata, what, why);
                sweep(c);
        }
        return r < 0 ? tfw_error(e, -r, "build_cache", "cannot drop the cache's current version: %s", strerror(-r)) : 0;
}
