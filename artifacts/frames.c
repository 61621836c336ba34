/* SPDX-License-Identifier: MIT */
/* The frame encoder the tar parser uses to talk to the writer (import-internal.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifacts/import-internal.h"
#include "common/fd-util.h"
#include "common/macro.h"

#define FRAME_OUT_CAP ((size_t) 1 << 20)

int frame_out_init(FrameOut *o, frame_flush_t flush, void *userdata) {
        *o = (FrameOut) { .flush = flush, .userdata = userdata, .cap = FRAME_OUT_CAP };
        o->buf = malloc(o->cap);
        return o->buf ? 0 : -ENOMEM;
}

void frame_out_done(FrameOut *o) {
        free(o->buf);
        o->buf = NULL;
        o->len = 0;
}

int frame_out_flush(FrameOut *o) {
        if (o->len == 0)
                return 0;
        int r = o->flush(o->userdata, o->buf, o->len);
        o->len = 0;
        return r;
}

int frame_out_put(FrameOut *o, uint32_t type, const void *p1, size_t n1, const void *p2,
                  size_t n2) {
        size_t payload = n1 + n2;
        int r;

        if (payload > FRAME_PAYLOAD_MAX || n1 > FRAME_PAYLOAD_MAX)
                return -E2BIG;
        if (o->cap - o->len < FRAME_HEADER_SIZE + payload) {
                r = frame_out_flush(o);
                if (r < 0)
                        return r;
        }
        uint32_t h[2] = { type, (uint32_t) payload };
        memcpy(o->buf + o->len, h, sizeof(h));
        o->len += sizeof(h);
        if (n1 > 0)
                memcpy(o->buf + o->len, p1, n1);
        o->len += n1;
        if (n2 > 0)
                memcpy(o->buf + o->len, p2, n2);
        o->len += n2;
        return 0;
}

int frame_out_fail(FrameOut *o, uint32_t kind, const char *fmt, ...) {
        char msg[FRAME_MESSAGE_MAX];
        va_list ap;

        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        /* libarchive's messages can quote bytes of the stream: keep them printable. */
        size_t n = strnlen(msg, sizeof(msg));
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) msg[i] < 0x20 || (unsigned char) msg[i] >= 0x7f)
                        msg[i] = '?';
        return frame_out_put(o, FRAME_FAIL, &kind, sizeof(kind), msg, n);
}

int frame_flush_fd(void *userdata, const uint8_t *buf, size_t len) {
        return write_all(*(int *) userdata, buf, len);
}
