/* SPDX-License-Identifier: MIT */
/* The live log: what the job writes, readable while it runs (contract section 9, the
 * controller's <results>/<id>.live.log).
 *
 * Accepts: the bounded job log (capsule/log-cap.h) and the log channel's trailer splitter, after
 * every chunk of the log channel; an fd opened for writing (the caller's: created O_EXCL,
 * O_NOFOLLOW, never a path here).
 * Guarantees: the file only grows, and at every moment it is a prefix of the job.log the job
 * will end with, whatever it writes next: it holds the first log_cap_head_max() bytes of the
 * output at most (the head-and-tail rule keeps those whole; what comes after them is known
 * only at the end), so a reader that printed the live log prints the rest of job.log from the
 * same offset and nothing twice. Bytes still held back by the trailer splitter are written
 * too, up to the first "\n\036" (where init's trailer may start: the job cannot forge it, it
 * carries a secret token, so whatever comes before it is output; a last "\n" is written at
 * once, so a read that splits init's one write of its trailer after its "\n" can leave one
 * "\n" more than job.log has). A write that fails stops
 * the live log there; the job and job.log go on. */
#pragma once

#include <stdint.h>

#include "capsule/channel.h"
#include "capsule/log-cap.h"

typedef struct LogLive {
        int fd;         /* > STDERR_FILENO, or no live log */
        uint64_t len;   /* bytes in the file */
        bool failed;
} LogLive;

void log_live_update(LogLive *l, const LogCap *log, const TrailerSplitter *t);
