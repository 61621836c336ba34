/* SPDX-License-Identifier: MIT */
/* What a job changed, from its layer (capsule/layer-diff.h). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "capsule/layer-diff.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "common/term-escape.h"

typedef struct Walk {
        const char *const *skip;
        bool cache; /* LAYER_DIFF_CACHE */
        LayerEventFn fn;
        void *userdata;
        char path[PATH_MAX];
} Walk;

bool layer_name_is_portable(const char *name) {
        return utf8_is_plain_text(name, strlen(name));
}

static bool skipped(const Walk *w) {
        for (const char *const *s = w->skip; s && *s; s++)
                if (streq(w->path, *s))
                        return true;
        return false;
}

/* path + "/" + name in w->path; the old length, or -ENAMETOOLONG. */
static int push(Walk *w, const char *name) {
        size_t old = strlen(w->path), len = old, n = strlen(name);
        if (len + 1 + n + 1 > sizeof(w->path))
                return -ENAMETOOLONG;
        if (len > 0)
                w->path[len++] = '/';
        memcpy(w->path + len, name, n + 1);
        return (int) old;
}

static bool dot_or_dot_dot(const char *n) {
        return streq(n, ".") || streq(n, "..");
}

static void pop(Walk *w, int len) {
        w->path[len] = 0;
}

static int emit(Walk *w, LayerChange change, int dir_fd, const char *name, const struct stat *st, const char *why) {
        LayerEvent ev = { .change = change, .path = w->path, .dir_fd = dir_fd, .name = name, .st = st, .why = why };
        return w->fn(&ev, w->userdata);
}

static bool is_whiteout(const struct stat *st) {
        return S_ISCHR(st->st_mode) && major(st->st_rdev) == 0 && minor(st->st_rdev) == 0;
}

