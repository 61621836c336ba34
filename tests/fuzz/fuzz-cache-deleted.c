/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the build cache's list of deletions (snapshot/cache-merge.h), which the
 * root worker reads from what a job's capsule sent (threat 15). Any input ends in a clean
 * success or a coded refusal; what it accepts names only paths below a cache path. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/path-util.h"
#include "snapshot/cache-merge.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        CacheDeleted d = {};
        TfwError e = {0};
        int r = cache_deleted_parse((const char *) data, size, 3, &d, &e);
        if (r >= 0) {
                for (size_t i = 0; i < d.n; i++) {
                        const char *p = d.v[i];
                        if (p[0] < '0' || p[0] > '2' || p[1] != '/' || !path_is_relative_normalized(p + 2))
                                __builtin_trap();
                        if (i > 0 && strcmp(d.v[i - 1], p) > 0)
                                __builtin_trap();
                }
                cache_deleted_done(&d);
        } else if (!e.code || d.v)
                __builtin_trap();
        return 0;
}
