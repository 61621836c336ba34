/* SPDX-License-Identifier: MIT */
/* Following a running job's output (contract section 9): <results>/<id>.live.log, which only
 * the worker writes (orchestrator/publish.h) and which is, while it exists, a prefix of the
 * job.log the job ends with (capsule/log-live.h): the head of the head-and-tail rule, at most
 * half of limits.max_log_bytes. A reader that emitted offset bytes of it prints job.log from
 * offset on at the end (controller_log_copy) and so prints job.log once, whole, live or not.
 *
 * Accepts: a results directory fd and a valid id; the live log is opened read-only, without
 * following a link, as a regular file or not at all, and read at most max bytes at a time.
 * Guarantees: whole lines only, except a partial line that has waited LIVE_PARTIAL_USEC or
 * fills max by itself; bytes are emitted once, in order, never beyond what the file holds. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/macro.h"
#include "common/time-util.h"

#define LIVE_PARTIAL_USEC USEC_PER_SEC

typedef struct LiveFollow {
        int fd;               /* the live log, once it appeared */
        int wd;               /* its inotify watch (IN_MODIFY) in the caller's inotify fd */
        uint64_t offset;      /* bytes of it emitted */
        usec_t partial_since; /* monotonic: when a partial line began to wait; 0: none waits */
} LiveFollow;

#define LIVE_FOLLOW_NULL { .fd = -EBADF, .wd = -1 }

/* The next bytes to emit, at most max (*ret_len 0: none now), read into buf (max bytes) and
 * counted into l->offset. inotify_fd (< 0: none) is told to watch the file once it is open. */
int live_follow_next(LiveFollow *l, int results_fd, const char *id, int inotify_fd, char *buf, size_t max,
                     usec_t now, size_t *ret_len);

/* Milliseconds until a waiting partial line is due (0: now), or -1 when none waits. */
int live_follow_due_ms(const LiveFollow *l, usec_t now);

void live_follow_close(LiveFollow *l, int inotify_fd);
/* For _cleanup_: the fd only (the inotify fd closes with its own watches). */
static inline void live_follow_done(LiveFollow *l) {
        l->fd = safe_close(l->fd);
}

/* Up to max bytes of the job's log from offset on: the live log while it runs, <id>/job.log
 * once final (-ENOENT when there is none). */
int live_log_read(int results_fd, const char *id, bool final, uint64_t offset, size_t max, char **ret,
                  size_t *ret_len);

/* buf as JSON text: itself when it is UTF-8 without NUL, else with every byte above 0x7f and
 * every NUL as '?'. NULL: out of memory. */
json_t *live_json_text(const char *buf, size_t len);
