/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the validation plane's parsers of server answers (threats 8 and 11): the
 * claim (JOB + lease) and the tree manifest, then the path rules, the tree id recomputation
 * and the symlink rule on whatever manifest was accepted. Any input must end in a clean
 * success or a coded refusal, never a crash, leak or undefined behaviour. The first byte
 * chooses the parser (bit 0) and, for the manifest, the size of the chunks (1..128 bytes) in
 * which the reader is fed a second time: the verdict and the manifest must not depend on it. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"

#include "validation/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int chunked(const char *buf, size_t len, size_t chunk, VManifest **ret) {
        VManifestReader *rd = NULL;
        TfwError e = {0};
        int r = vmanifest_reader_new(NULL, &rd);
        for (size_t off = 0; r >= 0 && off < len; off += chunk)
                r = vmanifest_reader_feed(rd, buf + off, MIN(chunk, len - off), &e);
        if (r >= 0)
                r = vmanifest_reader_finish(rd, ret, &e);
        vmanifest_reader_free(rd);
        return r;
}

static bool same_manifest(const VManifest *a, const VManifest *b) {
        if (memcmp(a->tree, b->tree, GIT_OID_HEX_SIZE) != 0 || a->n_entries != b->n_entries)
                return false;
        for (size_t i = 0; i < a->n_entries; i++)
                if (strcmp(a->entries[i].path, b->entries[i].path) != 0 || a->entries[i].mode != b->entries[i].mode ||
                    memcmp(a->entries[i].blob, b->entries[i].blob, GIT_OID_SIZE) != 0)
                        return false;
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        TfwError e = {0};

        if (size == 0)
                return 0;
        if (data[0] & 1) {
                VJob *j = NULL;
                int r = vjob_parse_claim((const char *) data + 1, size - 1, &j, &e);
                if (r >= 0) {
                        /* Accepted jobs keep the invariants the worker relies on. */
                        if (!j || !vjob_url_segment_is_valid(j->id, VJOB_ID_MAX) || !vjob_repo_is_valid(j->repo) ||
                            strlen(j->tree) != 64 || j->attempt < 1 || !j->lease_id)
                                __builtin_trap();
                        /* A refused run section is only ever failed, never run: no argv needed. */
                        if (!j->refusal && (j->run.n_argv == 0 || !j->run.argv[0][0] || j->run.argv[j->run.n_argv]))
                                __builtin_trap();
                        vjob_free(j);
                } else if (!e.code || j)
                        __builtin_trap();
                return 0;
        }

        VManifest *m = NULL, *mc = NULL;
        int r = vmanifest_parse((const char *) data + 1, size - 1, &m, &e);
        int rc = chunked((const char *) data + 1, size - 1, (size_t) (data[0] >> 1) + 1, &mc);
        if ((r < 0) != (rc < 0) || (r >= 0 && !same_manifest(m, mc)))
                __builtin_trap();
        vmanifest_free(mc);
        if (r < 0) {
                if (!e.code || m)
                        __builtin_trap();
                return 0;
        }
        r = vmanifest_check_paths(m, &e);
        if (r >= 0) {
                /* A manifest that passes the path rules always yields a tree id. */
                if (vmanifest_verify_tree(m, m->tree, &e) < 0 && !streq(e.code, "tree_mismatch"))
                        __builtin_trap();
                /* Use the paths themselves as symlink targets: exercises the resolver. */
                char **targets = calloc(m->n_entries + 1, sizeof(char *));
                if (targets) {
                        for (size_t i = 0; i < m->n_entries; i++)
                                targets[i] = m->entries[(i + 1) % m->n_entries].path;
                        (void) vmanifest_check_symlinks(m, targets, &e);
                        free(targets);
                }
        } else if (!streq(e.code, "invalid_path"))
                __builtin_trap();
        vmanifest_free(m);
        return 0;
}
