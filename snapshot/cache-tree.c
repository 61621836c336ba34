/* SPDX-License-Identifier: MIT */
/* The build cache's tree id (build-cache.h): git's SHA-256 tree of the cache as /work shows it,
 * computed from a take-in. Blob ids are kept by inode beside each cache ("oids"): the store's
 * files never change in place, so a take-in that kept files of the cache it was handed (hard
 * links: the same inodes) hashes only what the capsule sent. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/sha256.h"
#include "snapshot/build-cache.h"

#define LINK_DEPTH_MAX 256
#define OIDS_MAGIC "TFWOID01"

/* One file's blob id, known by its inode and what would tell a reused inode number apart. */
typedef struct OidRecord {
        uint64_t ino, size;
        int64_t mtime_sec;
        uint32_t mtime_nsec, pad;
        uint8_t oid[GIT_OID_SIZE];
} OidRecord;

struct BuildCacheOids {
        OidRecord *v;
        size_t n, cap;
};

void build_cache_oids_free(BuildCacheOids *o) {
        if (!o)
                return;
        free(o->v);
        free(o);
}

static int cmp_record(const void *a, const void *b) {
        const OidRecord *x = a, *y = b;
        return x->ino < y->ino ? -1 : x->ino > y->ino;
}

int build_cache_oids_load(int dir_fd, const char *name, uint64_t max_records, BuildCacheOids **ret) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        if (fd < 0)
                return -errno;
        int r = read_full_fd_bounded(fd, 8 + max_records * sizeof(OidRecord), &buf, &n);
        if (r < 0)
                return r;
        if (n < 8 || memcmp(buf, OIDS_MAGIC, 8) != 0 || (n - 8) % sizeof(OidRecord) != 0)
                return -EBADMSG;
        BuildCacheOids *o = calloc(1, sizeof(*o));
        if (!o)
                return -ENOMEM;
        o->n = o->cap = (n - 8) / sizeof(OidRecord);
        o->v = malloc(MAX(o->n, (size_t) 1) * sizeof(OidRecord));
        if (!o->v) {
                free(o);
                return -ENOMEM;
        }
        memcpy(o->v, buf + 8, o->n * sizeof(OidRecord));
        /* Sorted when written; sorted again here, so a damaged order only costs hashing. */
        qsort(o->v, o->n, sizeof(OidRecord), cmp_record);
        *ret = o;
        return 0;
}

int build_cache_oids_save(int dir_fd, const char *name, const BuildCacheOids *o) {
        size_t len = 8 + o->n * sizeof(OidRecord);
        _cleanup_free_ char *buf = malloc(len);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, OIDS_MAGIC, 8);
        memcpy(buf + 8, o->v, o->n * sizeof(OidRecord));
        return write_file_replace_at(dir_fd, name, buf, len, 0600, 0, 0);
}

static const OidRecord *oids_find(const BuildCacheOids *o, const struct stat *st) {
        if (!o)
                return NULL;
        OidRecord key = { .ino = (uint64_t) st->st_ino };
        const OidRecord *r = bsearch(&key, o->v, o->n, sizeof(OidRecord), cmp_record);
        if (!r || r->size != (uint64_t) st->st_size || r->mtime_sec != (int64_t) st->st_mtim.tv_sec ||
            r->mtime_nsec != (uint32_t) st->st_mtim.tv_nsec)
                return NULL;
        return r;
}

