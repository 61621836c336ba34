/* SPDX-License-Identifier: MIT */
/* Copiers for the walk's files (copy-pool.h). One mutex guards the queue: the jobs to do (in
 * the order the walk gave them), the jobs done (results not stored yet) and the free ones. Each
 * side wakes the other in batches: the walk wakes a copier once WAKE_BATCH jobs wait (or when
 * it needs room or the results), a copier wakes the waiting walk once WAKE_BATCH jobs are done
 * (or nothing is left to copy, or one failed), so that a file costs no futex call and no
 * switch of threads when one side is faster than the other. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob-hasher.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "common/path-util.h"
#include "common/sha256.h"
#include "copy-pool.h"

/* Jobs in flight: each holds two descriptors (about 130 with the hasher's ring idle). */
#define SLOTS 64
#define WAKE_BATCH 8
#define CHUNK BLOB_CHUNK_SIZE

void (*copy_pool_test_before_copy)(const char *path) = NULL;

typedef struct Copier {
        CopyPool *pool;
        pthread_t thread;
        uint8_t *buf;
        Sha256 *h;
} Copier;

struct CopyPool {
        pthread_mutex_t lock;
        pthread_cond_t work; /* copiers wait here for jobs */
        pthread_cond_t room; /* the walk waits here for a free job, or for all to finish */
        CopyJob jobs[SLOTS];
        uint32_t todo[SLOTS], done[SLOTS], free_[SLOTS];
        size_t todo_head, n_todo, n_done, n_free;
        unsigned busy, idle; /* copiers copying; copiers waiting for work */
        bool walk_waiting;   /* the walk waits on room */
        bool stop;
        int error;           /* the first copier's failure (e below), 0 */
        TfwError e;
        bool lease_unusable;
        atomic_bool range_unusable;
        CopyBudget *budget;
        unsigned n;
        Copier copiers[COPY_POOL_THREADS_MAX];
};

bool copy_budget_take(CopyBudget *b, uint64_t n) {
        uint64_t cur = atomic_load(&b->used);
        do {
                if (n > 0 && (cur > b->max || n > b->max - cur))
                        return false;
        } while (!atomic_compare_exchange_weak(&b->used, &cur, cur + n));
        return true;
}

/* ---- one file, on a copier's thread ------------------------------------------------------ */

static int job_fail(CopyPool *p, const CopyJob *j, int r, const char *what) {
        char name[512];
        TfwError e = {};
        if (r == -E2BIG)
                tfw_error(&e, E2BIG, "snapshot_too_large", "workspace is too large at '%s': %s",
                          printable_name(j->path, name, sizeof(name)), what);
        else
                tfw_error(&e, -r, "snapshot_io", "workspace entry '%s': %s: %s",
                          printable_name(j->path, name, sizeof(name)), what, strerror(-r));
        pthread_mutex_lock(&p->lock);
        if (!p->error) {
                p->error = r;
                p->e = e;
        }
        pthread_mutex_unlock(&p->lock);
        return r;
}

/* How many bytes the next read of j may ask for: what is left of the size it announced (taken
 * from the budget by the walk) and one byte more, to see the end in the same read; past that
 * size (a file that grew), a chunk at most, and never more than one byte past what is left of
 * the budget when it asks. */
static size_t read_room(CopyBudget *b, const CopyJob *j) {
        if (j->total < j->expected)
                return (size_t) MIN((uint64_t) CHUNK, j->expected - j->total + 1);
        uint64_t used = atomic_load(&b->used);
        uint64_t left = used > b->max ? 0 : b->max - used;
        return (size_t) MIN((uint64_t) CHUNK, left + 1);
}

/* After a read of k bytes at j->total (not counted yet): what it read past the announced size
 * taken from the budget. Was the budget exceeded? */
static bool read_over(CopyBudget *b, const CopyJob *j, size_t k) {
        uint64_t end = j->total + k, from = MAX(j->total, j->expected);
        return end > from && !copy_budget_take(b, end - from);
}

/* Read j's source to its end into the copy, hashing what is written as a blob of the announced
 * size (the hash is the caller's to finish). */
