/* SPDX-License-Identifier: MIT */
/* A job's changeset (docs/capsule.md, "Changes"; contract sections 6 and 7): the list the
 * capsule's init sent with the files the job wrote (capsule/protocol.h, CAPSULE_CHUNK_CHANGES),
 * read as untrusted input and checked against the files the importer staged, into the manifest
 * that changes.json holds and the counts result.json's "changes" holds.
 *
 * changeset_build(staging_fd, generation_fd, ...): staging_fd is the changes' staging directory
 * (the importer wrote the files there, and CAPSULE_CHANGES_LIST); generation_fd the root of the
 * generation the job was given. The list is parsed strictly: one change a line, the kinds of
 * capsule/protocol.h, each path unescaped and checked (relative, components neither empty nor
 * "." nor "..", at most GIT_PATH_MAX bytes, not in the control directory), no path twice, the
 * end line last. Every "file" must be a staged regular file of that size, and every staged file
 * a "file" of the list (the staged tree is walked); every "deleted" must be in the generation.
 * Each file's blob id is git's SHA-256 of what was staged; each path's version in the
 * generation (its blob id and mode, opened one component at a time, never through a link) is
 * its base. At most CAPSULE_CHANGES_LIST_MAX bytes of list and max_entries changes are read.
 * skip (NULL-terminated, or NULL): paths (relative, normalised) that no change may name or be
 * below: artifacts/ and the cache's paths, which init leaves out; checked here again. The list and its directory are then removed from staging: what stays is the new
 * content of each file at its path.
 *
 * The manifest: {"version": 1, "complete": bool, "incomplete": why|null, "changes": [ENTRY...]},
 * ENTRY {"path", "kind": "added"|"modified"|"mode"|"deleted"|"directory"|"refused", "mode"
 * ("100644"|"100755"; a deleted directory "40000"), "size", "id" (the new content's blob id),
 * "base" (the blob id of the version the job was given, null when it had none), "base_mode",
 * "why" (refused)}; kinds: added (no file there before), modified (another content), mode (the
 * same content, the x bit changed), deleted, directory (made, with nothing else to say), refused
 * (not carried: a link, a special file, a name not UTF-8). Errors: -EBADMSG with code
 * "changes_rejected" (the list or the staged files broke a rule: nothing of them is to be
 * trusted), another negative errno with "changes_failed". */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

typedef struct ChangesetSummary {
        uint64_t added, modified, deleted, refused, directories;
        uint64_t bytes; /* of the files carried */
        bool complete;
} ChangesetSummary;

int changeset_build(int staging_fd, int generation_fd, const char *const *skip, uint64_t max_entries, json_t **ret_manifest,
                    ChangesetSummary *ret, TfwError *e);
