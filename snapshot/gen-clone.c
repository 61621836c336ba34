/* SPDX-License-Identifier: MIT */
/* A generation's tree cloned, by several threads. See gen-clone.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "gen-clone.h"

#define CLONE_DEPTH_MAX 512
/* The upper directories cloned first: until this many subtrees wait for the threads, or this
 * many directories are open (each holds two descriptors until the end). */
#define CLONE_SUBTREES 64
#define CLONE_UPPER_MAX 256

/* A directory the caller's thread cloned: open on both sides, its metadata set last. */
typedef struct Upper {
        int src, dst;
        struct stat st;
        unsigned depth;
} Upper;

/* A directory made below an upper one, to be filled by a thread. */
typedef struct Subtree {
        size_t parent;
        char *name;
        struct stat st;
} Subtree;

typedef struct Clone {
        Upper upper[CLONE_UPPER_MAX];
        size_t n_upper;
        Subtree *sub;
        size_t n_sub, cap_sub;
        size_t first;          /* sub[first..n_sub): the threads' */
        atomic_size_t next;    /* the next of them to take, from first */
        atomic_int error;      /* the first failure; 0 */
} Clone;

static int clone_entries(DIR *list, int dst, unsigned depth, Clone *defer, size_t parent);
static int add_subtree(Clone *c, size_t parent, const char *name, const struct stat *st);

/* A directory's owner, mode and times, once its entries are made. */
static int set_meta(int dst, const struct stat *st) {
        struct timespec times[2] = { st->st_atim, st->st_mtim };
        if (fchown(dst, st->st_uid, st->st_gid) < 0 || fchmod(dst, st->st_mode & 07777) < 0 || futimens(dst, times) < 0)
                return -errno;
        return 0;
}

/* One entry of src into dst: a file linked (1), a directory made (0, *st its metadata), or
 * a failure. A file the directory says is one is linked without a stat: linkat() never follows
 * a symbolic link, and the walk after the seed checks every entry against the index. */