static int read_write_loop(CopyPool *p, Copier *c, CopyJob *j) {
        bool cleared_nonblock = false;
        int r = git_blob_hash_start(c->h, j->expected);
        if (r < 0)
                return job_fail(p, j, r, "hash");
        for (;;) {
                size_t cap = read_room(p->budget, j);
                ssize_t k = read(j->src, c->buf, cap);
                int err = errno;
                if (k > 0 && read_over(p->budget, j, (size_t) k))
                        return job_fail(p, j, -E2BIG, "more file content than max_bytes");
                if (k < 0 && err == EINTR)
                        continue;
                if (k < 0 && err == EAGAIN && !cleared_nonblock) {
                        /* O_NONBLOCK was for FIFOs; a regular file on an odd filesystem may
                         * honour it. Clear it once and retry. */
                        int fl = fcntl(j->src, F_GETFL);
                        if (fl < 0 || fcntl(j->src, F_SETFL, fl & ~O_NONBLOCK) < 0)
                                return job_fail(p, j, -errno, "clear O_NONBLOCK");
                        cleared_nonblock = true;
                        continue;
                }
                if (k < 0)
                        return job_fail(p, j, -err, "read");
                if (k == 0)
                        break;
                j->total += (uint64_t) k;
                r = write_all(j->dst, c->buf, (size_t) k);
                if (r < 0)
                        return job_fail(p, j, r, "write copy");
                if (j->total <= j->expected && (r = sha256_update(c->h, c->buf, (size_t) k)) < 0)
                        return job_fail(p, j, r, "hash");
                /* A short read that ends exactly at the announced size is the end of the file. */
                if ((size_t) k < cap && j->total == j->expected)
                        break;
        }
        return 0;
}

/* That copy, its blob id in j->oid when the size was as announced (*ret_hashed). The hash is
 * finished either way: the copier's context starts the next blob clean. */
static int copy_read_write(CopyPool *p, Copier *c, CopyJob *j, bool *ret_hashed) {
        uint8_t scratch[GIT_OID_SIZE];
        int r = read_write_loop(p, c, j);
        *ret_hashed = r >= 0 && j->total == j->expected;
        int k = sha256_final(c->h, *ret_hashed ? j->oid : scratch);
        if (r >= 0 && k < 0 && *ret_hashed)
                return job_fail(p, j, k, "hash");
        return r;
}

/* copy_file_range: the kernel copies. 1 when this filesystem pair cannot and nothing was
 * copied. */
static int copy_range(CopyPool *p, CopyJob *j) {
        for (;;) {
                size_t cap = read_room(p->budget, j);
                ssize_t k = copy_file_range(j->src, NULL, j->dst, NULL, cap, 0);
                int err = errno;
                if (k > 0 && read_over(p->budget, j, (size_t) k))
                        return job_fail(p, j, -E2BIG, "more file content than max_bytes");
                if (k < 0 && err == EINTR)
                        continue;
                if (k < 0 && j->total == 0 &&
                    (err == EXDEV || err == EOPNOTSUPP || err == ENOSYS || err == EINVAL || err == EAGAIN))
                        return 1;
                if (k < 0)
                        return job_fail(p, j, -err, "copy_file_range");
                if (k == 0)
                        return 0;
                j->total += (uint64_t) k;
                if ((size_t) k < cap && j->total == j->expected)
                        return 0;
        }
}

