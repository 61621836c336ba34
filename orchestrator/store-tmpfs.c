/* SPDX-License-Identifier: MIT */
/* The generation store's tmpfs, mounted where it outlives the worker. See store-tmpfs.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/root-dir.h"
#include "orchestrator/scratch.h"
#include "orchestrator/store-tmpfs.h"
#include "snapshot/build-cache.h"
#include "snapshot/gen-store.h"

#define STAMP_MAX (64u << 10)
#define STAMP_FORMAT 1
#define DIV_ROUND_UP(a, b) (((a) + (b) - 1) / (b))

/* The parser's formula counts concurrency + 1 lanes, which scratch_store_lanes() never cuts. */
_Static_assert(CONFIG_CONCURRENCY_MAX + 1 <= GEN_STORE_LANES_MAX, "every lane of the store is sized");

void store_tmpfs_size(const Config *c, uint64_t *ret_bytes, uint64_t *ret_inodes) {
        /* One formula, the parser's (docs/config.md, "Sizing the store"). */
        *ret_inodes = config_store_tmpfs_inodes(c);
        *ret_bytes = config_store_tmpfs_bytes(c);
}

/* Is state_fd/store a tmpfs mounted there? 1 yes, 0 nothing mounted, -EEXIST something else. */
static int mounted(int state_fd) {
        int r = mount_root_at(state_fd, STORE_TMPFS_DIR);
        if (r <= 0)
                return r == -ENOENT ? 0 : r;
        _cleanup_close_ int fd = open_dir_at(state_fd, STORE_TMPFS_DIR);
        struct statfs sf;
        if (fd < 0 || fstatfs(fd, &sf) < 0)
                return fd < 0 ? fd : -errno;
        return sf.f_type == TMPFS_MAGIC ? 1 : -EEXIST;
}

