/* SPDX-License-Identifier: MIT */
/* A single-producer, single-consumer ring of chunk buffers. The walk fills slot `submitted`,
 * the hasher consumes slot `consumed`; both counters only grow. The fast paths use atomics
 * only: waking the other side goes through the mutex and costs a futex call, so the walk wakes
 * a sleeping hasher only once WAKE_BATCH chunks wait (or when it needs the results), and the
 * hasher wakes the walk only when the walk said it is waiting. Each side announces that it is
 * about to sleep (a sequentially consistent store) before checking for work a last time, and
 * the other side publishes work before looking at that flag, so a wakeup is never lost. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "blob-hasher.h"
#include "common/macro.h"

/* Jobs in flight: enough that the walk rarely waits for a hasher that is short of CPU. Each
 * holds at most a chunk buffer (read/write copies, allocated on first use) or an fd (copies
 * made with copy_file_range). */
#define SLOTS 64
#define WAKE_BATCH 16

typedef struct Slot {
        uint8_t *data;
        int fd;             /* >= 0: hash the first len bytes of this file, then close it */
        size_t len;
        uint64_t header_len; /* first chunk, or the file's length for an fd job */
        bool first, last;
        GitTreeBuilder *tb; /* where the id goes (last chunk only); NULL: dropped */
        size_t index;
        bool has_result;    /* written by the hasher, read by the walk after `consumed` passes */
        uint8_t oid[GIT_OID_SIZE];
} Slot;

struct BlobHasher {
        pthread_mutex_t lock;
        pthread_cond_t work; /* the hasher sleeps here */
        pthread_cond_t room; /* the walk sleeps here */
        bool threaded;
        atomic_bool stop, hasher_sleeping, walk_waiting;
        atomic_uint_fast64_t submitted, consumed;
        atomic_int error;
        uint64_t applied; /* walk only: results of slots below this are stored */
        Sha256 *h;        /* used only by whoever hashes: the thread, or the walk when inline */
        uint8_t *fd_buf;  /* the same: where fd jobs are read */
        pthread_t thread;
        Slot slots[SLOTS];
};

/* Hash a whole blob from a file the caller wrote and nobody else can change, reading it into
 * the slot's buffer. */
