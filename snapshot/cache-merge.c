/* SPDX-License-Identifier: MIT */
/* The next version of the build cache from a job's changes (cache-merge.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "snapshot/build-cache.h"
#include "snapshot/cache-merge.h"

#define MERGE_DEPTH_MAX 256

typedef struct Merge {
        CacheDeleted deleted;
        uid_t uid;
        gid_t gid;
        uint64_t budget; /* entries left */
        uint64_t linked;
        char path[PATH_MAX];
} Merge;

/* A cache path's index at the start of s: decimal, no sign or leading zero, below n_paths; -1
 * otherwise. *end: the first byte after it. The top level's names and the list's lines. */
static long slot_of(const char *s, size_t n_paths, const char **end) {
        size_t i = 0, k = 0;
        while (s[k] >= '0' && s[k] <= '9' && k < 10) /* no overflow: a longer one is refused */
                i = i * 10 + (size_t) (s[k++] - '0');
        *end = s + k;
        return k == 0 || (s[0] == '0' && k > 1) || i >= n_paths ? -1 : (long) i;
}

/* The take-in's top level: exactly the directories 0 .. n-1, and the list (a regular file). */
static int check_top(int data_fd, size_t n_paths, bool *ret_list, TfwError *e) {
        _cleanup_closedir_ DIR *d = opendir_fd(data_fd);
        size_t seen = 0;
        if (!d)
                return tfw_error(e, errno, "build_cache", "cannot read the take-in: %m");
        struct dirent *de;
        *ret_list = false;
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                const char *end;
                char p[128];
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(data_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return tfw_error(e, errno, "build_cache", "cannot look at the take-in: %m");
                if (streq(de->d_name, BUILD_CACHE_DELETED) && S_ISREG(st.st_mode)) {
                        *ret_list = true;
                        continue;
                }
                if (slot_of(de->d_name, n_paths, &end) < 0 || *end || !S_ISDIR(st.st_mode))
                        return tfw_error(e, EBADMSG, "cache_rejected", "the cache stream holds an unexpected top-level entry '%s'",
                                         printable_name(de->d_name, p, sizeof(p)));
                seen++;
        }
        if (errno)
                return tfw_error(e, errno, "build_cache", "cannot read the take-in: %m");
        if (seen != n_paths)
                return tfw_error(e, EBADMSG, "cache_rejected", "the cache stream lacks %zu of its %zu paths", n_paths - seen,
                                 n_paths);
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

void cache_deleted_done(CacheDeleted *d) {
        for (size_t i = 0; i < d->n; i++)
                free(d->v[i]);
        free(d->v);
        *d = (CacheDeleted) {};
}

/* One line: "<i>/PATH", i a cache path's index, PATH relative and normalised once decoded. */
static int list_line(CacheDeleted *d, const char *s, size_t n, size_t n_paths, unsigned line, TfwError *e) {
        char path[PATH_MAX];
        const char *end;
        int len = path_unescape(s, n, path, sizeof(path));
        if (len < 0)
                return tfw_error(e, EBADMSG, "cache_rejected", "the cache's list of deletions, line %u: a path that cannot be read",
                                 line);
        if (slot_of(path, n_paths, &end) < 0 || *end != '/' || !path_is_relative_normalized(end + 1))
                return tfw_error(e, EBADMSG, "cache_rejected",
                                 "the cache's list of deletions, line %u: not a path below a cache path", line);
        char *dup = strdup(path);
        if (dup && d->n == d->cap) {
                size_t cap = d->cap ? 2 * d->cap : 64;
                char **v = reallocarray(d->v, cap, sizeof(char *));
                if (v) {
                        d->v = v;
                        d->cap = cap;
                }
        }
        if (!dup || d->n == d->cap) {
                free(dup);
                return tfw_error(e, ENOMEM, "build_cache", "out of memory");
        }
        d->v[d->n++] = dup;
        return 0;
}

int cache_deleted_parse(const char *buf, size_t len, size_t n_paths, CacheDeleted *ret, TfwError *e) {
        CacheDeleted d = {};
        unsigned line = 0;
        int r = 0;
        for (size_t at = 0; r >= 0 && at < len;) {
                const char *nl = memchr(buf + at, '\n', len - at);
                if (!nl)
                        r = tfw_error(e, EBADMSG, "cache_rejected", "the cache's list of deletions ends without a newline");
                else
                        r = list_line(&d, buf + at, (size_t) (nl - (buf + at)), n_paths, ++line, e);
                at = nl ? (size_t) (nl - buf) + 1 : len;
        }
        if (r < 0) {
                cache_deleted_done(&d);
                return r;
        }
        if (d.n > 0)
                qsort(d.v, d.n, sizeof(char *), cmp_str);
        *ret = d;
        return 0;
}

/* The list, read whole (bounded), then removed from the take-in. */
static int read_list(Merge *m, int data_fd, size_t n_paths, TfwError *e) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        _cleanup_close_ int fd = openat(data_fd, BUILD_CACHE_DELETED, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        int r = fd < 0 ? -errno : read_full_fd_bounded(fd, BUILD_CACHE_DELETED_MAX, &buf, &len);
        if (r == -E2BIG)
                return tfw_error(e, EBADMSG, "cache_rejected", "the cache's list of deletions is over %u bytes",
                                 BUILD_CACHE_DELETED_MAX);
        if (r < 0)
                return tfw_error(e, -r, "build_cache", "cannot read the cache's list of deletions: %s", strerror(-r));
        r = cache_deleted_parse(buf, len, n_paths, &m->deleted, e);
        if (r < 0)
                return r;
        if (unlinkat(data_fd, BUILD_CACHE_DELETED, 0) < 0)
                return tfw_error(e, errno, "build_cache", "cannot remove the cache's list of deletions: %m");
        return 0;
}

static bool is_deleted(const Merge *m) {
        const char *p = m->path;
        return m->deleted.n > 0 && bsearch(&p, m->deleted.v, m->deleted.n, sizeof(char *), cmp_str);
}

/* Did the job change anything: an entry below a root, or a root's mode or mtime? */
static int anything(int base_fd, int data_fd, size_t n_paths, bool *ret) {
        *ret = false;
        for (size_t i = 0; i < n_paths && !*ret; i++) {
                char name[24];
                struct stat b, t;
                snprintf(name, sizeof(name), "%zu", i);
                _cleanup_close_ int fd = openat(data_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0 || fstat(fd, &t) < 0 || fstatat(base_fd, name, &b, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                _cleanup_closedir_ DIR *d = opendir_fd(fd);
                if (!d)
                        return -errno;
                TAKE_FD(fd);
                struct dirent *de;
                while ((de = readdir(d)) && (streq(de->d_name, ".") || streq(de->d_name, "..")))
                        ;
                *ret = de || (b.st_mode & 07777) != (t.st_mode & 07777) || b.st_mtim.tv_sec != t.st_mtim.tv_sec ||
                       b.st_mtim.tv_nsec != t.st_mtim.tv_nsec;
        }
        return 0;
}

static int merge_dir(Merge *m, int base, int into, size_t len, unsigned depth);

/* The version's directory name, made again in into (the job's, the version's mode and times
 * once its contents are in). */
static int copy_dir(Merge *m, int base, int into, const char *name, const struct stat *st, size_t len, unsigned depth) {
        if (mkdirat(into, name, 0700) < 0)
                return -errno;
        _cleanup_close_ int s = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int t = openat(into, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (s < 0 || t < 0 || fchown(t, m->uid, m->gid) < 0)
                return -errno;
        int r = merge_dir(m, s, t, len, depth + 1);
        struct timespec ts[2] = { st->st_atim, st->st_mtim };
        return r < 0 ? r : fchmod(t, st->st_mode & 07777) < 0 || futimens(t, ts) < 0 ? -errno : 0;
}

/* One entry of the version's directory (m->path names it): left out when the job removed it or
 * has its own entry there (two directories are merged), else linked or copied into into. */
static int merge_entry(Merge *m, int base, int into, const char *name, size_t len, unsigned depth) {
        struct stat b, t;
        if (is_deleted(m))
                return 0;
        if (m->budget-- == 0)
                return -E2BIG;
        if (fstatat(base, name, &b, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (fstatat(into, name, &t, AT_SYMLINK_NOFOLLOW) == 0) {
                if (!S_ISDIR(b.st_mode) || !S_ISDIR(t.st_mode))
                        return 0; /* the job's */
                _cleanup_close_ int s = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int d = openat(into, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                return s < 0 || d < 0 ? -errno : merge_dir(m, s, d, len, depth + 1);
        }
        if (errno != ENOENT)
                return -errno;
        if (S_ISREG(b.st_mode) || S_ISLNK(b.st_mode)) {
                if (linkat(base, name, into, name, 0) < 0)
                        return -errno;
                m->linked += S_ISREG(b.st_mode);
                return 0;
        }
        return S_ISDIR(b.st_mode) ? copy_dir(m, base, into, name, &b, len, depth) : 0;
}

/* The version's entries of one directory into the take-in's (whose times stay its own). */
static int merge_dir(Merge *m, int base, int into, size_t len, unsigned depth) {
        struct stat own;
        if (depth > MERGE_DEPTH_MAX)
                return -ELOOP;
        if (fstat(into, &own) < 0)
                return -errno;
        _cleanup_closedir_ DIR *d = opendir_fd(base);
        if (!d)
                return -errno;
        struct dirent *de;
        int r = 0;
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                size_t n = strlen(de->d_name);
                if (len + 1 + n + 1 > sizeof(m->path))
                        return -ENAMETOOLONG;
                m->path[len] = '/';
                memcpy(m->path + len + 1, de->d_name, n + 1);
                r = merge_entry(m, base, into, de->d_name, len + 1 + n, depth);
                m->path[len] = 0;
        }
        if (r >= 0 && errno)
                r = -errno;
        struct timespec ts[2] = { own.st_atim, own.st_mtim };
        return r < 0 ? r : futimens(into, ts) < 0 ? -errno : 0;
}

static void merge_done(Merge *m) {
        cache_deleted_done(&m->deleted);
}

static int merge_paths(Merge *m, int base_fd, int data_fd, size_t n_paths, TfwError *e) {
        for (size_t i = 0; i < n_paths; i++) {
                int len = snprintf(m->path, sizeof(m->path), "%zu", i);
                _cleanup_close_ int s = openat(base_fd, m->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int d = openat(data_fd, m->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                int r = s < 0 || d < 0 ? -errno : merge_dir(m, s, d, (size_t) len, 0);
                if (r == -E2BIG)
                        return tfw_error(e, E2BIG, "cache_too_large", "the cache would hold more than its entries' bound");
                if (r < 0)
                        return tfw_error(e, -r, "build_cache", "cannot make the cache's next version: %s", strerror(-r));
        }
        return 0;
}

int cache_merge(int base_fd, int data_fd, size_t n_paths, uid_t uid, gid_t gid, uint64_t max_entries, CacheMerge *ret,
                TfwError *e) {
        Merge *m = calloc(1, sizeof(*m));
        bool list, any;
        if (!m)
                return tfw_error(e, ENOMEM, "build_cache", "out of memory");
        *m = (Merge) { .uid = uid, .gid = gid, .budget = max_entries };
        int r = check_top(data_fd, n_paths, &list, e);
        if (r >= 0 && list)
                r = read_list(m, data_fd, n_paths, e);
        if (r >= 0 && (r = anything(base_fd, data_fd, n_paths, &any)) < 0)
                r = tfw_error(e, -r, "build_cache", "cannot read the take-in: %s", strerror(-r));
        *ret = (CacheMerge) { .changed = r >= 0 && (any || m->deleted.n > 0), .deleted = m->deleted.n };
        if (r >= 0 && ret->changed)
                r = merge_paths(m, base_fd, data_fd, n_paths, e);
        ret->files_linked = m->linked;
        merge_done(m);
        free(m);
        return r;
}
