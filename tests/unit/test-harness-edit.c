/* SPDX-License-Identifier: MIT */
/* What `harness` writes into a harness's settings and takes out again
 * (controller/harness-edit.h; issue 50): other keys kept, a file it cannot read refused. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "controller/harness-edit.h"

/* arg: the program for the MCP server and the prefix alike. */
static char *edit(HarnessEdit f, const char *cur, const char *arg, int want) {
        TfwError e = {};
        char *out = NULL;
        HarnessArgs a = {.exe = arg, .prefix = arg};
        assert_int_equal(f(cur, cur ? strlen(cur) : 0, &a, &out, &e), want);
        return out;
}

static json_t *parsed(const char *s) {
        json_t *j = json_loads(s, 0, NULL);
        assert_non_null(j);
        return j;
}

static void test_mcp_json(void **state) {
        (void) state;
        char *a = edit(harness_mcp_json_set, "{\"x\": 1, \"mcpServers\": {\"other\": {\"command\": \"y\"}}}", "/bin/tfw", 0);
        json_t *j = parsed(a);
        assert_int_equal(json_integer_value(json_object_get(j, "x")), 1);
        json_t *s = json_object_get(json_object_get(j, "mcpServers"), "tentaflake-worker");
        assert_string_equal(json_string_value(json_object_get(s, "command")), "/bin/tfw");
        assert_string_equal(json_string_value(json_array_get(json_object_get(s, "args"), 0)), "mcp");
        assert_string_equal(json_string_value(json_object_get(s, "type")), "stdio");
        assert_non_null(json_object_get(json_object_get(j, "mcpServers"), "other"));
        json_decref(j);
        char *b = edit(harness_mcp_json_unset, a, "/bin/tfw", 0);
        j = parsed(b);
        assert_null(json_object_get(json_object_get(j, "mcpServers"), "tentaflake-worker"));
        assert_non_null(json_object_get(json_object_get(j, "mcpServers"), "other"));
        json_decref(j);
        free(a);
        free(b);
        /* no file: made; taken out again: an empty object */
        a = edit(harness_mcp_json_set, NULL, "/bin/tfw", 0);
        b = edit(harness_mcp_json_unset, a, "/bin/tfw", 0);
        assert_string_equal(b, "{}\n");
        free(a);
        free(b);
}

static void test_refused(void **state) {
        (void) state;
        assert_null(edit(harness_mcp_json_set, "[1]", "/bin/tfw", -EBADMSG));
        assert_null(edit(harness_mcp_json_set, "{\"mcpServers\": 3}", "/bin/tfw", -EBADMSG));
        assert_null(edit(harness_mcp_json_set, "{\"a\": 1, \"a\": 2}", "/bin/tfw", -EBADMSG));
        assert_null(edit(harness_settings_set, "{", "/p", -EBADMSG));
        assert_null(edit(harness_settings_set, "{\"env\": []}", "/p", -EBADMSG));
        assert_null(edit(harness_settings_set, "{\"enabledMcpjsonServers\": {}}", "/p", -EBADMSG));
}

