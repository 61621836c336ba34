/* SPDX-License-Identifier: MIT */
/* What a directory's watch cannot see: every file it vouches for, asked by stat. See
 * gen-verify.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "common/resolve.h"
#include "gen-verify.h"

/* Is the file at dfd/name still the one old describes, on the directory's device, and one the
 * walk may take (snapshot.c hardlink_allowed: another owner's file linked in is refused there)? */
static bool file_same(const GenVerify *v, int dfd, dev_t dir_dev, const GenEntry *old, const char *name,
                      struct stat *st) {
        GenIdentity id;

        if (fstatat(dfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        if (!S_ISREG(st->st_mode) || st->st_dev != dir_dev)
                return false;
        if (st->st_nlink > 1 && !(v->owner_uid != 0 && st->st_uid == v->owner_uid) && !(st->st_mode & S_IROTH))
                return false;
        gen_identity_of(st, &id);
        return gen_identity_equal(&id, &old->id);
}

/* May the walk keep old as it is? On the marked file system: trusted on the mark's word, or
 * asked and probed; a writer found, or a close after writing reported, makes it racy (read by
 * the walk). Elsewhere: asked by stat. */
static bool file_unchanged(GenVerify *v, int dfd, dev_t dir_dev, GenEntry *old, const char *name) {
        bool marked = v->fan && old->id.dev == v->fan->dev;
        struct stat st;

        if (marked) {
                const Stamp *s = fan_view_after(v->fan, old->id.ino, v->since);
                if (v->fan_trusted && !s) {
                        v->trusted++;
                        return true;
                }
                v->reported += s != NULL;
                if (s && s->closed_seq > v->since) {
                        old->racy = true;
                        return false;
                }
        }
        v->files++;
        if (!file_same(v, dfd, dir_dev, old, name, &st))
                return false;
        if (!marked)
                return true;
        v->probed++;
        int r = fan_probe(dfd, name, &st);
        if (r > 0)
                old->racy = true;
        return r == 0;
}

/* d's subtree_clean from its own mark and its children's. */
static void remark(GenDir *d) {
        bool all = d->clean;
        for (size_t i = 0; all && i < d->n; i++)
                if (d->v[i].is_dir && !d->v[i].dir->subtree_clean)
                        all = false;
        d->subtree_clean = all;
}

static void unmark_all(GenDir *d) {
        d->clean = d->subtree_clean = d->any_clean = false;
        for (size_t i = 0; i < d->n; i++)
                if (d->v[i].is_dir)
                        unmark_all(d->v[i].dir);
}

/* With the mark vouching for the previous walk, a subtree in which it reported nothing, all on
 * its device, is not even opened: its files are trusted, and its directories are the watch's to
 * vouch for (every change of one is an event on its parent's watch; the walk asks the identity
 * of the top one it carries). Sets d->visit; true when something below d needs asking. */
static bool mark_visits(const GenVerify *v, GenDir *d) {
        bool visit = !v->fan_trusted;
        for (size_t i = 0; i < d->n; i++) {
                const GenEntry *e = &d->v[i];
                if (e->is_dir)
                        visit = (e->dir->any_clean && mark_visits(v, e->dir)) || e->id.dev != v->fan->dev || visit;
                else if (d->clean && (e->id.dev != v->fan->dev || fan_view_after(v->fan, e->id.ino, v->since)))
                        visit = true;
        }
        d->visit = visit;
        return visit;
}

/* Not opened: every file below trusted on the mark's word. */
static bool skip_unvisited(GenVerify *v, const GenDir *d);

/* d, open at dfd (device dir_dev), and below. check_files: d is not the root, whose files the
 * walk reads itself. */
static int verify_dir(GenVerify *v, int dfd, dev_t dir_dev, GenDir *d, bool check_files) {
        char name[NAME_MAX + 1];

        v->dirs++;
        if (check_files && d->clean)
                for (size_t i = 0; i < d->n; i++) {
                        GenEntry *e = &d->v[i];
                        if (e->is_dir)
                                continue;
                        memcpy(name, e->name, e->len);
                        name[e->len] = 0;
                        if (!file_unchanged(v, dfd, dir_dev, e, name)) {
                                d->clean = false;
                                v->changed++;
                                break; /* the walk lists d and asks each of its files itself */
                        }
                }
        for (size_t i = 0; i < d->n; i++) {
                GenEntry *e = &d->v[i];
                if (!e->is_dir || !e->dir->any_clean || skip_unvisited(v, e->dir))
                        continue;
                memcpy(name, e->name, e->len);
                name[e->len] = 0;
                _cleanup_close_ int cfd = openat_child(dfd, name, O_PATH | O_DIRECTORY, v->use_openat2);
                struct stat st;
                if (cfd == -ENOMEM || cfd == -EMFILE || cfd == -ENFILE)
                        return cfd;
                if (cfd < 0 || fstat(cfd, &st) < 0 || (uint64_t) st.st_dev != e->id.dev ||
                    (uint64_t) st.st_ino != e->id.ino) {
                        /* Not the directory the index names: the walk reads its parent. */
                        unmark_all(e->dir);
                        if (d->clean)
                                v->changed++;
                        d->clean = false;
                        continue;
                }
                int r = verify_dir(v, cfd, st.st_dev, e->dir, true);
                if (r < 0)
                        return r;
        }
        remark(d);
        return 0;
}

/* ---- the work shared between threads ---------------------------------------------------- */

/* The files to ask, in items some threads take in turn, largest first: a directory and all
 * below it, or (for a directory split so that no item is much larger than the others) its own
 * files alone, its directories being items of their own. Each item writes only the marks of the
 * directories it covers; what an item finds about its parent is kept in the item and applied
 * after the threads are joined, with every directory's subtree_clean. */
typedef struct Item {
        int dfd;              /* files_only: the directory; else its parent (both borrowed) */
        dev_t dev;            /* files_only: the directory's device */
        GenEntry *entry;      /* else: the directory's entry in its parent */
        GenDir *dir;          /* the directory */
        GenDir *parent;       /* else: its parent, whose mark parent_changed clears */
        bool files_only;
        bool parent_changed;  /* out: not the directory the index names */
        uint64_t weight;      /* files below it (files_only: its own) */
} Item;

typedef struct Work {
        Item *items;
        size_t n, cap;
        int *fds;             /* the split directories, open until the end */
        size_t n_fds, cap_fds;
        _Atomic size_t next;
        _Atomic int error;
        bool use_openat2;
        uint32_t owner_uid;
} Work;

/* Threads only for this many files or more: below it, starting one costs more than it saves. */
#define VERIFY_THREADED_MIN_FILES 4096
#define VERIFY_THREADS_MAX 4

static uint64_t files_below(const GenDir *d) {
        uint64_t n = 0;
        for (size_t i = 0; i < d->n; i++)
                n += d->v[i].is_dir ? (d->v[i].dir->any_clean ? files_below(d->v[i].dir) : 0) : (d->clean ? 1 : 0);
        return n;
}

/* files_below, less the subtrees skip_unvisited leaves out. */
static uint64_t files_asked_below(const GenVerify *v, const GenDir *d) {
        uint64_t n = 0;
        if (v->fan && v->fan_trusted && !d->visit)
                return 0;
        for (size_t i = 0; i < d->n; i++)
                n += d->v[i].is_dir ? (d->v[i].dir->any_clean ? files_asked_below(v, d->v[i].dir) : 0) : (d->clean ? 1 : 0);
        return n;
}

static bool skip_unvisited(GenVerify *v, const GenDir *d) {
        if (!v->fan || !v->fan_trusted || d->visit)
                return false;
        v->trusted += files_below(d);
        return true;
}

static int work_add(Work *w, Item it) {
        if (w->n == w->cap) {
                size_t cap = MAX(2 * w->cap, (size_t) 64);
                Item *v = reallocarray(w->items, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                w->items = v;
                w->cap = cap;
        }
        w->items[w->n++] = it;
        return 0;
}

static int work_keep_fd(Work *w, int fd) {
        if (w->n_fds == w->cap_fds) {
                size_t cap = MAX(2 * w->cap_fds, (size_t) 16);
                int *v = reallocarray(w->fds, cap, sizeof(*v));
                if (!v)
                        return -ENOMEM;
                w->fds = v;
                w->cap_fds = cap;
        }
        w->fds[w->n_fds++] = fd;
        return 0;
}

static void work_done(Work *w) {
        for (size_t i = 0; i < w->n_fds; i++)
                safe_close(w->fds[i]);
        free(w->fds);
        free(w->items);
}

/* The items of d (open at dfd, device dev): each directory below with something clean in it.
 * An item larger than limit is split, while it has directories to split into. check_files: d is
 * not the root. */
static int work_split(Work *w, GenVerify *v, int dfd, dev_t dev, GenDir *d, bool check_files, uint64_t limit) {
        uint64_t own = 0;
        for (size_t i = 0; i < d->n; i++)
                own += !d->v[i].is_dir && check_files && d->clean;
        if (own > 0) {
                int r = work_add(w, (Item) { .dfd = dfd, .dev = dev, .dir = d, .files_only = true, .weight = own });
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < d->n; i++) {
                GenEntry *e = &d->v[i];
                if (!e->is_dir || !e->dir->any_clean || skip_unvisited(v, e->dir))
                        continue;
                uint64_t weight = files_asked_below(v, e->dir);
                bool has_dirs = false;
                for (size_t k = 0; k < e->dir->n && !has_dirs; k++)
                        has_dirs = e->dir->v[k].is_dir && e->dir->v[k].dir->any_clean;
                if (weight <= limit || !has_dirs) {
                        int r = work_add(w, (Item) { .dfd = dfd, .entry = e, .dir = e->dir, .parent = d, .weight = weight });
                        if (r < 0)
                                return r;
                        continue;
                }
                char name[NAME_MAX + 1];
                memcpy(name, e->name, e->len);
                name[e->len] = 0;
                int cfd = openat_child(dfd, name, O_PATH | O_DIRECTORY, w->use_openat2);
                struct stat st;
                if (cfd == -ENOMEM || cfd == -EMFILE || cfd == -ENFILE)
                        return cfd;
                if (cfd < 0 || fstat(cfd, &st) < 0 || (uint64_t) st.st_dev != e->id.dev || (uint64_t) st.st_ino != e->id.ino) {
                        safe_close(cfd);
                        unmark_all(e->dir);
                        d->clean = false;
                        continue;
                }
                int r = work_keep_fd(w, cfd);
                if (r < 0) {
                        safe_close(cfd);
                        return r;
                }
                r = work_split(w, v, cfd, st.st_dev, e->dir, true, limit);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int item_cmp(const void *a, const void *b) {
        uint64_t x = ((const Item *) a)->weight, y = ((const Item *) b)->weight;
        return (x < y) - (x > y); /* largest first */
}

static int item_run(Work *w, Item *it, GenVerify *v) {
        char name[NAME_MAX + 1];
        if (it->files_only) {
                /* Its own files only: the directories below are items of their own. */
                for (size_t i = 0; i < it->dir->n; i++) {
                        GenEntry *e = &it->dir->v[i];
                        if (e->is_dir)
                                continue;
                        memcpy(name, e->name, e->len);
                        name[e->len] = 0;
                        if (!file_unchanged(v, it->dfd, it->dev, e, name)) {
                                it->dir->clean = false;
                                v->changed++;
                                break;
                        }
                }
                return 0;
        }
        memcpy(name, it->entry->name, it->entry->len);
        name[it->entry->len] = 0;
        _cleanup_close_ int cfd = openat_child(it->dfd, name, O_PATH | O_DIRECTORY, w->use_openat2);
        struct stat st;
        if (cfd == -ENOMEM || cfd == -EMFILE || cfd == -ENFILE)
                return cfd;
        if (cfd < 0 || fstat(cfd, &st) < 0 || (uint64_t) st.st_dev != it->entry->id.dev ||
            (uint64_t) st.st_ino != it->entry->id.ino) {
                unmark_all(it->dir);
                it->parent_changed = true;
                return 0;
        }
        return verify_dir(v, cfd, st.st_dev, it->dir, true);
}

typedef struct Worker {
        Work *work;
        GenVerify v;
        pthread_t thread;
        bool started;
} Worker;

static void *worker_main(void *arg) {
        Worker *k = arg;
        for (;;) {
                size_t i = atomic_fetch_add(&k->work->next, 1);
                if (i >= k->work->n || atomic_load(&k->work->error) != 0)
                        return NULL;
                int r = item_run(k->work, &k->work->items[i], &k->v);
                if (r < 0) {
                        int none = 0;
                        atomic_compare_exchange_strong(&k->work->error, &none, r);
                        return NULL;
                }
        }
}

/* After the threads: what items found about their parents, then every subtree_clean again,
 * children first. */
static void remark_all(GenDir *d) {
        for (size_t i = 0; i < d->n; i++)
                if (d->v[i].is_dir)
                        remark_all(d->v[i].dir);
        remark(d);
}

uint64_t gen_verify_test_threaded_min_files = VERIFY_THREADED_MIN_FILES;

static unsigned verify_threads(uint64_t files) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        if (files < gen_verify_test_threaded_min_files || n < 2)
                return 1;
        return (unsigned) MIN(n, (long) VERIFY_THREADS_MAX);
}

int gen_verify_clean(int root_fd, GenDir *root, GenVerify *v) {
        struct stat st;
        int r;

        v->files = v->dirs = v->changed = v->trusted = v->reported = v->probed = 0;
        if (fstat(root_fd, &st) < 0)
                return -errno;
        if (v->fan && v->fan_trusted)
                root->visit = true, (void) mark_visits(v, root);
        uint64_t files = files_asked_below(v, root);
        unsigned n_threads = verify_threads(files);
        if (n_threads == 1)
                return verify_dir(v, root_fd, st.st_dev, root, false);

        Work w = { .use_openat2 = v->use_openat2, .owner_uid = v->owner_uid };
        Worker k[VERIFY_THREADS_MAX] = {};
        r = work_split(&w, v, root_fd, st.st_dev, root, false,
                       MAX(files / (4 * n_threads), MIN(gen_verify_test_threaded_min_files, (uint64_t) 256)));
        if (r < 0) {
                work_done(&w);
                return r;
        }
        if (w.n > 0)
                qsort(w.items, w.n, sizeof(*w.items), item_cmp);
        sigset_t all, old;
        sigfillset(&all);
        for (unsigned i = 0; i < n_threads; i++)
                k[i] = (Worker) { .work = &w, .v = { .use_openat2 = v->use_openat2, .owner_uid = v->owner_uid, .fan = v->fan,
                                                     .fan_trusted = v->fan_trusted, .since = v->since } };
        pthread_sigmask(SIG_SETMASK, &all, &old);
        for (unsigned i = 1; i < n_threads; i++)
                k[i].started = pthread_create(&k[i].thread, NULL, worker_main, &k[i]) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        (void) worker_main(&k[0]); /* this thread too; a thread that could not start leaves its share to the others */
        for (unsigned i = 1; i < n_threads; i++)
                if (k[i].started)
                        pthread_join(k[i].thread, NULL);
        r = atomic_load(&w.error);
        /* Not the directory the index names: the walk reads its parent (the root or a split
         * directory, which no item covered). */
        for (size_t i = 0; i < w.n; i++)
                if (w.items[i].parent_changed)
                        w.items[i].parent->clean = false;
        for (unsigned i = 0; i < n_threads; i++) {
                v->files += k[i].v.files;
                v->dirs += k[i].v.dirs;
                v->changed += k[i].v.changed;
                v->trusted += k[i].v.trusted;
                v->reported += k[i].v.reported;
                v->probed += k[i].v.probed;
        }
        if (r >= 0)
                remark_all(root);
        work_done(&w);
        return r;
}