/* The blob id of the copy's first j->total bytes (the copy only this process can write). */
static int hash_copy(CopyPool *p, Copier *c, CopyJob *j) {
        int r = git_blob_hash_start(c->h, j->total);
        for (uint64_t off = 0; r >= 0 && off < j->total;) {
                ssize_t k = pread(j->dst, c->buf, (size_t) MIN((uint64_t) CHUNK, j->total - off), (off_t) off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        r = k < 0 ? -errno : -EIO;
                else {
                        r = sha256_update(c->h, c->buf, (size_t) k);
                        off += (uint64_t) k;
                }
        }
        uint8_t scratch[GIT_OID_SIZE];
        int k = sha256_final(c->h, r >= 0 ? j->oid : scratch); /* the context clean again */
        if (r >= 0)
                r = k;
        return r < 0 ? job_fail(p, j, r, "hash") : 0;
}

/* Was the file open for writing while it was read? A read lease is refused (EAGAIN) exactly
 * then (snapshot.c, open_for_writing, says why SIGURG). */
static bool open_for_writing(CopyJob *j) {
        if (fcntl(j->src, F_SETSIG, SIGURG) < 0 || fcntl(j->src, F_SETLEASE, F_RDLCK) < 0) {
                if (errno != EAGAIN)
                        j->lease_unusable = true;
                return true;
        }
        (void) fcntl(j->src, F_SETLEASE, F_UNLCK);
        return false;
}

static int copy_one(CopyPool *p, Copier *c, CopyJob *j) {
        bool hashed = false;
        int r = 0;

        if (copy_pool_test_before_copy)
                copy_pool_test_before_copy(j->path);
        if ((j->uid != (uint32_t) -1 && fchown(j->dst, j->uid, j->gid) < 0) ||
            (j->fix_mode && fchmod(j->dst, j->mode) < 0))
                r = job_fail(p, j, -errno, "set owner and mode");
        if (r >= 0 && !atomic_load(&p->range_unusable)) {
                r = copy_range(p, j);
                if (r == 1)
                        atomic_store(&p->range_unusable, true);
        } else if (r >= 0)
                r = 1;
        if (r == 1)
                r = copy_read_write(p, c, j, &hashed);
        /* What it announced and did not use goes back (more was taken as it was read). */
        if (j->total < j->expected)
                atomic_fetch_sub(&p->budget->used, j->expected - j->total);
        if (r < 0)
                return r;
        if (futimens(j->dst, j->times) < 0)
                return job_fail(p, j, -errno, "set the copy's times");
        if (!hashed && (r = hash_copy(p, c, j)) < 0)
                return r;
        j->has_oid = true;
        /* As snapshot.c's gen_record_file: a file that read as another size is read again next
         * time anyway; the lease is asked only of one that may be kept. */
        j->writers = j->ask_writers && j->total == j->expected && open_for_writing(j);
        return 0;
}

/* ---- the queue ------------------------------------------------------------------------- */

static void job_close(CopyJob *j) {
        j->src = safe_close(j->src);
        j->dst = safe_close(j->dst);
}

static void *copier_main(void *userdata) {
        Copier *c = userdata;
        CopyPool *p = c->pool;

        pthread_mutex_lock(&p->lock);
        for (;;) {
                while (p->n_todo == 0 && !p->stop) {
                        p->idle++;
                        pthread_cond_wait(&p->work, &p->lock);
                        p->idle--;
                }
                if (p->stop)
                        break;
                uint32_t i = p->todo[p->todo_head];
                p->todo_head = (p->todo_head + 1) % SLOTS;
                p->n_todo--;
                p->busy++;
                bool failed = p->error != 0;
                pthread_mutex_unlock(&p->lock);

                CopyJob *j = &p->jobs[i];
                /* After a failure the walk fails too: what is left is only closed. */
                if (!failed)
                        (void) copy_one(p, c, j);
                job_close(j);

                pthread_mutex_lock(&p->lock);
                p->busy--;
                p->done[p->n_done++] = i;
                if (p->walk_waiting && (p->n_done >= WAKE_BATCH || (p->n_todo == 0 && p->busy == 0) || p->error))
                        pthread_cond_signal(&p->room);
        }
        pthread_mutex_unlock(&p->lock);
        return NULL;
}

/* Walk's side, under the lock: the results of the finished jobs into their entries. */
static void store_done(CopyPool *p) {
        for (size_t k = 0; k < p->n_done; k++) {
                CopyJob *j = &p->jobs[p->done[k]];
                if (j->has_oid)
                        memcpy(j->tb->entries[j->tb_index].oid, j->oid, GIT_OID_SIZE);
                if (j->has_oid && j->dir && (j->writers || j->total != j->expected)) {
                        j->dir->v[j->entry].racy = true;
                        j->dir->always = true;
                }
                p->lease_unusable |= j->lease_unusable;
                p->free_[p->n_free++] = p->done[k];
        }
        p->n_done = 0;
}

CopyJob *copy_pool_job(CopyPool *p, int *ret_error, TfwError *e) {
        CopyJob *j = NULL;

        pthread_mutex_lock(&p->lock);
        for (;;) {
                store_done(p);
                if (p->error) {
                        *ret_error = p->error;
                        if (e)
                                *e = p->e;
                        break;
                }
                if (p->n_free > 0) {
                        j = &p->jobs[p->free_[--p->n_free]];
                        break;
                }
                pthread_cond_broadcast(&p->work);
                p->walk_waiting = true;
                pthread_cond_wait(&p->room, &p->lock);
                p->walk_waiting = false;
        }
        pthread_mutex_unlock(&p->lock);
        if (j) {
                char *path = j->path;
                size_t size = j->path_size;
                *j = (CopyJob) { .src = -EBADF, .dst = -EBADF, .path = path, .path_size = size };
        }
        return j;
}

int copy_pool_job_path(CopyJob *j, const char *path, size_t len) {
        if (len + 1 > j->path_size) {
                size_t n = MAX(len + 1, (size_t) 256);
                char *s = realloc(j->path, n);
                if (!s)
                        return -ENOMEM;
                j->path = s;
                j->path_size = n;
        }
        memcpy(j->path, path, len);
        j->path[len] = 0;
        return 0;
}

void copy_pool_submit(CopyPool *p, CopyJob *j) {
        pthread_mutex_lock(&p->lock);
        p->todo[(p->todo_head + p->n_todo) % SLOTS] = (uint32_t) (j - p->jobs);
        p->n_todo++;
        if (p->idle > 0 && p->n_todo >= WAKE_BATCH)
                pthread_cond_signal(&p->work);
        pthread_mutex_unlock(&p->lock);
}

int copy_pool_sync(CopyPool *p, TfwError *e) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->work);
        p->walk_waiting = true;
        while (p->n_todo > 0 || p->busy > 0)
                pthread_cond_wait(&p->room, &p->lock);
        p->walk_waiting = false;
        store_done(p);
        int r = p->error;
        if (r < 0 && e)
                *e = p->e;
        pthread_mutex_unlock(&p->lock);
        return r;
}

