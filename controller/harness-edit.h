/* SPDX-License-Identifier: MIT */
/* What `harness` (controller/harness.h) puts into, and takes out of, each settings file: pure
 * functions from the file's bytes (NULL: no file) to its new bytes (caller frees; NUL-ended).
 * The JSON files are merged with jansson, every other key kept, written with two-space indents
 * and a final newline. The TOML file gets one block of its own between marker lines; it is not
 * parsed beyond finding lines that would clash with the block. -EBADMSG with e set for a file
 * these refuse to touch (not a JSON object, a key of the wrong type, a TOML file that sets
 * [features] or the server itself). */
#pragma once

#include <stddef.h>

#include "common/error.h"

typedef int (*HarnessEdit)(const char *cur, size_t n, const char *arg, char **ret, TfwError *e);

/* .mcp.json: mcpServers."tentaflake-worker" = {type: stdio, command: exe, args: ["mcp"]}. */
int harness_mcp_json_set(const char *cur, size_t n, const char *exe, char **ret, TfwError *e);
int harness_mcp_json_unset(const char *cur, size_t n, const char *exe, char **ret, TfwError *e);
/* .claude/settings.json: env.CLAUDE_CODE_SHELL_PREFIX = prefix, "tentaflake-worker" in
 * enabledMcpjsonServers. Unset takes the prefix out only when it is this one. */
int harness_settings_set(const char *cur, size_t n, const char *prefix, char **ret, TfwError *e);
int harness_settings_unset(const char *cur, size_t n, const char *prefix, char **ret, TfwError *e);
/* .codex/config.toml: the block, appended (an old one replaced). */
int harness_codex_set(const char *cur, size_t n, const char *exe, char **ret, TfwError *e);
int harness_codex_unset(const char *cur, size_t n, const char *exe, char **ret, TfwError *e);

#define HARNESS_CODEX_BEGIN "# >>> tentaflake-worker harness codex (tentaflake-worker harness codex --remove takes it out)\n"
#define HARNESS_CODEX_END "# <<< tentaflake-worker harness codex\n"