static int process_fd(BlobHasher *h, Slot *s) {
        int r = git_blob_hash_start(h->h, s->header_len);

        for (uint64_t off = 0; r >= 0 && off < s->header_len;) {
                size_t want = (size_t) MIN((uint64_t) BLOB_CHUNK_SIZE, s->header_len - off);
                ssize_t k = pread(s->fd, h->fd_buf, want, (off_t) off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        r = k < 0 ? -errno : -EIO; /* the copy is shorter than what was copied */
                else {
                        r = sha256_update(h->h, h->fd_buf, (size_t) k);
                        off += (uint64_t) k;
                }
        }
        s->fd = safe_close(s->fd);
        if (r < 0) {
                uint8_t scratch[GIT_OID_SIZE];
                (void) sha256_final(h->h, scratch); /* reset for the next blob */
                return r;
        }
        r = sha256_final(h->h, s->oid);
        if (r < 0)
                return r;
        s->has_result = s->tb != NULL;
        return 0;
}

/* Hash one chunk (or one file); at the end of a wanted blob, leave its id in the slot. */
static int process(BlobHasher *h, Slot *s) {
        int r;

        s->has_result = false;
        if (s->fd >= 0)
                return process_fd(h, s);
        if (s->first) {
                r = git_blob_hash_start(h->h, s->header_len);
                if (r < 0)
                        return r;
        }
        if (s->len > 0) {
                r = sha256_update(h->h, s->data, s->len);
                if (r < 0)
                        return r;
        }
        if (!s->last)
                return 0;
        /* Finishing also resets the context for the next blob, wanted or not. */
        r = sha256_final(h->h, s->oid);
        if (r < 0)
                return r;
        s->has_result = s->tb != NULL;
        return 0;
}

static void store(Slot *s) {
        if (s->has_result)
                memcpy(s->tb->entries[s->index].oid, s->oid, GIT_OID_SIZE);
        s->has_result = false;
}

/* Walk side: store the results of every consumed slot not stored yet. */
static void apply_results(BlobHasher *h) {
        uint64_t c = atomic_load(&h->consumed);
        for (; h->applied < c; h->applied++)
                store(&h->slots[h->applied % SLOTS]);
}

static void wake(pthread_mutex_t *lock, pthread_cond_t *cond) {
        pthread_mutex_lock(lock);
        pthread_cond_signal(cond);
        pthread_mutex_unlock(lock);
}

static void *hasher_main(void *userdata) {
        BlobHasher *h = userdata;

        for (;;) {
                uint64_t c = atomic_load(&h->consumed);
                if (c == atomic_load(&h->submitted)) {
                        pthread_mutex_lock(&h->lock);
                        atomic_store(&h->hasher_sleeping, true);
                        while (c == atomic_load(&h->submitted) && !atomic_load(&h->stop))
                                pthread_cond_wait(&h->work, &h->lock);
                        atomic_store(&h->hasher_sleeping, false);
                        bool done = c == atomic_load(&h->submitted);
                        pthread_mutex_unlock(&h->lock);
                        if (done)
                                return NULL; /* stopped, and nothing left */
                        continue;
                }

                int r = process(h, &h->slots[c % SLOTS]);
                if (r < 0) {
                        int expected = 0;
                        atomic_compare_exchange_strong(&h->error, &expected, r);
                }
                atomic_store(&h->consumed, c + 1);
                if (atomic_load(&h->walk_waiting))
                        wake(&h->lock, &h->room);
        }
}

int blob_hasher_new(bool threaded, BlobHasher **ret) {
        BlobHasher *h = calloc(1, sizeof(*h));
        int r;

        if (!h)
                return -ENOMEM;
        pthread_mutex_init(&h->lock, NULL);
        pthread_cond_init(&h->work, NULL);
        pthread_cond_init(&h->room, NULL);
        r = sha256_new(&h->h);
        if (r < 0)
                goto fail;
        h->fd_buf = malloc(BLOB_CHUNK_SIZE);
        if (!h->fd_buf) {
                r = -ENOMEM;
                goto fail;
        }
        for (size_t i = 0; i < SLOTS; i++)
                h->slots[i].fd = -EBADF;

        if (threaded) {
                /* The thread must not take signals meant for the process's main loop. */
                sigset_t all, old;
                sigfillset(&all);
                pthread_sigmask(SIG_SETMASK, &all, &old);
                h->threaded = pthread_create(&h->thread, NULL, hasher_main, h) == 0;
                pthread_sigmask(SIG_SETMASK, &old, NULL);
        }

        *ret = h;
        return 0;
fail:
        blob_hasher_free(h);
        return r;
}

void blob_hasher_free(BlobHasher *h) {
        if (!h)
                return;
        if (h->threaded) {
                atomic_store(&h->stop, true);
                wake(&h->lock, &h->work);
                pthread_join(h->thread, NULL);
        }
        for (size_t i = 0; i < SLOTS; i++) {
                safe_close(h->slots[i].fd);
                free(h->slots[i].data);
        }
        free(h->fd_buf);
        sha256_free(h->h);
        pthread_cond_destroy(&h->room);
        pthread_cond_destroy(&h->work);
        pthread_mutex_destroy(&h->lock);
        free(h);
}

/* Walk side: sleep until the hasher has consumed at least `target` slots. */
static void wait_consumed(BlobHasher *h, uint64_t target) {
        if (atomic_load(&h->consumed) >= target)
                return;
        pthread_mutex_lock(&h->lock);
        atomic_store(&h->walk_waiting, true);
        /* The hasher may be asleep on fewer than WAKE_BATCH chunks: it must run now. */
        if (atomic_load(&h->hasher_sleeping))
                pthread_cond_signal(&h->work);
        while (atomic_load(&h->consumed) < target)
                pthread_cond_wait(&h->room, &h->lock);
        atomic_store(&h->walk_waiting, false);
        pthread_mutex_unlock(&h->lock);
}

/* Walk side: the next slot, once the hasher is done with it. */
static Slot *next_slot(BlobHasher *h) {
        if (!h->threaded)
                return &h->slots[0];
        uint64_t s = atomic_load(&h->submitted);
        if (s >= SLOTS)
                wait_consumed(h, s - SLOTS + 1);
        /* The slot about to be reused may still hold an id to store. */
        apply_results(h);
        return &h->slots[s % SLOTS];
}

uint8_t *blob_hasher_buffer(BlobHasher *h) {
        Slot *s = next_slot(h);
        if (!s->data)
                s->data = malloc(BLOB_CHUNK_SIZE);
        return s->data;
}

/* Walk side: hand slot n to the hasher. */
static int publish(BlobHasher *h, uint64_t n) {
        atomic_store(&h->submitted, n + 1);
        if (atomic_load(&h->hasher_sleeping) && n + 1 - atomic_load(&h->consumed) >= WAKE_BATCH)
                wake(&h->lock, &h->work);
        return 0;
}

int blob_hasher_submit(BlobHasher *h, size_t len, bool first, uint64_t header_len, bool last,
                       GitTreeBuilder *tb, size_t index) {
        uint64_t n = h->threaded ? atomic_load(&h->submitted) : 0;
        Slot *s = &h->slots[n % SLOTS];

        if (len > BLOB_CHUNK_SIZE || !s->data)
                return -EINVAL;
        s->fd = -EBADF;
        s->len = len;
        s->first = first;
        s->header_len = header_len;
        s->last = last;
        s->tb = last ? tb : NULL;
        s->index = index;

        if (!h->threaded) {
                int r = process(h, s);
                if (r < 0)
                        return r;
                store(s);
                return 0;
        }

        return publish(h, n);
}

int blob_hasher_submit_fd(BlobHasher *h, int fd, uint64_t len, GitTreeBuilder *tb, size_t index) {
        Slot *s = next_slot(h);
        uint64_t n = h->threaded ? atomic_load(&h->submitted) : 0;

        s->fd = fd;
        s->len = 0;
        s->first = s->last = true;
        s->header_len = len;
        s->tb = tb;
        s->index = index;

        if (!h->threaded) {
                int r = process(h, s);
                if (r < 0)
                        return r;
                store(s);
                return 0;
        }
        return publish(h, n);
}

int blob_hasher_sync(BlobHasher *h) {
        if (!h->threaded)
                return 0;
        wait_consumed(h, atomic_load(&h->submitted));
        apply_results(h);
        return atomic_load(&h->error);
}