bool copy_pool_lease_unusable(const CopyPool *p) {
        return p->lease_unusable;
}

static unsigned threads_wanted(unsigned threads) {
        long n = threads ? (long) threads : sysconf(_SC_NPROCESSORS_ONLN);
        return n < 1 ? 1 : (unsigned) MIN(n, (long) COPY_POOL_THREADS_MAX);
}

int copy_pool_new(unsigned threads, bool file_range, CopyBudget *budget, CopyPool **ret) {
        CopyPool *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->work, NULL);
        pthread_cond_init(&p->room, NULL);
        p->budget = budget;
        atomic_store(&p->range_unusable, !file_range);
        for (uint32_t i = 0; i < SLOTS; i++) {
                p->jobs[i].src = p->jobs[i].dst = -EBADF;
                p->free_[p->n_free++] = SLOTS - 1 - i;
        }
        unsigned want = threads_wanted(threads);
        int r = 0;
        for (unsigned i = 0; r >= 0 && i < want; i++) {
                Copier *c = &p->copiers[i];
                c->pool = p;
                c->buf = malloc(CHUNK);
                r = c->buf ? sha256_new(&c->h) : -ENOMEM;
        }
        if (r < 0) {
                copy_pool_free(p);
                return r;
        }
        /* The copiers take no signal: the process's own handling stays its main thread's. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        while (p->n < want && pthread_create(&p->copiers[p->n].thread, NULL, copier_main, &p->copiers[p->n]) == 0)
                p->n++;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (p->n == 0) {
                copy_pool_free(p);
                return -EAGAIN;
        }
        *ret = p;
        return 0;
}

void copy_pool_free(CopyPool *p) {
        if (!p)
                return;
        pthread_mutex_lock(&p->lock);
        p->stop = true;
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->lock);
        for (unsigned i = 0; i < p->n; i++)
                (void) pthread_join(p->copiers[i].thread, NULL);
        for (size_t i = 0; i < SLOTS; i++) {
                job_close(&p->jobs[i]);
                free(p->jobs[i].path);
        }
        for (size_t i = 0; i < COPY_POOL_THREADS_MAX; i++) {
                free(p->copiers[i].buf);
                sha256_free(p->copiers[i].h);
        }
        pthread_cond_destroy(&p->room);
        pthread_cond_destroy(&p->work);
        pthread_mutex_destroy(&p->lock);
        free(p);
}
