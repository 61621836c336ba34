/* SPDX-License-Identifier: MIT */
/* The strings a harness hands its shell prefix (`shell -c STRING`; docs/controller.md, "Make
 * the worker the agent's only shell"), read narrowly. Pure: no file is touched here.
 *
 * Claude Code (@anthropic-ai/claude-code 2.1.197) runs, with CLAUDE_CODE_SHELL_PREFIX set, each
 * Bash tool call as PREFIX 'STRING' where STRING is
 *   [source SNAPSHOT 2>/dev/null || true && ]{ shopt -u extglob || setopt ...; } >/dev/null 2>&1
 *   || true && eval 'COMMAND' [< /dev/null] && pwd -P >| TMPDIR/claude-XXXX-cwd
 * (XXXX four hex digits, TMPDIR its CLAUDE_CODE_TMPDIR or os.tmpdir()); each shell-form hook
 * as PREFIX 'HOOK'; each stdio MCP server as PREFIX 'COMMAND ARG...', the argv quoted into one
 * word by its quoting function: a word of [A-Za-z0-9_./:=@+,-] stays as it is, '' is the empty
 * word, any other is put in '...' with each ' written as '"'"'. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The record the front end's rewritten string leaves in the capsule: the directory the job
 * ended in, as `pwd -P` prints it, in /work/artifacts/ so that it leaves as an artifact. */
#define SHELL_CWD_ARTIFACT ".tentaflake-worker-shell-cwd"
#define SHELL_CWD_RECORD_MAX 4096
#define SHELL_WORDS_MAX 256

/* Split Claude Code's Bash-tool string: 0 with *ret_body the string without its trailing
 * " && pwd -P >| WORD" and *ret_cwd_file the path WORD names (caller frees both), when the
 * string ends with exactly that, WORD is one word in the quoting above naming
 * DIR/claude-XXXX-cwd (XXXX four lowercase hex digits; DIR "/tmp", or tmpdir when given: an
 * absolute, normalised path) and the body holds Claude's "eval ". -ENOMSG for anything else (a
 * hook, an MCP start, a person's command, a path of another shape): that string runs whole in
 * the capsule, and no file of the host is ever written for it. */
int shell_claude_bash_split(const char *s, const char *tmpdir, char **ret_body, char **ret_cwd_file);

/* The words of s in the quoting above (one space between words, nothing else): 0 with *ret a
 * NULL-terminated array (free with shell_words_free) and *ret_n; -EBADMSG for anything the
 * quoting function could not have written; -E2BIG over SHELL_WORDS_MAX words. */
int shell_words_parse(const char *s, char ***ret, size_t *ret_n);
void shell_words_free(char **w);

/* Is s, read as words, exactly the argv { exe, "mcp" }? (The worker's own MCP server, which
 * passes through the prefix unwrapped: nothing else does.) */
bool shell_is_own_mcp(const char *s, const char *exe);

/* The record's content, "/work" or "/work/REL" and one newline (REL a normalised relative
 * path): 0 with *ret_rel REL ("" for /work; caller frees); -EBADMSG for anything else. */
int shell_cwd_record_parse(const char *s, size_t n, char **ret_rel);