static void test_settings(void **state) {
        (void) state;
        const char *cur = "{\"model\": \"m\", \"env\": {\"A\": \"1\"}, \"enabledMcpjsonServers\": [\"other\"], "
                          "\"permissions\": {\"deny\": [\"Bash(rm:*)\"]}}";
        char *a = edit(harness_settings_set, cur, "/usr/bin/tentaflake-worker-shell", 0);
        json_t *j = parsed(a);
        json_t *env = json_object_get(j, "env");
        assert_string_equal(json_string_value(json_object_get(env, "CLAUDE_CODE_SHELL_PREFIX")),
                            "/usr/bin/tentaflake-worker-shell");
        assert_string_equal(json_string_value(json_object_get(env, "A")), "1");
        assert_string_equal(json_string_value(json_object_get(env, "TENTAFLAKE_SHELL_APPLY")), "auto");
        assert_int_equal(json_array_size(json_object_get(j, "enabledMcpjsonServers")), 2);
        /* the file tools' deny rules, after the user's own */
        json_t *deny = json_object_get(json_object_get(j, "permissions"), "deny");
        assert_string_equal(json_string_value(json_array_get(deny, 0)), "Bash(rm:*)");
        static const char *const rules[] = {HARNESS_DENY_RULES};
        assert_int_equal(json_array_size(deny), 1 + sizeof(rules) / sizeof(*rules));
        for (size_t i = 0; i < sizeof(rules) / sizeof(*rules); i++)
                assert_string_equal(json_string_value(json_array_get(deny, i + 1)), rules[i]);
        assert_string_equal(rules[0], "Edit(/.claude/settings.json)");
        json_decref(j);
        char *again = edit(harness_settings_set, a, "/usr/bin/tentaflake-worker-shell", 0);
        assert_string_equal(again, a); /* set twice: listed once */
        char *b = edit(harness_settings_unset, a, "/usr/bin/tentaflake-worker-shell", 0);
        j = parsed(b);
        assert_null(json_object_get(json_object_get(j, "env"), "CLAUDE_CODE_SHELL_PREFIX"));
        assert_string_equal(json_string_value(json_object_get(json_object_get(j, "env"), "A")), "1");
        assert_null(json_object_get(json_object_get(j, "env"), "TENTAFLAKE_SHELL_APPLY"));
        assert_int_equal(json_array_size(json_object_get(j, "enabledMcpjsonServers")), 1);
        json_t *left = json_object_get(json_object_get(j, "permissions"), "deny");
        assert_int_equal(json_array_size(left), 1); /* the user's rule stays */
        assert_string_equal(json_string_value(json_array_get(left, 0)), "Bash(rm:*)");
        json_decref(j);
        /* review; and a file without permissions gets none left behind */
        HarnessArgs r = {.exe = "/bin/tfw", .prefix = "/usr/bin/tentaflake-worker-shell", .review = true};
        TfwError e = {};
        char *d = NULL, *d2 = NULL;
        assert_int_equal(harness_settings_set("{}", 2, &r, &d, &e), 0);
        j = parsed(d);
        assert_string_equal(json_string_value(json_object_get(json_object_get(j, "env"), "TENTAFLAKE_SHELL_APPLY")), "review");
        json_decref(j);
        assert_int_equal(harness_settings_unset(d, strlen(d), &r, &d2, &e), 0);
        assert_string_equal(d2, "{}\n");
        free(d);
        free(d2);
        assert_null(edit(harness_settings_set, "{\"permissions\": []}", "/p", -EBADMSG));
        assert_null(edit(harness_settings_set, "{\"permissions\": {\"deny\": {}}}", "/p", -EBADMSG));
        /* a prefix someone else set is not taken out */
        char *c = edit(harness_settings_unset, "{\"env\": {\"CLAUDE_CODE_SHELL_PREFIX\": \"/other\"}}", "/mine", 0);
        assert_non_null(strstr(c, "/other"));
        free(a);
        free(again);
        free(b);
        free(c);
}

static void test_codex(void **state) {
        (void) state;
        const char *cur = "model = \"x\"\n\n[mcp_servers.other]\ncommand = \"y\"\n";
        char *a = edit(harness_codex_set, cur, "/bin/tfw", 0);
        assert_memory_equal(a, cur, strlen(cur));
        assert_non_null(strstr(a, HARNESS_CODEX_BEGIN "[features]\nshell_tool = false\n\n[mcp_servers.tentaflake-worker]\n"
                                  "command = '/bin/tfw'\nargs = [\"mcp\"]\n" HARNESS_CODEX_END));
        char *again = edit(harness_codex_set, a, "/bin/tfw", 0);
        assert_string_equal(again, a); /* its old block replaced, not doubled */
        char *b = edit(harness_codex_unset, a, "/bin/tfw", 0);
        assert_string_equal(b, cur);
        free(a);
        free(again);
        free(b);
        /* a file that sets what the block sets: refused, not parsed */
        assert_null(edit(harness_codex_set, "[features]\nweb_search = true\n", "/bin/tfw", -EBADMSG));
        assert_null(edit(harness_codex_set, "features.shell_tool = true\n", "/bin/tfw", -EBADMSG));
        assert_null(edit(harness_codex_set, " [ mcp_servers.tentaflake-worker ]\n", "/bin/tfw", -EBADMSG));
        assert_null(edit(harness_codex_set, NULL, "/bin/it's", -EINVAL));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_mcp_json), cmocka_unit_test(test_refused), cmocka_unit_test(test_settings),
                cmocka_unit_test(test_codex),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
