/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the worker's reading of its egress proxy's records (capsule/egress.h,
 * egress_record_parse): a proxy the job took over can write any bytes there, as root reads them.
 * Any input must end in a refusal or in a record that keeps the parser's promises (exactly its
 * keys, one of the verdicts), never a crash, leak or read past the input. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/egress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *buf = malloc(size ? size : 1);
        if (!buf)
                return 0;
        if (size)
                memcpy(buf, data, size);
        json_t *rec = NULL;
        int r = egress_record_parse(buf, size, &rec);
        if (r == 0) {
                const char *v = json_string_value(json_object_get(rec, "verdict"));
                if (!rec || json_object_size(rec) != 10 || !v || (strcmp(v, "allowed") && strcmp(v, "refused")))
                        __builtin_trap();
                json_decref(rec);
        } else if (r != -EBADMSG && r != -ENOMEM)
                __builtin_trap();
        free(buf);
        return 0;
}
