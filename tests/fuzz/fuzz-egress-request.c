/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the egress proxy's request-head parser (issue 21). Any input must end in
 * a success whose results satisfy the parser's promises, or a coded refusal, never a crash,
 * leak, read past the input or undefined behaviour. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parser/egress-request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* An exact-size heap copy, so ASan flags any read past size. */
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        if (size)
                memcpy(buf, data, size);

        EgressRequest r = {};
        size_t consumed = 0;
        const char *reason = NULL;
        int q = egress_request_parse(buf, size, &r, &consumed, &reason);
        if (q == 0) {
                if (consumed < 4 || consumed > size || consumed > EGRESS_HEAD_MAX ||
                    memcmp(buf + consumed - 4, "\r\n\r\n", 4) != 0 || !r.host[0] ||
                    strlen(r.host) > EGRESS_HOST_MAX)
                        __builtin_trap();
                if (r.kind == EGRESS_REQ_CONNECT) {
                        if (r.head || r.port == 0)
                                __builtin_trap();
                } else if (r.kind == EGRESS_REQ_FORWARD) {
                        if (!r.head || strlen(r.head) != r.head_len || r.head_len < 23 ||
                            memcmp(r.head + r.head_len - 23, "\r\nConnection: close\r\n\r\n", 23) != 0)
                                __builtin_trap();
                } else
                        __builtin_trap();
                egress_request_done(&r);
        } else if (q == -EINVAL) {
                if (!reason || r.head)
                        __builtin_trap();
        } else if (q == -EAGAIN) {
                if (size >= EGRESS_HEAD_MAX)
                        __builtin_trap();
        } else if (q != -E2BIG || size < EGRESS_HEAD_MAX)
                __builtin_trap();
        free(buf);
        return 0;
}
