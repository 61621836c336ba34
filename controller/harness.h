/* SPDX-License-Identifier: MIT */
/* `harness claude-code|codex` (contract section 9; docs/controller.md, "Make the worker the
 * agent's only shell"): the project settings that register `mcp` with a harness and take its
 * own shell away from the host, written (or removed) by the controller in its workspace.
 *
 * claude-code: .mcp.json gets mcpServers."tentaflake-worker" (this program, "mcp");
 * .claude/settings.json gets env.CLAUDE_CODE_SHELL_PREFIX (the program tentaflake-worker-shell,
 * which only root can change: controller/harness-prefix.h; one path, since Claude Code splits
 * its prefix at the last " -"), env.TENTAFLAKE_SHELL_APPLY (auto|review, its --apply), Claude
 * Code's deny rules for its file tools on those settings and the harness state
 * (HARNESS_DENY_RULES) and "tentaflake-worker" in enabledMcpjsonServers. codex: .codex/config.toml gets one block, between marker comments,
 * with [features] shell_tool = false (Codex has no shell prefix: its shell is switched off) and
 * [mcp_servers.tentaflake-worker]; a file that already sets either is refused, never parsed.
 *
 * JSON is merged with jansson, every other key kept. The first write keeps each file's bytes
 * (or that it did not exist) in .tentaflake-worker/harness/, with the digest of what it wrote;
 * remove puts the original back byte for byte when the file still holds what was written, and
 * otherwise takes out only its own keys (or block) and says so. Files are read and written in
 * their directory without following a link. dry_run: print each file as it would be, write
 * nothing. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "common/error.h"

typedef enum HarnessKind {
        HARNESS_CLAUDE_CODE,
        HARNESS_CODEX,
} HarnessKind;

typedef struct HarnessOptions {
        const char *workspace; /* NULL: as submit finds it */
        const char *exe;       /* this program's absolute path, for the MCP server */
        const char *prefix_program; /* --prefix-program PATH, or NULL: tentaflake-worker-shell beside exe
                                     * (controller/harness-prefix.h) */
        HarnessKind kind;
        bool review;           /* the prefix leaves changes for review (--apply review) */
        bool dry_run, remove;
} HarnessOptions;

#define HARNESS_SERVER_NAME "tentaflake-worker"
#define HARNESS_FILE_MAX (4U << 20)

int controller_harness(const HarnessOptions *o, FILE *out, TfwError *e);
