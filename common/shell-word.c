/* SPDX-License-Identifier: MIT */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/shell-word.h"

char *shell_word(const char *s) {
        bool plain = *s != 0;
        for (const char *p = s; *p; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@", *p))
                        plain = false;
        if (plain)
                return strdup(s);
        size_t n = 3;
        for (const char *p = s; *p; p++)
                n += *p == '\'' ? 4 : 1;
        char *q = malloc(n), *o = q;
        if (!q)
                return NULL;
        *o++ = '\'';
        for (const char *p = s; *p; p++) {
                if (*p == '\'') {
                        memcpy(o, "'\\''", 4);
                        o += 4;
                } else
                        *o++ = *p;
        }
        *o++ = '\'';
        *o = 0;
        return q;
}