/* Everything of the lower entry name (w->path), contents first: removed by the job. */
static int deleted(Walk *w, int lower, const char *name, const struct stat *st, unsigned depth) {
        int r = 0;
        if (S_ISDIR(st->st_mode) && !w->cache) {
                if (depth > LAYER_DIFF_MAX_DEPTH)
                        return -ELOOP;
                int fd = openat(lower, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                DIR *d = opendir_fd(fd);
                if (!d) {
                        r = -errno;
                        close(fd);
                        return r;
                }
                struct dirent *de;
                while (r >= 0 && (errno = 0, de = readdir(d))) {
                        struct stat cst;
                        if (dot_or_dot_dot(de->d_name))
                                continue;
                        int len = push(w, de->d_name);
                        if (len < 0)
                                r = len;
                        else if (fstatat(fd, de->d_name, &cst, AT_SYMLINK_NOFOLLOW) < 0)
                                r = -errno;
                        else if (!skipped(w))
                                r = deleted(w, fd, de->d_name, &cst, depth + 1);
                        if (len >= 0)
                                pop(w, len);
                }
                if (r >= 0 && errno != 0)
                        r = -errno;
                closedir(d);
                close(fd);
                if (r < 0)
                        return r;
        }
        return emit(w, LAYER_DELETED, lower, name, st, NULL);
}

static int walk_dir(Walk *w, int upper, int lower, int merged, unsigned depth);

/* The lower entries of this directory the upper one does not name: gone from the merged view
 * means the job removed them (a directory made again over a removed one hides them all). */
static int lower_gone(Walk *w, int upper, int lower, int merged, unsigned depth) {
        DIR *d = opendir_fd(lower);
        if (!d)
                return -errno;
        struct dirent *de;
        int r = 0;
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                struct stat st;
                if (dot_or_dot_dot(de->d_name))
                        continue;
                if (fstatat(upper, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
                        continue; /* the upper layer says (walk_dir) */
                if (fstatat(merged, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
                        continue; /* still there, unchanged */
                int len = push(w, de->d_name);
                if (len < 0)
                        r = len;
                else if (fstatat(lower, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        r = -errno;
                else if (!skipped(w))
                        r = deleted(w, lower, de->d_name, &st, depth + 1);
                if (len >= 0)
                        pop(w, len);
        }
        if (r >= 0 && errno != 0)
                r = -errno;
        closedir(d);
        return r;
}

/* Does the upper file hold what the lower one of that name held (content and x bit)? */
static int same_file(int upper, int lower, const char *name, const struct stat *ust, const struct stat *lst) {
        if (!S_ISREG(lst->st_mode) || ust->st_size != lst->st_size ||
            (ust->st_mode & S_IXUSR) != (lst->st_mode & S_IXUSR))
                return 0;
        _cleanup_close_ int a = openat(upper, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        _cleanup_close_ int b = openat(lower, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (a < 0 || b < 0)
                return -errno;
        static char ba[64 * 1024], bb[64 * 1024];
        for (;;) {
                ssize_t x = read(a, ba, sizeof(ba));
                if (x < 0)
                        return -errno;
                if (x == 0)
                        return 1;
                size_t got = 0;
                while (got < (size_t) x) {
                        ssize_t y = read(b, bb + got, (size_t) x - got);
                        if (y < 0)
                                return -errno;
                        if (y == 0)
                                return 0;
                        got += (size_t) y;
                }
                if (memcmp(ba, bb, (size_t) x) != 0)
                        return 0;
        }
}

/* The lower entry of the upper one's name, when it is of another kind: removed by the job. */
static int replaced(Walk *w, int lower, const char *name, bool in_lower, const struct stat *lst, mode_t kind, unsigned depth) {
        return in_lower && (lst->st_mode & S_IFMT) != kind ? deleted(w, lower, name, lst, depth) : 0;
}

static int walk_subdir(Walk *w, int upper, int lower, int merged, const char *name, bool new_dir, unsigned depth) {
        _cleanup_close_ int u = openat(upper, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int m = openat(merged, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int l = new_dir ? -EBADF : openat(lower, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (u < 0 || m < 0 || (!new_dir && l < 0))
                return -errno;
        return walk_dir(w, u, l, m, depth + 1);
}

/* One entry of an upper directory (w->path names it). lower/merged: the same directory in the
 * other views, lower -1 when the lower one has none. */
static int walk_entry(Walk *w, int upper, int lower, int merged, const char *name, unsigned depth) {
        struct stat st, lst;
        bool in_lower = lower >= 0 && fstatat(lower, name, &lst, AT_SYMLINK_NOFOLLOW) == 0;
        int r;

        if (fstatat(upper, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (is_whiteout(&st))
                return in_lower ? deleted(w, lower, name, &lst, depth) : 0;
        if (!w->cache && !layer_name_is_portable(name))
                return emit(w, LAYER_REFUSED, upper, name, &st, "a name that is not UTF-8 or holds a control character");
        if (S_ISDIR(st.st_mode)) {
                if (depth >= LAYER_DIFF_MAX_DEPTH)
                        return emit(w, LAYER_REFUSED, upper, name, &st, "a directory too deep");
                if ((r = replaced(w, lower, name, in_lower, &lst, S_IFDIR, depth)) < 0)
                        return r;
                bool new_dir = !in_lower || !S_ISDIR(lst.st_mode);
                if ((new_dir || w->cache) && (r = emit(w, LAYER_DIR, upper, name, &st, NULL)) < 0)
                        return r;
                return walk_subdir(w, upper, lower, merged, name, new_dir, depth);
        }
        if (S_ISREG(st.st_mode)) {
                if ((r = replaced(w, lower, name, in_lower, &lst, S_IFREG, depth)) < 0)
                        return r;
                if (!w->cache && in_lower && (r = same_file(upper, lower, name, &st, &lst)) != 0)
                        return r < 0 ? r : 0;
                return emit(w, LAYER_FILE, upper, name, &st, NULL);
        }
        if (w->cache && S_ISLNK(st.st_mode)) {
                if ((r = replaced(w, lower, name, in_lower, &lst, S_IFLNK, depth)) < 0)
                        return r;
                return emit(w, LAYER_LINK, upper, name, &st, NULL);
        }
        if (in_lower && (r = deleted(w, lower, name, &lst, depth)) < 0)
                return r;
        return emit(w, LAYER_REFUSED, upper, name, &st,
                    S_ISLNK(st.st_mode)    ? "a symbolic link"
                    : S_ISFIFO(st.st_mode) ? "a FIFO"
                    : S_ISSOCK(st.st_mode) ? "a socket"
                                           : "a device");
}

static int walk_dir(Walk *w, int upper, int lower, int merged, unsigned depth) {
        DIR *d = opendir_fd(upper);
        if (!d)
                return -errno;
        struct dirent *de;
        int r = 0;
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                if (dot_or_dot_dot(de->d_name))
                        continue;
                int len = push(w, de->d_name);
                if (len < 0)
                        r = len;
                else if (!skipped(w))
                        r = walk_entry(w, upper, lower, merged, de->d_name, depth);
                if (len >= 0)
                        pop(w, len);
        }
        if (r >= 0 && errno != 0)
                r = -errno;
        closedir(d);
        if (r >= 0 && lower >= 0)
                r = lower_gone(w, upper, lower, merged, depth);
        return r;
}

int layer_diff(int upper_fd, int lower_fd, int merged_fd, const char *const *skip, unsigned flags, LayerEventFn fn,
               void *userdata) {
        Walk *w = calloc(1, sizeof(Walk));
        if (!w)
                return -ENOMEM;
        *w = (Walk) { .skip = skip, .cache = flags & LAYER_DIFF_CACHE, .fn = fn, .userdata = userdata };
        int r = walk_dir(w, upper_fd, lower_fd, merged_fd, 0);
        free(w);
        return r;
}
