/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-util.h"
#include "common/macro.h"
#include "controller/harness-edit.h"
#include "controller/harness-prefix.h"
#include "controller/harness.h"

#define PREFIX_VAR "CLAUDE_CODE_SHELL_PREFIX"

/* The file as a JSON object ({} for no file). */
static int load_object(const char *cur, size_t n, const char *what, json_t **ret, TfwError *e) {
        json_error_t je;
        json_t *j = cur ? json_loadb(cur, n, JSON_REJECT_DUPLICATES, &je) : json_object();
        if (!j)
                return tfw_error(e, EBADMSG, "bad_settings", "'%s' is not JSON (line %d: %s): fix it first, nothing was "
                                 "changed", what, je.line, je.text);
        if (!json_is_object(j)) {
                json_decref(j);
                return tfw_error(e, EBADMSG, "bad_settings", "'%s' is not a JSON object: nothing was changed", what);
        }
        *ret = j;
        return 0;
}

/* root[key], an object made when missing; NULL when it is something else. */
static json_t *member_object(json_t *root, const char *key) {
        json_t *v = json_object_get(root, key);
        if (!v) {
                v = json_object();
                if (!v || json_object_set_new(root, key, v) < 0)
                        return NULL;
        }
        return json_is_object(v) ? v : NULL;
}

static int dump(json_t *root, char **ret, TfwError *e) {
        _cleanup_free_ char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        char *t = NULL;
        if (!s || asprintf(&t, "%s\n", s) < 0)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        *ret = t;
        return 0;
}

int harness_mcp_json_set(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e) {
        _cleanup_json_ json_t *root = NULL;
        int r = load_object(cur, n, ".mcp.json", &root, e);
        if (r < 0)
                return r;
        json_t *servers = member_object(root, "mcpServers");
        if (!servers)
                return tfw_error(e, EBADMSG, "bad_settings", "'.mcp.json': mcpServers is not an object: nothing was changed");
        json_t *s = json_pack("{s:s, s:s, s:[s]}", "type", "stdio", "command", a->exe, "args", "mcp");
        if (!s || json_object_set_new(servers, HARNESS_SERVER_NAME, s) < 0)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        return dump(root, ret, e);
}

int harness_mcp_json_unset(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e) {
        _cleanup_json_ json_t *root = NULL;
        (void) a;
        int r = load_object(cur, n, ".mcp.json", &root, e);
        if (r < 0)
                return r;
        json_t *servers = json_object_get(root, "mcpServers");
        if (json_is_object(servers)) {
                (void) json_object_del(servers, HARNESS_SERVER_NAME);
                if (json_object_size(servers) == 0)
                        (void) json_object_del(root, "mcpServers");
        }
        return dump(root, ret, e);
}

static const char *const deny_rules[] = {HARNESS_DENY_RULES, NULL};

/* Is s in the array list (as a string)? */
static bool listed(json_t *list, const char *s) {
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v)
                if (streq_ptr(json_string_value(v), s))
                        return true;
        return false;
}

/* root[key] an array (made when missing) holding each of add once; -EBADMSG when it is not an
 * array. */
static int add_to_array(json_t *root, const char *key, const char *const *add, const char *what, TfwError *e) {
        json_t *list = json_object_get(root, key);
        if (!list && (!(list = json_array()) || json_object_set_new(root, key, list) < 0))
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        if (!json_is_array(list))
                return tfw_error(e, EBADMSG, "bad_settings", "'.claude/settings.json': %s is not an array: nothing was changed",
                                 what);
        for (; *add; add++)
                if (!listed(list, *add) && json_array_append_new(list, json_string(*add)) < 0)
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
        return 0;
}

/* root[key] without each of drop; gone when that leaves it empty. */
static void drop_from_array(json_t *root, const char *key, const char *const *drop) {
        json_t *list = json_object_get(root, key);
        for (size_t i = json_is_array(list) ? json_array_size(list) : 0; i-- > 0;)
                for (const char *const *d = drop; *d; d++)
                        if (streq_ptr(json_string_value(json_array_get(list, i)), *d)) {
                                (void) json_array_remove(list, i);
                                break;
                        }
        if (json_is_array(list) && json_array_size(list) == 0)
                (void) json_object_del(root, key);
}

int harness_settings_set(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e) {
        static const char *const servers[] = {HARNESS_SERVER_NAME, NULL};
        _cleanup_json_ json_t *root = NULL;
        int r = load_object(cur, n, ".claude/settings.json", &root, e);
        if (r < 0)
                return r;
        json_t *env = member_object(root, "env");
        if (!env)
                return tfw_error(e, EBADMSG, "bad_settings", "'.claude/settings.json': env is not an object: nothing was changed");
        json_t *perms = member_object(root, "permissions");
        if (!perms)
                return tfw_error(e, EBADMSG, "bad_settings",
                                 "'.claude/settings.json': permissions is not an object: nothing was changed");
        if (json_object_set_new(env, PREFIX_VAR, json_string(a->prefix)) < 0 ||
            json_object_set_new(env, HARNESS_APPLY_VAR, json_string(a->review ? "review" : "auto")) < 0)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        r = add_to_array(root, "enabledMcpjsonServers", servers, "enabledMcpjsonServers", e);
        if (r >= 0)
                r = add_to_array(perms, "deny", deny_rules, "permissions.deny", e);
        return r < 0 ? r : dump(root, ret, e);
}

