/* SPDX-License-Identifier: MIT */
/* The host's stop records (capsule/protocol.h, CAPSULE_STOP_RECORD): read from init's copy of
 * the input channel while the outputs are sent, so a stream the host refused is not sent (nor
 * read) to its end. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "capsule-init/init-internal.h"

int control_fd = -1;

static uint8_t rec[CAPSULE_STOP_RECORD_SIZE];
static size_t rec_n;
static bool stop_artifacts, stop_cache, stop_changes;

static void control_close(void) {
        if (control_fd >= 0)
                close(control_fd);
        control_fd = -1;
}

/* The job is dead: whatever the channel holds now was written by it (the host writes only after
 * the token, which comes next), and is dropped. */
void control_drain(void) {
        static uint8_t junk[4096];
        if (control_fd < 0)
                return;
        if (fcntl(control_fd, F_SETFL, O_NONBLOCK) < 0) {
                control_close();
                return;
        }
        for (;;) {
                ssize_t k = read(control_fd, junk, sizeof(junk));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno == EAGAIN)
                        return;
                if (k <= 0) {
                        /* The host closed its end: it sends no record (nothing to wait for). */
                        control_close();
                        return;
                }
        }
}

/* Whatever records arrived since the last look, taken in. A record that is not the host's ends
 * the reading of the channel (the host's word is then never taken from it). */
static void control_poll(void) {
        while (control_fd >= 0) {
                ssize_t k = read(control_fd, rec + rec_n, sizeof(rec) - rec_n);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno == EAGAIN)
                        return;
                if (k <= 0) {
                        control_close();
                        return;
                }
                rec_n += (size_t) k;
                if (rec_n < sizeof(rec))
                        continue;
                rec_n = 0;
                int kind = capsule_stop_record_parse(rec, secret);
                if (kind == CAPSULE_CHUNK_ARTIFACTS)
                        stop_artifacts = true;
                else if (kind == CAPSULE_CHUNK_CACHE)
                        stop_cache = true;
                else if (kind == CAPSULE_CHUNK_CHANGES)
                        stop_changes = true;
                else {
                        say("a record on the input channel that is not the worker's: it is no longer read");
                        control_close();
                }
        }
}

bool control_stopped(uint8_t kind) {
        control_poll();
        return kind == CAPSULE_CHUNK_ARTIFACTS ? stop_artifacts : kind == CAPSULE_CHUNK_CACHE ? stop_cache : stop_changes;
}
