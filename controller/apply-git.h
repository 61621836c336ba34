/* SPDX-License-Identifier: MIT */
/* The git rules of `apply` (controller/apply.h; docs/controller.md, "Changes"; issue 46 item
 * 1): a job's changeset must not leave behind anything that the controller's own git would take
 * for a repository, or a link to one, and then run (a hook, core.fsmonitor, core.pager,
 * core.sshCommand...). Every name is compared as a folding file system takes it
 * (common/name-fold.h): ".GIT", ".git. ", "GIT~1" count as ".git".
 *
 * apply_path_is_control(): a component of path stands for .tentaflake-worker. Always refused,
 * --allow-git or not.
 * apply_git_refuses_change(): the rules on one change alone; prints the rule and the path on
 * err ("apply: refused: 'PATH': ...") and returns true when it refuses it: a component standing
 * for .git (a repository's own files, or a gitdir: pointer) or for .gitmodules (where git
 * fetches submodules from), whatever the kind of change; a file written named gitdir or
 * commondir (git's pointers from one repository directory to another).
 * apply_git_repositories(): the rule on the whole changeset: after it, would git take a
 * directory in or above a change for a repository (git's is_git_directory: a HEAD beside both
 * objects and refs, or beside a commondir; any kind of entry counts, of any content), counting
 * what the workspace holds now (looked at below ws_fd, one component at a time, never through
 * a link; by the exact names, so that the workspace's file system folds as git's lookups do)
 * and what the changeset adds, folded, less what it deletes. Each such directory is named on
 * err; a change to its config, its hooks or anything in it is refused with it. Changes that
 * apply_git_refuses_change() or apply_path_is_control() refuse already are left out. Returns
 * how many directories it refused, or a negative errno (-ENOMEM). Nothing is written. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "parser/changes-manifest.h"

bool apply_path_is_control(const char *path);
bool apply_git_refuses_change(const ChangeEntry *c, FILE *err);
int apply_git_repositories(int ws_fd, const ChangesManifest *m, FILE *err);
