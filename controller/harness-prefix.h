/* SPDX-License-Identifier: MIT */
/* The program `harness claude-code` names as Claude Code's shell prefix (issue 50; docs/
 * controller.md, "Make the worker the agent's only shell"; docs/threats.md row 14).
 *
 * The prefix runs every Bash command, hook and MCP server start of the agent on the host, so
 * whoever can change it has the host: the agent's own file tools (Edit, Write), which run on the
 * host as the controller, must not be able to. The prefix is therefore a fixed program,
 * `tentaflake-worker-shell` (a link to the binary that `make install` and the package put beside
 * it; cli/main.c runs it as `shell`, its apply mode from TENTAFLAKE_SHELL_APPLY), and only one
 * that nobody but root can change is accepted: the directory it is in and each above it owned
 * by root and writable by nobody else (common/root-dir.h's rule, a sticky bit does not save a
 * world-writable one), the name itself root's; when it is a symbolic link, the program it leads
 * to (its real path) checked the same way and a regular file of root's that nobody else can
 * write. A build run from a directory of the controller's has no such program: harness refuses,
 * with a message that says why, rather than writing a prefix the agent could rewrite. */
#pragma once

#include "common/error.h"

#define HARNESS_PREFIX_NAME "tentaflake-worker-shell"
#define HARNESS_APPLY_VAR "TENTAFLAKE_SHELL_APPLY"

/* path (absolute; NULL: HARNESS_PREFIX_NAME beside exe) checked as above: 0 with *ret the path
 * to write (its directory's real path and the name), or a negative errno with e set. */
int harness_prefix_program(const char *path, const char *exe, char **ret, TfwError *e);
