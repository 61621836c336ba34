/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

static int max_level = LOG_INFO;
static int prefix_mode = -1; /* -1: decide from JOURNAL_STREAM on first use */

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

void log_set_prefix_mode(bool sd_prefix) {
        prefix_mode = sd_prefix;
}

int log_internal(int level, int err, const char *fmt, ...) {
        char line[4096];
        va_list ap;
        int saved = errno;

        if (err < 0)
                err = -err;
        if (level <= max_level) {
                if (prefix_mode < 0)
                        prefix_mode = getenv("JOURNAL_STREAM") != NULL;
                va_start(ap, fmt);
                (void) vsnprintf(line, sizeof(line), fmt, ap);
                va_end(ap);
                if (prefix_mode)
                        fprintf(stderr, "<%d>%s\n", level, line);
                else
                        fprintf(stderr, "tentaflake-worker: %s\n", line);
        }
        errno = saved;
        return err ? -err : 0;
}
