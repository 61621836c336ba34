/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the names a folding file system takes for another (common/name-fold.h),
 * which `apply` runs on every component of a job's changeset (controller/apply-git.h). Any
 * bytes: a fold is lowercase printable-or-control ASCII no longer than the name, with no ':'
 * and no trailing dot or space; name_folds_to() agrees with name_fold() and name_folded_is(). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/name-fold.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const targets[] = { ".git", ".gitmodules", ".tentaflake-worker", "head", "commondir" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char folded[NAME_FOLD_MAX];
        const char *name = (const char *) data;
        bool ok = name_fold(name, size, folded);
        if (ok) {
                size_t k = strlen(folded);
                if (k > size || strchr(folded, ':') || (k > 0 && (folded[k - 1] == '.' || folded[k - 1] == ' ')))
                        __builtin_trap();
                for (size_t i = 0; i < k; i++)
                        if ((unsigned char) folded[i] >= 0x80 || (folded[i] >= 'A' && folded[i] <= 'Z'))
                                __builtin_trap();
        }
        for (size_t t = 0; t < sizeof(targets) / sizeof(*targets); t++)
                if (name_folds_to(name, size, targets[t]) != (ok && name_folded_is(folded, targets[t])))
                        __builtin_trap();
        char *path = strndup(name, size);
        if (path) {
                (void) path_component_folds_to(path, ".git");
                free(path);
        }
        return 0;
}
