/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the inbox request parser (threat 8). Any input must end in a clean
 * success or a coded rejection, never a crash, leak or undefined behaviour. */
#include <stdint.h>
#include <string.h>

#include "parser/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Request *req = NULL;
        TfwError e = {0};
        RequestPolicy p = request_policy_default;

        /* Small limits too, so the fuzzer reaches the ceilings with short inputs. */
        if (size > 0 && (data[0] & 1)) {
                p.max_argv = 4;
                p.max_argv_bytes = 32;
                p.max_timeout_seconds = 10;
                p.default_timeout_seconds = 5;
        }
        int r = request_parse_buffer((const char *) data, size, "a", &p, &req, &e);
        if (r >= 0) {
                /* Every accepted request satisfies the contract's invariants. */
                if (!req || !request_id_is_valid(req->id) || req->argc == 0 ||
                    req->argc > p.max_argv || !req->argv[0][0] ||
                    req->timeout_seconds > p.max_timeout_seconds || strlen(req->sha256) != 64)
                        __builtin_trap();
                request_free(req);
        } else if (!e.code || req)
                __builtin_trap();
        return 0;
}
