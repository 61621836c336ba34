/* SPDX-License-Identifier: MIT */
/* The strings a harness hands `shell` (controller/shell-string.h; issue 50), in the exact shapes
 * @anthropic-ai/claude-code 2.1.197 builds under CLAUDE_CODE_SHELL_PREFIX. */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/shell-string.h"

/* Its Bash tool's string: the snapshot, extglob off, eval of the command, pwd -P into the cwd
 * file (buildExecCommand, joined with " && "). */
#define SNAP "source /home/u/.claude/shell-snapshots/snapshot-bash-1765100000000-abc123.sh 2>/dev/null || true"
#define GLOB "{ shopt -u extglob || setopt NO_EXTENDED_GLOB NO_BARE_GLOB_QUAL; } >/dev/null 2>&1 || true"
#define BODY SNAP " && " GLOB " && eval 'cd sub && echo '\"'\"'hi'\"'\"' | wc -c' < /dev/null"

static void test_claude_bash_string(void **state) {
        (void) state;
        char *body = NULL, *file = NULL;
        assert_int_equal(shell_claude_bash_split(BODY " && pwd -P >| /tmp/claude-0f3a-cwd", NULL, &body, &file), 0);
        assert_string_equal(body, BODY);
        assert_string_equal(file, "/tmp/claude-0f3a-cwd");
        free(body);
        free(file);
        /* without a snapshot (its creation failed), and a quoted CLAUDE_CODE_TMPDIR */
        assert_int_equal(shell_claude_bash_split(GLOB " && eval ls && pwd -P >| '/run/my tmp/claude-ffff-cwd'",
                                                 "/run/my tmp", &body, &file), 0);
        assert_string_equal(body, GLOB " && eval ls");
        assert_string_equal(file, "/run/my tmp/claude-ffff-cwd");
        free(body);
        free(file);
}

/* Anything else runs whole in the capsule: no host file is named. */
static void test_not_claude_shape(void **state) {
        (void) state;
        char *body = NULL, *file = NULL;
        const char *no[] = {
                "echo hook-ran; exit 2",                                     /* a hook */
                "/usr/bin/tentaflake-worker mcp",                            /* an MCP start */
                BODY " && pwd -P >| /tmp/claude-0f3a-cwd; rm -rf x",         /* something after */
                BODY " && pwd -P >| /etc/claude-0f3a-cwd",                   /* another directory */
                BODY " && pwd -P >| /tmp/../etc/claude-0f3a-cwd",            /* not normalised */
                BODY " && pwd -P >| /tmp/claude-0F3A-cwd",                   /* not its id */
                BODY " && pwd -P >| /tmp/claude-0f3a5-cwd",                  /* nor this */
                BODY " && pwd -P >| /tmp/.bashrc",                           /* nor this */
                BODY " && pwd -P >| \"/tmp/claude-0f3a-cwd\"",               /* not its quoting */
                BODY " && pwd -P >| '/tmp/claude-0f3a-cwd",                  /* unterminated */
                "cd x && pwd -P >| /tmp/claude-0f3a-cwd",                    /* no eval */
                "",
        };
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
                assert_int_equal(shell_claude_bash_split(no[i], NULL, &body, &file), -ENOMSG);
        /* a tmpdir given only widens to exactly that directory */
        assert_int_equal(shell_claude_bash_split(BODY " && pwd -P >| /var/tmp/claude-0f3a-cwd", "/var", &body, &file),
                         -ENOMSG);
        assert_int_equal(shell_claude_bash_split(BODY " && pwd -P >| /claude-0f3a-cwd", "/", &body, &file), -ENOMSG);
}

/* An MCP start: Qa([command, ...args]) */
static void test_words(void **state) {
        (void) state;
        char **w = NULL;
        size_t n = 0;
        assert_int_equal(shell_words_parse("/usr/bin/x mcp '' 'a b' ''\"'\"'q'\"'\"''", &w, &n), 0);
        assert_int_equal(n, 5);
        assert_string_equal(w[0], "/usr/bin/x");
        assert_string_equal(w[2], "");
        assert_string_equal(w[3], "a b");
        assert_string_equal(w[4], "'q'");
        assert_null(w[5]);
        shell_words_free(w);
        const char *bad[] = {"a  b", " a", "a ", "a;b", "\"a\"", "'a", "a\\ b", "$(x)", "a'b'", ""};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(shell_words_parse(bad[i], &w, &n), -EBADMSG);
}

static void test_own_mcp(void **state) {
        (void) state;
        assert_true(shell_is_own_mcp("/opt/tfw/bin/tentaflake-worker mcp", "/opt/tfw/bin/tentaflake-worker"));
        assert_true(shell_is_own_mcp("'/my dir/tentaflake-worker' mcp", "/my dir/tentaflake-worker"));
        assert_false(shell_is_own_mcp("/opt/tfw/bin/tentaflake-worker mcp --results /x", "/opt/tfw/bin/tentaflake-worker"));
        assert_false(shell_is_own_mcp("/opt/tfw/bin/tentaflake-worker mcp; sh", "/opt/tfw/bin/tentaflake-worker"));
        assert_false(shell_is_own_mcp("/opt/tfw/bin/tentaflake-worker submit", "/opt/tfw/bin/tentaflake-worker"));
        assert_false(shell_is_own_mcp("tentaflake-worker mcp", "/opt/tfw/bin/tentaflake-worker"));
        assert_false(shell_is_own_mcp("/opt/tfw/bin/tentaflake-worker mcp", NULL));
}

static void test_cwd_record(void **state) {
        (void) state;
        char *rel = NULL;
        assert_int_equal(shell_cwd_record_parse("/work\n", 6, &rel), 0);
        assert_string_equal(rel, "");
        free(rel);
        assert_int_equal(shell_cwd_record_parse("/work/a/b\n", 10, &rel), 0);
        assert_string_equal(rel, "a/b");
        free(rel);
        const char *bad[] = {"/tmp\n", "/workx\n", "/work/\n", "/work/../etc\n", "/work/a//b\n", "/work/a\n\n",
                             "/work/a", "/work/a\nb\n", "work/a\n"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(shell_cwd_record_parse(bad[i], strlen(bad[i]), &rel), -EBADMSG);
        assert_int_equal(shell_cwd_record_parse("/work/a\0b\n", 10, &rel), -EBADMSG);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_claude_bash_string), cmocka_unit_test(test_not_claude_shape),
                cmocka_unit_test(test_words), cmocka_unit_test(test_own_mcp), cmocka_unit_test(test_cwd_record),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