int store_tmpfs_mount(int state_fd, const Config *c, bool *ret_made, TfwError *e) {
        char size[32], inodes[32];
        uint64_t bytes, n;
        *ret_made = false;
        int r = mounted(state_fd);
        if (r == -EEXIST)
                return tfw_error(e, EEXIST, "store_tmpfs", "state_dir/" STORE_TMPFS_DIR " has another file system mounted on it");
        if (r < 0)
                return tfw_error(e, -r, "store_tmpfs", "cannot look at state_dir/" STORE_TMPFS_DIR ": %s", strerror(-r));
        if (r > 0)
                return 0;
        store_tmpfs_size(c, &bytes, &n);
        snprintf(size, sizeof(size), "%" PRIu64, bytes);
        snprintf(inodes, sizeof(inodes), "%" PRIu64, n);
        _cleanup_close_ int mnt = scratch_tmpfs_detached(STORE_TMPFS_SOURCE, size, inodes, true, "generation store", e);
        if (mnt < 0)
                return mnt;
        if (mkdirat(state_fd, STORE_TMPFS_DIR, 0700) < 0 && errno != EEXIST)
                return tfw_error(e, errno, "store_tmpfs", "cannot make state_dir/" STORE_TMPFS_DIR ": %m");
        _cleanup_close_ int target = open_dir_at(state_fd, STORE_TMPFS_DIR);
        if (target < 0)
                return tfw_error(e, -target, "store_tmpfs", "cannot open state_dir/" STORE_TMPFS_DIR ": %s", strerror(-target));
        if (move_mount(mnt, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return tfw_error(e, errno, "store_tmpfs", "cannot mount the generation store on state_dir/" STORE_TMPFS_DIR ": %m");
        *ret_made = true;
        return 0;
}

int store_tmpfs_unmount(int state_fd, TfwError *e) {
        char path[64];
        int r = mounted(state_fd);
        if (r < 0 && r != -EEXIST)
                return tfw_error(e, -r, "store_tmpfs", "cannot look at state_dir/" STORE_TMPFS_DIR ": %s", strerror(-r));
        snprintf(path, sizeof(path), "/proc/self/fd/%d/" STORE_TMPFS_DIR, state_fd);
        if (r > 0 && umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                return tfw_error(e, errno, "store_tmpfs", "cannot unmount state_dir/" STORE_TMPFS_DIR ": %m");
        if (r == -EEXIST)
                return tfw_error(e, EEXIST, "store_tmpfs", "state_dir/" STORE_TMPFS_DIR " has another file system mounted on it: left");
        if (unlinkat(state_fd, STORE_TMPFS_DIR, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return tfw_error(e, errno, "store_tmpfs", "cannot remove state_dir/" STORE_TMPFS_DIR ": %m");
        return 0;
}

/* What the store's contents depend on: another value of any, and they are not this worker's. */
static json_t *stamp_of(const Config *c) {
        uint64_t bytes, inodes;
        store_tmpfs_size(c, &bytes, &inodes);
        json_t *paths = json_array();
        for (size_t i = 0; paths && c->cache.paths && c->cache.paths[i]; i++)
                if (json_array_append_new(paths, json_string(c->cache.paths[i])) < 0)
                        return json_decref(paths), NULL;
        return json_pack("{s:i, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:I, s:o, s:I, s:I}", "format", STAMP_FORMAT, "copy_uid",
                         (json_int_t) c->container_uid, "copy_gid", (json_int_t) c->container_gid, "workspace",
                         c->workspace, "bytes", (json_int_t) bytes, "inodes", (json_int_t) inodes, "lanes",
                         (json_int_t) scratch_store_lanes(c), "max_snapshot_bytes",
                         (json_int_t) c->limits.max_snapshot_bytes, "max_snapshot_entries",
                         (json_int_t) c->limits.max_snapshot_entries, "cache_paths", paths, "cache_max_bytes",
                         (json_int_t) c->cache.max_bytes, "cache_max_entries", (json_int_t) c->cache.max_entries);
}

/* Why the store is not this configuration's (why: "" when it is). */
static void stamp_differs(int store_fd, const json_t *want, char *why, size_t why_size) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        _cleanup_(json_decrefp) json_t *have = NULL;
        const char *key;
        json_t *v;

        why[0] = 0;
        _cleanup_close_ int fd = openat(store_fd, STORE_TMPFS_STAMP, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                _cleanup_closedir_ DIR *d = opendir_fd(store_fd);
                struct dirent *de;
                while (d && (de = readdir(d)))
                        if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) {
                                snprintf(why, why_size, "it has no stamp of the configuration it was made for");
                                return;
                        }
                return;
        }
        if (fd < 0 || read_full_fd_bounded(fd, STAMP_MAX, &buf, &len) < 0 || !(have = json_loadb(buf, len, 0, NULL))) {
                snprintf(why, why_size, "its stamp cannot be read");
                return;
        }
        json_object_foreach((json_t *) want, key, v)
                if (!json_equal(v, json_object_get(have, key))) {
                        snprintf(why, why_size, "it was made for another configuration (%s differs)", key);
                        return;
                }
}

/* Its size and inodes made those of c (the store is empty). */
static int resize(int store_fd, const Config *c, TfwError *e) {
        char size[32], inodes[32];
        uint64_t bytes, n;
        struct statfs sf;
        store_tmpfs_size(c, &bytes, &n);
        if (fstatfs(store_fd, &sf) < 0)
                return tfw_error(e, errno, "store_tmpfs", "cannot read the generation store's size: %m");
        if ((uint64_t) sf.f_blocks == DIV_ROUND_UP(bytes, (uint64_t) sf.f_bsize) && (uint64_t) sf.f_files == n)
                return 0;
        snprintf(size, sizeof(size), "%" PRIu64, bytes);
        snprintf(inodes, sizeof(inodes), "%" PRIu64, n);
        _cleanup_close_ int fs = fspick(store_fd, "", FSPICK_EMPTY_PATH | FSPICK_CLOEXEC);
        if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "size", size, 0) < 0 ||
            fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", inodes, 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_RECONFIGURE, NULL, NULL, 0) < 0)
                return tfw_error(e, errno, "store_tmpfs", "cannot resize the generation store to %s bytes, %s inodes: %m",
                                 size, inodes);
        return 0;
}

static void say_drop(void *userdata, const char *what, const char *why) {
        worker_say(userdata, LOG_NOTICE, "generation store: %s: %s", what, why);
}

/* Emptied whole, resized, stamped. */
static int renew(Worker *w, int store_fd, const json_t *stamp, TfwError *e) {
        int r = rm_rf_children(store_fd);
        if (r < 0)
                return tfw_error(e, -r, "store_tmpfs", "cannot empty the generation store: %s", strerror(-r));
        r = resize(store_fd, w->config, e);
        if (r < 0)
                return r;
        _cleanup_free_ char *s = json_dumps(stamp, JSON_COMPACT | JSON_SORT_KEYS);
        r = s ? write_file_replace_at(store_fd, STORE_TMPFS_STAMP, s, strlen(s), 0600, 0, 0) : -ENOMEM;
        return r < 0 ? tfw_error(e, -r, "store_tmpfs", "cannot write the generation store's stamp: %s", strerror(-r)) : 0;
}

/* The lanes and the cache, each checked; what fails is dropped (said). */
static int check_contents(Worker *w, int store_fd, TfwError *e) {
        const Config *c = w->config;
        char path[PATH_MAX];
        int r = gen_store_check(store_fd, scratch_store_lanes(c), c->limits.max_snapshot_entries, say_drop, w);
        if (r < 0)
                return tfw_error(e, -r, "store_tmpfs", "a lane of the generation store cannot be emptied: %s", strerror(-r));
        if (!c->cache.paths || scratch_store_path(c, path, sizeof(path)) < 0)
                return 0;
        BuildCacheParams p = { .paths = c->cache.paths, .store_path = path, .max_bytes = c->cache.max_bytes,
                               .max_entries = c->cache.max_entries, .uid = c->container_uid, .gid = c->container_gid };
        return build_cache_check(store_fd, &p, say_drop, w, e);
}

/* state_dir opened again in this namespace (the worker's descriptors name the host's mounts,
 * which a bind mount cannot be made from) and checked to be the same directory. */
static int state_again(Worker *w, TfwError *e) {
        struct stat a, b;
        int fd = root_dir_open("key 'state_dir'", w->config->state_dir, false, 0, 0, 0, NULL, e);
        if (fd < 0)
                return fd;
        if (fstat(fd, &a) < 0 || fstat(w->dirs.state_fd, &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
                safe_close(fd);
                return tfw_error(e, EXDEV, "store_tmpfs", "state_dir changed while the worker started");
        }
        return fd;
}

int store_tmpfs_open(Worker *w, TfwError *e) {
        char why[256];
        struct statfs sf;
        _cleanup_close_ int state = state_again(w, e);
        if (state < 0)
                return state;
        int r = mounted(state);
        if (r == 0)
                return tfw_error(e, ENOENT, "store_tmpfs", "state_dir/" STORE_TMPFS_DIR " is not mounted");
        if (r < 0)
                return tfw_error(e, -r, "store_tmpfs", "state_dir/" STORE_TMPFS_DIR " is not the generation store's tmpfs: %s",
                                 strerror(-r));
        _cleanup_close_ int fd = open_dir_at(state, STORE_TMPFS_DIR);
        if (fd < 0 || fstatfs(fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC)
                return tfw_error(e, EXDEV, "store_tmpfs", "state_dir/" STORE_TMPFS_DIR " is not a tmpfs");
        if (fchown(fd, 0, 0) < 0 || fchmod(fd, 0700) < 0)
                return tfw_error(e, errno, "store_tmpfs", "cannot make state_dir/" STORE_TMPFS_DIR " root's alone: %m");
        _cleanup_(json_decrefp) json_t *stamp = stamp_of(w->config);
        if (!stamp)
                return tfw_error(e, ENOMEM, "store_tmpfs", "out of memory");
        stamp_differs(fd, stamp, why, sizeof(why));
        uint64_t bytes, inodes;
        store_tmpfs_size(w->config, &bytes, &inodes);
        if (!why[0] && ((uint64_t) sf.f_blocks != DIV_ROUND_UP(bytes, (uint64_t) sf.f_bsize) || (uint64_t) sf.f_files != inodes))
                snprintf(why, sizeof(why), "its size is not the configuration's");
        if (why[0] || faccessat(fd, STORE_TMPFS_STAMP, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                if (why[0])
                        worker_say(w, LOG_NOTICE, "generation store: the whole store: %s: emptied", why);
                r = renew(w, fd, stamp, e);
                if (r < 0)
                        return r;
        }
        r = check_contents(w, fd, e);
        if (r < 0) {
                TfwError re = {0};
                say_drop(w, "the whole store", e->message);
                r = renew(w, fd, stamp, &re);
                if (r < 0) {
                        *e = re;
                        return r;
                }
        }
        safe_close(w->dirs.store_fd);
        w->dirs.store_fd = TAKE_FD(fd);
        return 0;
}
