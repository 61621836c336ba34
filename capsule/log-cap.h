/* SPDX-License-Identifier: MIT */
/* The bounded job log (contract section 3 job.log, limits.max_log_bytes).
 *
 * Accepts: the job's combined stdout+stderr in chunks of any size, any number of bytes.
 * Guarantees: feeding never blocks, never fails and never allocates (all memory, at most
 * max_bytes, is reserved by log_cap_new), so the caller can keep draining the job's pipe
 * whatever it writes. The final file is the whole output when it fits in max_bytes; otherwise
 * the first part, a marker line "\n[tentaflake-worker: N bytes omitted]\n" and the last part,
 * the two parts of equal size (to a byte) and the whole file never larger than max_bytes. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/macro.h"

/* The smallest cap accepted: room for the marker and some output on each side of it. */
#define LOG_CAP_MIN 256u

typedef struct LogCap LogCap;

/* -EINVAL when max_bytes < LOG_CAP_MIN or too large for memory, -ENOMEM. */
int log_cap_new(uint64_t max_bytes, LogCap **ret);
LogCap *log_cap_free(LogCap *c);
static inline void log_cap_freep(LogCap **c) {
        log_cap_free(*c);
}
#define _cleanup_log_cap_ _cleanup_(log_cap_freep)

void log_cap_feed(LogCap *c, const void *data, size_t len);

/* Bytes fed so far (what the job wrote), and whether the file drops some of them. */
uint64_t log_cap_seen(const LogCap *c);
bool log_cap_truncated(const LogCap *c);
/* The head: the first bytes of the output, never dropped, at most log_cap_head_max() of them
 * (the file's part before any marker). The live log (capsule/log-live.h) is made of it. */
size_t log_cap_head_max(const LogCap *c);
const uint8_t *log_cap_head(const LogCap *c, size_t *ret_len);
/* Size of the file log_cap_write will produce now. */
uint64_t log_cap_size(const LogCap *c);

/* Write the file (head, marker, tail; or everything) to fd at its current position. May be
 * called more than once; feeding may continue afterwards. */
int log_cap_write(const LogCap *c, int fd);
