/* SPDX-License-Identifier: MIT */
/* changes.json, the manifest of a job's changeset (exec/changeset.h writes it; docs/controller.md,
 * "Changes"), read back strictly by `apply`, which runs as the controller and must not trust
 * what a job's changeset says about itself beyond what is checked here.
 *
 * Accepts: one JSON object {"version": 1, "complete": bool, "incomplete": string|null,
 * "changes": [ENTRY...]} with at most CHANGES_MANIFEST_MAX entries; ENTRY as exec/changeset.h
 * documents: kind added, modified or mode with "mode" (100644 or 100755), "size" (0..2^62),
 * "id" (64 lowercase hex digits), "base" and "base_mode" (both null for added, both set for the
 * others); kind deleted with "base_mode" (100644, 100755, 120000 or 40000) and "base" (hex, or
 * null but for a file); kind directory; kind refused with "why" (its "path" is only shown).
 * Every path but a refused one: relative, '/'-separated names git accepts (no empty, "." or
 * ".." component), at most 4096 bytes, not below the control directory (.tentaflake-worker),
 * named once. Refuses anything else (unknown keys included), with the code changes_invalid
 * and a message naming the entry. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

#define CHANGES_MANIFEST_MAX 1000000
#define CHANGES_ID_HEX 64

typedef enum ChangeKind {
        CHANGE_ADDED,
        CHANGE_MODIFIED,
        CHANGE_MODE,
        CHANGE_DELETED,
        CHANGE_DIRECTORY,
        CHANGE_REFUSED,
} ChangeKind;

typedef struct ChangeEntry {
        ChangeKind kind;
        char *path;
        bool executable;                  /* added, modified, mode: 100755 */
        uint64_t size;
        char id[CHANGES_ID_HEX + 1];      /* added, modified, mode */
        char base[CHANGES_ID_HEX + 1];    /* "" when none */
        unsigned base_mode;               /* 0 when none; else 0100644, 0100755, 0120000, 040000 */
        char *why;                        /* refused */
} ChangeEntry;

typedef struct ChangesManifest {
        bool complete;
        char *incomplete;
        ChangeEntry *v;
        size_t n;
} ChangesManifest;

int changes_manifest_parse(const char *buf, size_t len, ChangesManifest **ret, TfwError *e);
ChangesManifest *changes_manifest_free(ChangesManifest *m);
static inline void changes_manifest_freep(ChangesManifest **m) {
        changes_manifest_free(*m);
}

const char *change_kind_to_string(ChangeKind k);
/* The path rule above, alone. */
bool changes_path_is_valid(const char *path);