static bool ends_in(const char *s, const char *tail) {
        size_t n = strlen(s), k = strlen(tail);
        return n >= k && streq(s + n - k, tail);
}

/* A prefix harness writes: its program, or the script earlier versions wrote. */
static bool prefix_is_ours(const char *p) {
        return p && (ends_in(p, "/" HARNESS_PREFIX_NAME) || ends_in(p, "/.tentaflake-worker/harness/claude-code-shell"));
}

int harness_settings_unset(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e) {
        static const char *const servers[] = {HARNESS_SERVER_NAME, NULL};
        _cleanup_json_ json_t *root = NULL;
        (void) a;
        int r = load_object(cur, n, ".claude/settings.json", &root, e);
        if (r < 0)
                return r;
        json_t *env = json_object_get(root, "env");
        if (json_is_object(env) && prefix_is_ours(json_string_value(json_object_get(env, PREFIX_VAR)))) {
                (void) json_object_del(env, PREFIX_VAR);
                (void) json_object_del(env, HARNESS_APPLY_VAR);
                if (json_object_size(env) == 0)
                        (void) json_object_del(root, "env");
        }
        drop_from_array(root, "enabledMcpjsonServers", servers);
        json_t *perms = json_object_get(root, "permissions");
        if (json_is_object(perms)) {
                drop_from_array(perms, "deny", deny_rules);
                if (json_object_size(perms) == 0)
                        (void) json_object_del(root, "permissions");
        }
        return dump(root, ret, e);
}

/* cur without the block (from its begin line to its end line, both whole lines). */
static char *without_block(const char *cur, size_t n) {
        const char *b = cur ? strstr(cur, HARNESS_CODEX_BEGIN) : NULL;
        const char *end = b ? strstr(b, HARNESS_CODEX_END) : NULL;
        if (!cur)
                return strdup("");
        if (!b || !end || (b != cur && b[-1] != '\n'))
                return strndup(cur, n);
        end += strlen(HARNESS_CODEX_END);
        char *s = malloc(n + 1);
        if (!s)
                return NULL;
        size_t k = (size_t) (b - cur);
        memcpy(s, cur, k);
        memcpy(s + k, end, n - (size_t) (end - cur));
        s[k + n - (size_t) (end - cur)] = 0;
        return s;
}

/* A line the block would clash with: a [features] table or key, the server's own table. */
static const char *clashing_line(const char *s) {
        for (const char *l = s; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
                const char *p = l;
                while (*p == ' ' || *p == '\t')
                        p++;
                if (*p == '[')
                        for (p++; *p == ' ' || *p == '\t' || *p == '['; p++)
                                ;
                if (strncmp(p, "features", 8) == 0 && strchr(" \t.=]", p[8]))
                        return "[features]";
                if ((strncmp(p, "mcp_servers.", 12) == 0 || strncmp(p, "mcp_servers =", 13) == 0) &&
                    strstr(p, HARNESS_SERVER_NAME) && strstr(p, HARNESS_SERVER_NAME) < (strchr(p, '\n') ?: p + strlen(p)))
                        return "[mcp_servers." HARNESS_SERVER_NAME "]";
        }
        return NULL;
}

int harness_codex_set(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e) {
        const char *exe = a->exe;
        _cleanup_free_ char *rest = without_block(cur, n);
        if (!rest)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        const char *clash = clashing_line(rest);
        if (clash)
                return tfw_error(e, EBADMSG, "bad_settings", "'.codex/config.toml' already has %s: set it there by hand "
                                 "(docs/controller.md), nothing was changed", clash);
        for (const char *p = exe; *p; p++)
                if (*p == '\'' || iscntrl((unsigned char) *p))
                        return tfw_error(e, EINVAL, "bad_path", "this program's path holds a quote or a control character: "
                                         "not written into a TOML literal string");
        size_t k = strlen(rest);
        char *s = NULL;
        if (asprintf(&s, "%s%s" HARNESS_CODEX_BEGIN "[features]\nshell_tool = false\n\n[mcp_servers." HARNESS_SERVER_NAME
                     "]\ncommand = '%s'\nargs = [\"mcp\"]\n" HARNESS_CODEX_END,
                     rest, k && rest[k - 1] != '\n' ? "\n" : "", exe) < 0)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        *ret = s;
        return 0;
}

int harness_codex_unset(const char *cur, size_t n, const HarnessArgs *a, char **ret, TfwError *e) {
        (void) a;
        char *s = without_block(cur, n);
        if (!s)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        *ret = s;
        return 0;
}
