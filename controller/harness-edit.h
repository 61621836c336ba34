/* SPDX-License-Identifier: MIT */
/* What `harness` (controller/harness.h) puts into, and takes out of, each settings file: pure
 * functions from the file's bytes (NULL: no file) to its new bytes (caller frees; NUL-ended).
 * The JSON files are merged with jansson, every other key kept, written with two-space indents
 * and a final newline. The TOML file gets one block of its own between marker lines; it is not
 * parsed beyond finding lines that would clash with the block. -EBADMSG with e set for a file
 * these refuse to touch (not a JSON object, a key of the wrong type, a TOML file that sets
 * [features] or the server itself). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

typedef struct HarnessArgs {
        const char *exe;    /* this program's absolute path, for the MCP server */
        const char *prefix; /* the shell prefix's program (controller/harness-prefix.h) */
        bool review;        /* the prefix's apply mode: review, not auto */
} HarnessArgs;

typedef int (*HarnessEdit)(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e);

/* .mcp.json: mcpServers."tentaflake-worker" = {type: stdio, command: exe, args: ["mcp"]}. */
int harness_mcp_json_set(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e);
int harness_mcp_json_unset(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e);
/* .claude/settings.json: env.CLAUDE_CODE_SHELL_PREFIX = prefix, env.TENTAFLAKE_SHELL_APPLY =
 * auto|review, "tentaflake-worker" in enabledMcpjsonServers, and HARNESS_DENY_RULES in
 * permissions.deny: Claude Code's file tools (every tool that edits a file is held to Edit
 * rules) may not change the harness's settings nor its state; "/x" in a project's rule is x
 * below the project's directory (read from @anthropic-ai/claude-code 2.1.197). Unset takes the
 * prefix out only when it is one harness writes (named tentaflake-worker-shell, or the script
 * of earlier versions), the apply mode with it, and the rules it added. */
int harness_settings_set(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e);
int harness_settings_unset(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e);
/* .codex/config.toml: the block, appended (an old one replaced). */
int harness_codex_set(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e);
int harness_codex_unset(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e);

/* Claude Code's deny rules harness adds: the settings that choose what runs on the host (a
 * local settings file overrides the project's env), and the control directory's harness
 * state and discovery file. The inbox stays writable: it is the agent's way to ask. */
#define HARNESS_DENY_RULES                                                                                   \
        "Edit(/.claude/settings.json)", "Edit(/.claude/settings.local.json)", "Edit(/.mcp.json)",           \
                "Edit(/.tentaflake-worker/harness/**)", "Edit(/.tentaflake-worker/worker.json)"

#define HARNESS_CODEX_BEGIN "# >>> tentaflake-worker harness codex (tentaflake-worker harness codex --remove takes it out)\n"
#define HARNESS_CODEX_END "# <<< tentaflake-worker harness codex\n"
