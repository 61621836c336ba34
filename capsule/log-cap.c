/* SPDX-License-Identifier: MIT */
/* The bounded job log (log-cap.h): the head in a flat buffer, the rest in a ring. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/log-cap.h"
#include "common/fd-util.h"

#define MARKER_FMT "\n[tentaflake-worker: %" PRIu64 " bytes omitted]\n"
/* The marker at its longest (20 digits): reserved out of the cap so the file never exceeds it. */
#define MARKER_MAX (sizeof("\n[tentaflake-worker: 18446744073709551615 bytes omitted]\n") - 1)
#define LOG_CAP_MAX ((uint64_t) 1 << 40)

struct LogCap {
        uint64_t max;
        uint64_t seen;
        size_t head_max; /* bytes kept from the start */
        size_t tail_max; /* bytes kept from the end when truncating */
        uint8_t *head;
        size_t head_len;
        /* Everything after the head goes through the ring. It holds max - head_max bytes, the
         * marker's room included, so output that fits the cap is kept whole. */
        uint8_t *ring;
        size_t ring_size, ring_pos, ring_len;
};

int log_cap_new(uint64_t max_bytes, LogCap **ret) {
        LogCap *c;

        if (max_bytes < LOG_CAP_MIN || max_bytes > LOG_CAP_MAX || max_bytes > SIZE_MAX / 2)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->max = max_bytes;
        c->head_max = (size_t) (max_bytes - MARKER_MAX) / 2;
        c->tail_max = (size_t) (max_bytes - MARKER_MAX) - c->head_max;
        c->ring_size = (size_t) max_bytes - c->head_max;
        /* Reserved now, touched only as output arrives: feeding never allocates. */
        c->head = malloc(c->head_max);
        c->ring = malloc(c->ring_size);
        if (!c->head || !c->ring) {
                log_cap_free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

LogCap *log_cap_free(LogCap *c) {
        if (c) {
                free(c->head);
                free(c->ring);
                free(c);
        }
        return NULL;
}

void log_cap_feed(LogCap *c, const void *data, size_t len) {
        const uint8_t *p = data;

        c->seen += len;
        if (c->head_len < c->head_max) {
                size_t n = MIN(len, c->head_max - c->head_len);
                memcpy(c->head + c->head_len, p, n);
                c->head_len += n;
                p += n;
                len -= n;
        }
        if (len == 0)
                return;
        if (len >= c->ring_size) {
                /* Only the last ring_size bytes can survive: skip the rest without copying. */
                memcpy(c->ring, p + len - c->ring_size, c->ring_size);
                c->ring_pos = 0;
                c->ring_len = c->ring_size;
                return;
        }
        size_t first = MIN(len, c->ring_size - c->ring_pos);
        memcpy(c->ring + c->ring_pos, p, first);
        memcpy(c->ring, p + first, len - first);
        c->ring_pos = (c->ring_pos + len) % c->ring_size;
        c->ring_len = MIN(c->ring_len + len, c->ring_size);
}

uint64_t log_cap_seen(const LogCap *c) {
        return c->seen;
}

bool log_cap_truncated(const LogCap *c) {
        return c->seen > c->max;
}

size_t log_cap_head_max(const LogCap *c) {
        return c->head_max;
}

const uint8_t *log_cap_head(const LogCap *c, size_t *ret_len) {
        *ret_len = c->head_len;
        return c->head;
}

static uint64_t omitted(const LogCap *c) {
        return c->seen - c->head_max - c->tail_max;
}

uint64_t log_cap_size(const LogCap *c) {
        if (!log_cap_truncated(c))
                return c->seen;
        char marker[MARKER_MAX + 1];
        int n = snprintf(marker, sizeof(marker), MARKER_FMT, omitted(c));
        return c->head_max + (uint64_t) n + c->tail_max;
}

/* The last n bytes of the ring, oldest first. */
static int write_ring_tail(const LogCap *c, int fd, size_t n) {
        size_t start = (c->ring_pos + c->ring_size - n) % c->ring_size;
        size_t first = MIN(n, c->ring_size - start);
        int r = write_all(fd, c->ring + start, first);
        if (r < 0)
                return r;
        return write_all(fd, c->ring, n - first);
}

int log_cap_write(const LogCap *c, int fd) {
        int r = write_all(fd, c->head, c->head_len);
        if (r < 0)
                return r;
        if (!log_cap_truncated(c))
                return write_ring_tail(c, fd, c->ring_len);

        char marker[MARKER_MAX + 1];
        int n = snprintf(marker, sizeof(marker), MARKER_FMT, omitted(c));
        r = write_all(fd, marker, (size_t) n);
        if (r < 0)
                return r;
        return write_ring_tail(c, fd, c->tail_max);
}