static int clone_one(int src, int dst, const char *name, unsigned char type, struct stat *st) {
        if (type == DT_REG)
                return linkat(src, name, dst, name, 0) < 0 ? -errno : 1;
        if (fstatat(src, name, st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (S_ISREG(st->st_mode))
                return linkat(src, name, dst, name, 0) < 0 ? -errno : 1;
        if (!S_ISDIR(st->st_mode))
                return -EBADMSG; /* a generation holds files and directories only */
        return mkdirat(dst, name, 0700) < 0 ? -errno : 0;
}

/* Directory name, made in dst, filled from src's and given its metadata. */
static int clone_subtree(int src, int dst, const char *name, const struct stat *st, unsigned depth) {
        int s = open_dir_at(src, name);
        if (s < 0)
                return s;
        /* The listing owns s: no copy of the descriptor per directory. */
        _cleanup_closedir_ DIR *list = fdopendir(s);
        if (!list) {
                int r = -errno;
                safe_close(s);
                return r;
        }
        _cleanup_close_ int d = open_dir_at(dst, name);
        if (d < 0)
                return d;
        int r = clone_entries(list, d, depth, NULL, 0);
        return r < 0 ? r : set_meta(d, st);
}

/* The entries of list (a directory's listing) into dst: its files linked, its directories made
 * and then filled here, or, with defer, left for the threads (subtrees of defer->upper[parent]). */
static int clone_entries(DIR *list, int dst, unsigned depth, Clone *defer, size_t parent) {
        int src = dirfd(list);
        if (depth > CLONE_DEPTH_MAX)
                return -ELOOP;
        for (struct dirent *de; (errno = 0, de = readdir(list));) {
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                int r = clone_one(src, dst, de->d_name, de->d_type, &st);
                if (r == 0)
                        r = defer ? add_subtree(defer, parent, de->d_name, &st)
                                  : clone_subtree(src, dst, de->d_name, &st, depth + 1);
                if (r < 0)
                        return r;
        }
        return errno ? -errno : 0;
}

/* ---- the upper directories, by the caller's thread -------------------------------------- */

static int add_subtree(Clone *c, size_t parent, const char *name, const struct stat *st) {
        if (c->n_sub == c->cap_sub) {
                size_t cap = c->cap_sub ? 2 * c->cap_sub : 256;
                Subtree *n = reallocarray(c->sub, cap, sizeof(*n));
                if (!n)
                        return -ENOMEM;
                c->sub = n;
                c->cap_sub = cap;
        }
        char *copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        c->sub[c->n_sub++] = (Subtree) { .parent = parent, .name = copy, .st = *st };
        return 0;
}

/* upper[u]'s entries: its files linked, its directories made and left to fill. */
static int expand(Clone *c, size_t u) {
        _cleanup_closedir_ DIR *list = opendir_fd(c->upper[u].src);
        if (!list)
                return -errno;
        return clone_entries(list, c->upper[u].dst, c->upper[u].depth, c, u);
}

/* In breadth from the root, until enough subtrees wait or enough directories are open. */
static int expand_upper(Clone *c) {
        int r = expand(c, 0);
        while (r >= 0 && c->first < c->n_sub && c->n_sub - c->first < CLONE_SUBTREES && c->n_upper < CLONE_UPPER_MAX) {
                const Subtree *s = &c->sub[c->first++];
                const Upper *p = &c->upper[s->parent];
                Upper *u = &c->upper[c->n_upper];
                *u = (Upper) { .src = open_dir_at(p->src, s->name), .dst = -EBADF, .st = s->st, .depth = p->depth + 1 };
                if (u->src < 0)
                        return u->src;
                u->dst = open_dir_at(p->dst, s->name);
                c->n_upper++;
                if (u->dst < 0)
                        return u->dst;
                r = expand(c, c->n_upper - 1);
        }
        return r;
}

/* ---- the subtrees, shared out ------------------------------------------------------------ */

static void *fill_subtrees(void *userdata) {
        Clone *c = userdata;
        for (;;) {
                size_t i = c->first + atomic_fetch_add(&c->next, 1);
                if (i >= c->n_sub || atomic_load(&c->error))
                        return NULL;
                const Subtree *s = &c->sub[i];
                const Upper *p = &c->upper[s->parent];
                int r = clone_subtree(p->src, p->dst, s->name, &s->st, p->depth + 1);
                int none = 0;
                if (r < 0)
                        (void) atomic_compare_exchange_strong(&c->error, &none, r);
        }
}

static unsigned threads_wanted(void) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n < 1 ? 1 : (unsigned) MIN(n, (long) GEN_CLONE_THREADS_MAX);
}

static int fill_all(Clone *c) {
        pthread_t t[GEN_CLONE_THREADS_MAX];
        unsigned n = 0, want = threads_wanted();
        sigset_t all, old;
        /* The threads take no signal: the process's own handling stays its main thread's. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        while (n + 1 < want && c->n_sub - c->first > n + 1 && pthread_create(&t[n], NULL, fill_subtrees, c) == 0)
                n++;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        (void) fill_subtrees(c); /* this thread too; fewer threads only cost time */
        for (unsigned i = 0; i < n; i++)
                (void) pthread_join(t[i], NULL);
        return atomic_load(&c->error);
}

int gen_clone_tree(int src_tree, int dst_tree) {
        Clone *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        /* The root's own metadata is the caller's: it is never set here. */
        c->upper[0] = (Upper) { .src = src_tree, .dst = dst_tree };
        c->n_upper = 1;
        int r = expand_upper(c);
        if (r >= 0)
                r = fill_all(c);
        /* Children before their parents: a directory's times are set once nothing more is
         * made in it. */
        for (size_t u = c->n_upper; u-- > 1;) {
                if (r >= 0)
                        r = set_meta(c->upper[u].dst, &c->upper[u].st);
                safe_close(c->upper[u].src);
                safe_close(c->upper[u].dst);
        }
        for (size_t i = 0; i < c->n_sub; i++)
                free(c->sub[i].name);
        free(c->sub);
        free(c);
        return r;
}
