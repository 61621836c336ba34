/* SPDX-License-Identifier: MIT */
/* A lane found after a restart, checked against its index and seal. See gen-check.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "gen-check.h"
#include "gen-index.h"

#define SEAL_MAX 160
#define CHECK_DEPTH_MAX 512

typedef struct Check {
        struct timespec seal; /* the seal's ctime: no entry of the tree may be later */
        uint64_t entries, max_entries;
        char path[PATH_MAX];  /* of the directory being checked, below the tree */
        char *why;
        size_t why_size;
} Check;

static int fail(Check *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(Check *k, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(k->why, k->why_size, fmt, ap);
        va_end(ap);
        return 1;
}

static bool dot_or_dot_dot(const char *n) {
        return streq(n, ".") || streq(n, "..");
}

static bool later(const struct timespec *a, const struct timespec *b) {
        return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

static const char *shown(const Check *k) {
        return k->path[0] ? k->path : ".";
}

static int check_dir(Check *k, int dfd, const GenDir *d, unsigned depth);

/* One entry of the directory open at dfd (d: its index; NULL for a directory the index does
 * not have, which may hold directories only). *matched counts the index's entries found. */
static int check_entry(Check *k, int dfd, const GenDir *d, const char *name, size_t *matched, unsigned depth) {
        struct stat st;
        size_t len = strlen(name), at = strlen(k->path);
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (++k->entries > k->max_entries)
                return fail(k, "its tree holds more than %" PRIu64 " entries", k->max_entries);
        if (later(&st.st_ctim, &k->seal))
                return fail(k, "'%s%s%s' changed after the store's last seal", k->path, at ? "/" : "", name);
        const GenEntry *e = d ? gen_dir_find(d, name, len) : NULL;
        if (!e && !S_ISDIR(st.st_mode))
                return fail(k, "'%s%s%s' is not in the index", k->path, at ? "/" : "", name);
        if (e && (e->is_dir != !!S_ISDIR(st.st_mode) || (!e->is_dir && !S_ISREG(st.st_mode))))
                return fail(k, "'%s%s%s' is not of the type the index has", k->path, at ? "/" : "", name);
        if (e && !e->is_dir && (uint64_t) st.st_size != e->id.size)
                return fail(k, "'%s%s%s' is not of the size the index has", k->path, at ? "/" : "", name);
        if (e)
                (*matched)++;
        if (!S_ISDIR(st.st_mode))
                return 0;
        if (at + 1 + len >= sizeof(k->path))
                return fail(k, "a path of its tree is too long");
        snprintf(k->path + at, sizeof(k->path) - at, "%s%s", at ? "/" : "", name);
        _cleanup_close_ int sub = open_dir_at(dfd, name);
        int r = sub < 0 ? sub : check_dir(k, sub, e ? e->dir : NULL, depth + 1);
        k->path[at] = 0;
        return r;
}

static int check_dir(Check *k, int dfd, const GenDir *d, unsigned depth) {
        struct stat st;
        size_t matched = 0;
        if (depth > CHECK_DEPTH_MAX)
                return fail(k, "its tree is deeper than %u directories", CHECK_DEPTH_MAX);
        if (fstat(dfd, &st) < 0)
                return -errno;
        if (later(&st.st_ctim, &k->seal))
                return fail(k, "'%s' changed after the store's last seal", shown(k));
        _cleanup_closedir_ DIR *dir = opendir_fd(dfd);
        if (!dir)
                return -errno;
        for (struct dirent *de; (errno = 0, de = readdir(dir));) {
                if (dot_or_dot_dot(de->d_name))
                        continue;
                int r = check_entry(k, dfd, d, de->d_name, &matched, depth);
                if (r != 0)
                        return r;
        }
        if (errno)
                return -errno;
        if (d && matched != d->n)
                return fail(k, "'%s' lacks %zu entries of the index", shown(k), d->n - matched);
        return 0;
}

/* The seal: the index's inode, size and ctime, the tree root's inode; and its own ctime. */
typedef struct Seal {
        uint64_t index_ino, index_size, tree_ino;
        int64_t index_ctime_sec;
        uint32_t index_ctime_nsec;
        struct timespec at;
} Seal;

static int seal_format(int lane_fd, int tree_fd, char buf[static SEAL_MAX]) {
        struct stat ix, tree;
        if (fstatat(lane_fd, GEN_LANE_INDEX, &ix, AT_SYMLINK_NOFOLLOW) < 0 || fstat(tree_fd, &tree) < 0)
                return -errno;
        return snprintf(buf, SEAL_MAX, "%" PRIu64 " %" PRIu64 " %" PRId64 " %" PRIu32 " %" PRIu64 "\n",
                        (uint64_t) ix.st_ino, (uint64_t) ix.st_size, (int64_t) ix.st_ctim.tv_sec,
                        (uint32_t) ix.st_ctim.tv_nsec, (uint64_t) tree.st_ino);
}

int gen_lane_seal(int lane_fd, int tree_fd) {
        char buf[SEAL_MAX];
        int n = seal_format(lane_fd, tree_fd, buf);
        if (n == -ENOENT)
                return unlinkat(lane_fd, GEN_LANE_SEAL, 0) < 0 && errno != ENOENT ? -errno : 0;
        if (n < 0)
                return n;
        return write_file_replace_at(lane_fd, GEN_LANE_SEAL, buf, (size_t) n, 0600, 0, 0);
}

int gen_lane_seal_time(int lane_fd, struct timespec *ret) {
        struct stat st;
        if (fstatat(lane_fd, GEN_LANE_SEAL, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        *ret = st.st_ctim;
        return 1;
}

/* 0 the seal matches the index and tree as they are now, 1 it does not (why set). */
static int seal_check(Check *k, int lane_fd, int tree_fd) {
        char want[SEAL_MAX], have[SEAL_MAX];
        _cleanup_close_ int fd = openat(lane_fd, GEN_LANE_SEAL, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
                return fail(k, "it has no seal: its last user did not release it (it stopped during a job)");
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, have, sizeof(have) - 1);
        if (n < 0)
                return -errno;
        have[n] = 0;
        int m = seal_format(lane_fd, tree_fd, want);
        if (m < 0)
                return m;
        if (!streq(want, have))
                return fail(k, "its index or tree is not the one it was sealed with");
        return 0;
}

int gen_lane_check(int lane_fd, uint64_t max_entries, const struct timespec *bound, char *why, size_t why_size) {
        Check k = { .seal = *bound, .max_entries = max_entries, .why = why, .why_size = why_size };
        _cleanup_(gen_index_freep) GenIndex *x = NULL;
        _cleanup_close_ int tree = open_dir_at(lane_fd, "tree");
        if (tree == -ENOENT)
                return 0;
        if (tree < 0)
                return tree;
        if (faccessat(lane_fd, GEN_LANE_INDEX, F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno != ENOENT)
                        return -errno;
                _cleanup_closedir_ DIR *d = opendir_fd(tree);
                struct dirent *de;
                while (d && (de = readdir(d)))
                        if (!dot_or_dot_dot(de->d_name))
                                return fail(&k, "it has no index: its generation was half-written");
                return d ? 0 : -errno;
        }
        int r = seal_check(&k, lane_fd, tree);
        if (r != 0)
                return r;
        TfwError e = {};
        r = gen_index_load(lane_fd, GEN_LANE_INDEX, max_entries, &x, &e);
        if (r < 0)
                return fail(&k, "its index cannot be read: %s", e.message[0] ? e.message : strerror(-r));
        return check_dir(&k, tree, &x->root, 0);
}