static int oids_add(BuildCacheOids *o, const struct stat *st, const uint8_t oid[static GIT_OID_SIZE]) {
        if (o->n == o->cap) {
                size_t cap = MAX((size_t) 256, 2 * o->cap);
                OidRecord *v = realloc(o->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                o->v = v;
                o->cap = cap;
        }
        OidRecord *r = &o->v[o->n++];
        *r = (OidRecord) { .ino = (uint64_t) st->st_ino, .size = (uint64_t) st->st_size,
                           .mtime_sec = (int64_t) st->st_mtim.tv_sec, .mtime_nsec = (uint32_t) st->st_mtim.tv_nsec };
        memcpy(r->oid, oid, GIT_OID_SIZE);
        return 0;
}

typedef struct TreeWalk {
        GitPathEntry *v;
        size_t n, cap;
        const BuildCacheOids *prev; /* blob ids known (NULL: none) */
        BuildCacheOids *out;        /* blob ids of this tree's files */
        uint64_t hashed;            /* files read and hashed */
        uint64_t files;             /* regular files */
        uint64_t max_entries, entries, bytes;
        char path[GIT_PATH_MAX + 1];
        Sha256 *h;
        uint8_t buf[128 * 1024];
} TreeWalk;

/* -EIO when the file is shorter than it was: nothing changes a take-in but us. */
static int blob_of_fd(TreeWalk *t, int fd, uint64_t size, uint8_t oid[static GIT_OID_SIZE]) {
        return git_blob_id_fd(t->h, fd, size, t->buf, sizeof(t->buf), oid);
}

static int add_path_entry(TreeWalk *t, uint32_t mode) {
        if (t->n == t->cap) {
                size_t cap = MAX((size_t) 256, 2 * t->cap);
                GitPathEntry *v = realloc(t->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                t->v = v;
                t->cap = cap;
        }
        char *p = strdup(t->path);
        if (!p)
                return -ENOMEM;
        t->v[t->n++] = (GitPathEntry) { .path = p, .mode = mode };
        return 0;
}

/* A regular file: its blob id known by its inode, or read and hashed. */
static int reg_entry(TreeWalk *t, int dir, const char *name, const struct stat *st) {
        int r = add_path_entry(t, (st->st_mode & S_IXUSR) ? GIT_MODE_EXECUTABLE : GIT_MODE_FILE);
        if (r < 0)
                return r;
        uint8_t *oid = t->v[t->n - 1].oid;
        /* Only a file with other links can be one kept from a cache: one the capsule sent was made
         * just now, alone, and is always read (its inode number, size and mtime, which the job
         * chose, could match a record of a file long gone). */
        const OidRecord *known = st->st_nlink > 1 ? oids_find(t->prev, st) : NULL;
        if (known)
                memcpy(oid, known->oid, GIT_OID_SIZE);
        else {
                _cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                r = fd < 0 ? -errno : blob_of_fd(t, fd, (uint64_t) st->st_size, oid);
                if (r < 0)
                        return r;
                t->hashed++;
        }
        t->bytes += (uint64_t) st->st_size;
        t->files++;
        return oids_add(t->out, st, oid);
}

static int tree_walk(TreeWalk *t, int dir, size_t len, unsigned depth) {
        if (depth > LINK_DEPTH_MAX)
                return -ELOOP;
        _cleanup_closedir_ DIR *d = opendir_fd(dir);
        if (!d)
                return -errno;
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (++t->entries > t->max_entries)
                        return -E2BIG;
                size_t nl = strlen(de->d_name);
                if (len + 1 + nl > GIT_PATH_MAX)
                        return -ENAMETOOLONG;
                t->path[len] = '/';
                memcpy(t->path + len + 1, de->d_name, nl + 1);
                if (fstatat(dir, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                int r = 0;
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int fd = openat(dir, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        r = fd < 0 ? -errno : tree_walk(t, fd, len + 1 + nl, depth + 1);
                } else if (S_ISREG(st.st_mode)) {
                        r = reg_entry(t, dir, de->d_name, &st);
                } else if (S_ISLNK(st.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t k = readlinkat(dir, de->d_name, target, sizeof(target));
                        r = k < 0 ? -errno : (size_t) k >= sizeof(target) ? -ENAMETOOLONG : add_path_entry(t, GIT_MODE_SYMLINK);
                        if (r >= 0)
                                r = git_blob_id(target, (size_t) k, t->v[t->n - 1].oid);
                        t->bytes += k > 0 ? (uint64_t) k : 0;
                } else
                        r = -EBADMSG;
                if (r < 0)
                        return r;
                t->path[len] = 0;
        }
        return errno ? -errno : 0;
}

int build_cache_tree_id(int data_fd, char *const *paths, uint64_t max_entries, const BuildCacheOids *prev,
                        BuildCacheOids **ret_oids, BuildCacheState *ret, TfwError *e) {
        _cleanup_free_ TreeWalk *t = calloc(1, sizeof(*t));
        uint8_t oid[GIT_OID_SIZE];
        int r;

        if (!t || !(t->out = calloc(1, sizeof(*t->out)))) {
                free(t ? t->out : NULL);
                return tfw_error(e, ENOMEM, "build_cache", "out of memory");
        }
        t->prev = prev;
        t->max_entries = max_entries + BUILD_CACHE_PATHS_MAX;
        r = sha256_new(&t->h);
        for (size_t i = 0; r >= 0 && paths[i]; i++) {
                char name[24];
                snprintf(name, sizeof(name), "%zu", i);
                size_t len = strlen(paths[i]);
                if (len > GIT_PATH_MAX - 2) {
                        r = -ENAMETOOLONG;
                        break;
                }
                memcpy(t->path, paths[i], len + 1);
                _cleanup_close_ int fd = openat(data_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                r = fd < 0 ? -errno : tree_walk(t, fd, len, 0);
        }
        if (r >= 0)
                r = git_tree_id_from_paths(t->v, t->n, oid);
        for (size_t i = 0; i < t->n; i++)
                free((char *) t->v[i].path);
        free(t->v);
        sha256_free(t->h);
        if (r < 0) {
                build_cache_oids_free(t->out);
                return tfw_error(e, -r, "build_cache", "cannot compute the cache's tree id: %s", strerror(-r));
        }
        BuildCacheState s = { .bytes = t->bytes, .entries = t->entries, .files = t->files, .hashed = t->hashed };
        sha256_to_hex(oid, s.tree);
        qsort(t->out->v, t->out->n, sizeof(OidRecord), cmp_record);
        if (ret_oids)
                *ret_oids = t->out;
        else
                build_cache_oids_free(t->out);
        *ret = s;
        return 0;
}
