/* SPDX-License-Identifier: MIT */
/* libFuzzer target: changes.json's reader (parser/changes-manifest.h), which `apply` runs as the
 * controller on a manifest a job's changeset produced (threat 18). Any input must end in a
 * clean success or a coded refusal; what it accepts keeps the reader's invariants. */
#include <stdint.h>
#include <string.h>

#include "parser/changes-manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        ChangesManifest *m = NULL;
        TfwError e = {0};
        int r = changes_manifest_parse((const char *) data, size, &m, &e);
        if (r >= 0) {
                if (!m || m->complete == !!m->incomplete)
                        __builtin_trap();
                for (size_t i = 0; i < m->n; i++) {
                        const ChangeEntry *c = &m->v[i];
                        /* Only a refused entry may name a path apply could not take. */
                        if (!c->path || (c->kind != CHANGE_REFUSED && !changes_path_is_valid(c->path)))
                                __builtin_trap();
                        if ((c->kind == CHANGE_ADDED || c->kind == CHANGE_MODIFIED || c->kind == CHANGE_MODE) &&
                            strlen(c->id) != CHANGES_ID_HEX)
                                __builtin_trap();
                }
                changes_manifest_free(m);
        } else if (!e.code || m)
                __builtin_trap();
        return 0;
}
