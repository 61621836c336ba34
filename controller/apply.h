/* SPDX-License-Identifier: MIT */
/* `apply ID` (contract section 9; docs/controller.md, "Changes"): the controller writes a job's
 * changeset into its workspace, as its own user. The worker never does.
 *
 * Refuses the whole changeset, writing nothing, when: the result has none (or an error instead),
 * it is incomplete, changes.json breaks parser/changes-manifest.h, one of the git rules of
 * controller/apply-git.h refuses it (unless allow_git: a job must not plant a hook, a config or
 * a pointer that the agent's git then runs, in this repository, a submodule, a nested one or a
 * directory it makes into one without a .git: a .git at any depth, a .gitmodules, a gitdir or
 * commondir file, a HEAD beside objects/ and refs/), a path has a component that stands for
 * .tentaflake-worker, .claude, .codex or .mcp.json (always: the control directory, and a harness's
 * settings, whose hooks, MCP servers and shell prefix run on the host; names folded as
 * common/name-fold.h), or any path no longer holds
 * the version the job was given (a conflict: each is named): an added path exists; a modified
 * file's or a deleted file's content (git's blob id) or x bit is not the base's; a deleted
 * directory is not a directory, or holds an entry the changeset does not delete; a path or one of its parents is a symbolic link or a special
 * file; a parent is a file. Every name is resolved below the workspace one component at a time,
 * never through a link (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, or O_NOFOLLOW).
 * A directory it writes in must be writable by this user. Then every new file is staged at the
 * workspace's root (.tfw-apply.<pid>/, O_EXCL, the changeset's mode), its bytes checked against
 * its id as they are copied from the result, fsync'ed: a failure there changes nothing. Then,
 * in this order: deleted files, deleted directories (deepest first), directories made, each
 * staged file renamed over its path (atomic for each file; a failure half-way, which no check
 * foresaw, says how many changes were applied).
 * dry_run: only say what would be done. diff: a unified diff of each file (the system's
 * `diff -u`), with or without dry_run. Returns 0, or a negative errno with e filled (code
 * "conflict" when the workspace moved on). */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "common/error.h"

typedef struct ApplyOptions {
        const char *workspace; /* NULL: found as submit finds it */
        const char *results;   /* NULL: from worker.json */
        const char *id;
        bool dry_run, diff, allow_git;
} ApplyOptions;

int controller_apply(const ApplyOptions *o, FILE *out, FILE *err, TfwError *e);
