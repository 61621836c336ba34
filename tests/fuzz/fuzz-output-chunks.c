/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the worker's parting of the artifact channel's chunks (capsule/outputs.c)
 * after init's token: any bytes init (or a job that somehow wrote after the token) could send,
 * fed in two pieces cut where the first byte says. No importer runs (nobody takes the artifacts
 * and there is no cache), so the chunks' framing, init's refusals ('X', 'a', 'c') and the stop
 * records written back are what is exercised. Any input must end with no crash, leak or read
 * past the input; an error that is the framing's or init's words; never a cache called whole;
 * and at most one stop record for the artifacts on the control channel. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capsule/outputs.h"
#include "common/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t token[CAPSULE_TOKEN_SIZE] = "fuzz-token-0123";

static void check_error(const OutputSink *s) {
        if (!s->error_code)
                return;
        if (!memchr(s->error, 0, sizeof(s->error)))
                __builtin_trap();
        for (const char *c = s->error; *c; c++)
                if ((unsigned char) *c < 0x20 || (unsigned char) *c >= 0x7f)
                        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        int ctl[2];
        if (size < 1 || pipe2(ctl, O_CLOEXEC | O_NONBLOCK) < 0)
                return 0;
        size_t cut = size > 1 ? data[0] % size : 0;
        data++;
        size--;
        cut = MIN(cut, size);

        ArtifactLimits al = { .max_bytes = 1 << 20, .max_entries = 100, .unpriv_uid = 65534, .unpriv_gid = 65534 };
        Outputs o;
        outputs_init(&o, token, &al, -1, NULL, -1, NULL, -1);
        outputs_set_control(&o, ctl[1]);
        uint8_t *buf = malloc(CAPSULE_TOKEN_SIZE + size + 1);
        if (!buf)
                abort();
        memcpy(buf, token, CAPSULE_TOKEN_SIZE);
        memcpy(buf + CAPSULE_TOKEN_SIZE, data, size);
        outputs_feed(&o, buf, CAPSULE_TOKEN_SIZE + cut);
        if (outputs_blocked_fd(&o) >= 0)
                __builtin_trap(); /* no importer: nothing can hold the channel */
        outputs_feed(&o, buf + CAPSULE_TOKEN_SIZE + cut, size - cut);
        outputs_end(&o);
        ArtifactSummary as, cs, hs;
        if (outputs_finish(&o, &as, &cs, &hs))
                __builtin_trap(); /* no cache */
        if (o.art.started || o.cache.started || o.ctl_fd >= 0)
                __builtin_trap();
        check_error(&o.art);
        check_error(&o.cache);

        uint8_t got[2 * CAPSULE_STOP_RECORD_SIZE];
        ssize_t n = read(ctl[0], got, sizeof(got));
        if (n > 0 && (n != CAPSULE_STOP_RECORD_SIZE || capsule_stop_record_parse(got, token) != CAPSULE_CHUNK_ARTIFACTS))
                __builtin_trap();
        close(ctl[0]);
        free(buf);
        return 0;
}
