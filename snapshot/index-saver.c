/* SPDX-License-Identifier: MIT */
/* A generation's index written on a thread of its own. See index-saver.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/macro.h"
#include "index-saver.h"

struct IndexSaver {
        pthread_t thread;
        pid_t pid;     /* the process whose thread it is: a child forked since has no thread */
        pthread_mutex_t lock;
        GenIndex *x;
        int dir_fd;
        const char *name;
        bool done;     /* under lock: the thread wrote (or failed to write) the index */
        int lock_fd;   /* under lock: closed by whoever comes last of the thread and the hand-over */
        int r;         /* the save's result, read after the join */
        TfwError e;
};

int index_saver_test_gate_fd = -1;

static void *saver_main(void *arg) {
        IndexSaver *s = arg;
        if (index_saver_test_gate_fd >= 0) {
                char c;
                (void) !read(index_saver_test_gate_fd, &c, 1);
        }
        s->r = gen_index_save(s->x, s->dir_fd, s->name, &s->e);
        s->x = gen_index_free(s->x);
        pthread_mutex_lock(&s->lock);
        s->done = true;
        int fd = TAKE_FD(s->lock_fd);
        pthread_mutex_unlock(&s->lock);
        safe_close(fd);
        return NULL;
}

int index_saver_start(GenIndex *x, int dir_fd, const char *name, IndexSaver **ret, TfwError *e) {
        *ret = NULL;
        IndexSaver *s = calloc(1, sizeof(*s));
        if (s) {
                *s = (IndexSaver) { .pid = getpid(), .x = x, .dir_fd = dir_fd, .name = name, .lock_fd = -EBADF };
                pthread_mutex_init(&s->lock, NULL);
                /* The thread must not take signals meant for the process's main loop. */
                sigset_t all, old;
                sigfillset(&all);
                pthread_sigmask(SIG_SETMASK, &all, &old);
                int t = pthread_create(&s->thread, NULL, saver_main, s);
                pthread_sigmask(SIG_SETMASK, &old, NULL);
                if (t == 0) {
                        *ret = s;
                        return 0;
                }
                pthread_mutex_destroy(&s->lock);
                free(s);
        }
        /* No thread: written now. */
        int r = gen_index_save(x, dir_fd, name, e);
        gen_index_free(x);
        return r;
}

void index_saver_hand_lock(IndexSaver *s, int lock_fd) {
        pthread_mutex_lock(&s->lock);
        bool done = s->done;
        if (!done) {
                safe_close(s->lock_fd);
                s->lock_fd = lock_fd;
        }
        pthread_mutex_unlock(&s->lock);
        if (done)
                safe_close(lock_fd);
}

int index_saver_finish(IndexSaver *s, TfwError *e) {
        if (!s)
                return 0;
        if (s->pid != getpid()) {
                /* A child forked while the thread ran: the thread, the index and the write are
                 * the parent's. This copy only closes its descriptor of a lock handed over. */
                safe_close(s->lock_fd);
                return tfw_error(e, ECHILD, "generation_store", "the index '%s' is written by the process that walked", s->name);
        }
        (void) pthread_join(s->thread, NULL);
        int r = s->r;
        if (r < 0 && e)
                *e = s->e;
        safe_close(s->lock_fd);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return r;
}
