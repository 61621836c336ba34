/* SPDX-License-Identifier: MIT */
/* The live log (log-live.h): the head of job.log, appended as the job writes it. */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>

#include "capsule/log-live.h"
#include "common/fd-util.h"

static void append(LogLive *l, const uint8_t *data, size_t len) {
        if (len == 0 || l->failed)
                return;
        if (write_all(l->fd, data, len) < 0)
                l->failed = true;
        else
                l->len += len;
}

/* The held-back bytes that are surely output: those before a possible trailer. */
static size_t held_output(const TrailerSplitter *t) {
        const uint8_t *p = memmem(t->tail, t->n_tail, "\n\036", 2);
        /* A last "\n" is written: the job's lines must not wait for the next one. It could be
         * the trailer's first byte only when a read splits init's one write of it there. */
        return p ? (size_t) (p - t->tail) : t->n_tail;
}

void log_live_update(LogLive *l, const LogCap *log, const TrailerSplitter *t) {
        if (l->fd <= STDERR_FILENO || l->failed || !log)
                return;
        size_t head_max = log_cap_head_max(log), head_len;
        const uint8_t *head = log_cap_head(log, &head_len);
        if (l->len >= head_max)
                return;
        if (l->len < head_len)
                append(l, head + l->len, head_len - (size_t) l->len);
        /* Everything the sink took is in the head: the held-back bytes come next. */
        uint64_t seen = log_cap_seen(log);
        if (seen != head_len || l->len < seen)
                return;
        size_t have = MIN(held_output(t), head_max - head_len), from = (size_t) (l->len - seen);
        if (from < have)
                append(l, t->tail + from, have - from);
}
