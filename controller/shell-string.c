/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/path-util.h"
#include "controller/shell-string.h"

#define SAFE_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=@+,-"
#define CWD_TAIL " && pwd -P >| "

/* One word at *p in Claude's quoting, appended to out (room for strlen(*p) bytes + NUL); *p
 * moves past it. -EBADMSG when the word is not one its quoting function writes. */
static int word_take(const char **p, char *out) {
        const char *s = *p;
        size_t n = 0;
        if (*s != '\'') {
                n = strspn(s, SAFE_CHARS);
                if (n == 0)
                        return -EBADMSG;
                memcpy(out, s, n);
                out[n] = 0;
                *p = s + n;
                return 0;
        }
        /* '...' ("'" '...')*: a quote inside is closed, given in double quotes, reopened. */
        for (;;) {
                const char *end = strchr(s + 1, '\'');
                if (!end)
                        return -EBADMSG;
                memcpy(out + n, s + 1, (size_t) (end - s - 1));
                n += (size_t) (end - s - 1);
                s = end + 1;
                if (strncmp(s, "\"'\"'", 4) != 0)
                        break;
                out[n++] = '\'';
                s += 3;
        }
        out[n] = 0;
        *p = s;
        return 0;
}

void shell_words_free(char **w) {
        for (size_t i = 0; w && w[i]; i++)
                free(w[i]);
        free(w);
}

int shell_words_parse(const char *s, char ***ret, size_t *ret_n) {
        size_t cap = strlen(s) + 1, n = 0;
        char **w = calloc(SHELL_WORDS_MAX + 1, sizeof(char *));
        if (!w)
                return -ENOMEM;
        for (const char *p = s; *p;) {
                if (n == SHELL_WORDS_MAX) {
                        shell_words_free(w);
                        return -E2BIG;
                }
                int r = -ENOMEM;
                if (!(w[n] = malloc(cap)) || (r = word_take(&p, w[n])) < 0 || (*p && *p++ != ' ') || (!*p && p[-1] == ' ')) {
                        shell_words_free(w);
                        return r < 0 ? r : -EBADMSG;
                }
                n++;
        }
        if (n == 0) {
                shell_words_free(w);
                return -EBADMSG;
        }
        *ret = w;
        *ret_n = n;
        return 0;
}

bool shell_is_own_mcp(const char *s, const char *exe) {
        char **w = NULL;
        size_t n = 0;
        if (!exe || shell_words_parse(s, &w, &n) < 0)
                return false;
        bool own = n == 2 && streq(w[0], exe) && streq(w[1], "mcp");
        shell_words_free(w);
        return own;
}

/* DIR/claude-XXXX-cwd, DIR "/tmp" or tmpdir. */
static bool cwd_file_ok(const char *path, const char *tmpdir) {
        const char *slash = strrchr(path, '/');
        if (!slash)
                return false;
        size_t dir_len = (size_t) (slash - path);
        bool dir_ok = (dir_len == 4 && strncmp(path, "/tmp", 4) == 0) ||
                      (tmpdir && path_is_absolute_normalized(tmpdir) && !streq(tmpdir, "/") && strlen(tmpdir) == dir_len &&
                       strncmp(path, tmpdir, dir_len) == 0);
        const char *name = slash + 1;
        return dir_ok && strlen(name) == strlen("claude-XXXX-cwd") && strncmp(name, "claude-", 7) == 0 &&
               strspn(name + 7, "0123456789abcdef") == 4 && streq(name + 11, "-cwd");
}

int shell_claude_bash_split(const char *s, const char *tmpdir, char **ret_body, char **ret_cwd_file) {
        /* The tail is Claude's: the model's command is inside eval's quotes, before it. The last
         * CWD_TAIL is the one that ends the string, if any does. */
        const char *tail = NULL;
        for (const char *p = strstr(s, CWD_TAIL); p; p = strstr(p + 1, CWD_TAIL))
                tail = p;
        if (!tail)
                return -ENOMSG;
        const char *word = tail + strlen(CWD_TAIL), *p = word;
        _cleanup_free_ char *path = malloc(strlen(word) + 1), *body = NULL;
        if (!path)
                return -ENOMEM;
        /* Anything else is not Claude's string: it runs whole in the capsule, where its own
         * redirections reach only the capsule's files. */
        if (word_take(&p, path) < 0 || *p || !cwd_file_ok(path, tmpdir))
                return -ENOMSG;
        body = strndup(s, (size_t) (tail - s));
        if (!body)
                return -ENOMEM;
        if (!strstr(body, "eval "))
                return -ENOMSG;
        *ret_body = TAKE_PTR(body);
        *ret_cwd_file = TAKE_PTR(path);
        return 0;
}

int shell_cwd_record_parse(const char *s, size_t n, char **ret_rel) {
        if (n < 6 || n > SHELL_CWD_RECORD_MAX || s[n - 1] != '\n' || memchr(s, 0, n) || memchr(s, '\n', n - 1) ||
            strncmp(s, "/work", 5) != 0)
                return -EBADMSG;
        _cleanup_free_ char *rel = NULL;
        if (n == 6)
                rel = strdup("");
        else if (s[5] == '/')
                rel = strndup(s + 6, n - 7);
        else
                return -EBADMSG;
        if (!rel)
                return -ENOMEM;
        if (n > 6 && !path_is_relative_normalized(rel))
                return -EBADMSG;
        *ret_rel = TAKE_PTR(rel);
        return 0;
}
