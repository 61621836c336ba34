/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "macro.h"
#include "path-util.h"
#include "term-escape.h"

bool path_is_absolute_normalized(const char *p) {
        size_t len;

        if (!p || p[0] != '/')
                return false;
        len = strlen(p);
        if (len >= PATH_MAX)
                return false;
        if (len == 1)
                return true;
        if (p[len - 1] == '/')
                return false;
        for (const char *c = p; *c; c++)
                if ((unsigned char) *c < 0x20 || *c == 0x7f)
                        return false;
        /* Walk components: each must be non-empty and not "." or "..". */
        for (const char *s = p + 1;;) {
                const char *slash = strchr(s, '/');
                size_t n = slash ? (size_t) (slash - s) : strlen(s);
                if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
                        return false;
                if (!slash)
                        return true;
                s = slash + 1;
        }
}

bool path_is_below_or_equal(const char *child, const char *parent) {
        size_t n = strlen(parent);

        if (streq(parent, "/"))
                return true;
        return strncmp(child, parent, n) == 0 && (child[n] == 0 || child[n] == '/');
}

bool filename_is_valid(const char *name) {
        size_t n;

        if (!name)
                return false;
        n = strlen(name);
        if (n == 0 || n > NAME_MAX || strchr(name, '/'))
                return false;
        return !streq(name, ".") && !streq(name, "..");
}

int path_join_buf(char *buf, size_t size, const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        if (la + 1 + lb + 1 > size)
                return -ENAMETOOLONG;
        memcpy(buf, a, la);
        buf[la] = '/';
        memcpy(buf + la + 1, b, lb + 1);
        return 0;
}

/* One line of ASCII, the quote and backslash escaped too: the one escaper (term-escape.h). */
const char *printable_name(const char *s, char *out, size_t out_size) {
        return term_escape(s, strlen(s), TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII, out, out_size);
}

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. Names end up in
 * JSON (attestations, listings), which only carries valid UTF-8. */
bool utf8_is_valid(const unsigned char *s, size_t len) {
        for (size_t i = 0; i < len;) {
                unsigned char c = s[i];
                size_t n;
                uint32_t cp;

                if (c < 0x80) {
                        i++;
                        continue;
                } else if ((c & 0xe0) == 0xc0) {
                        n = 2;
                        cp = c & 0x1f;
                } else if ((c & 0xf0) == 0xe0) {
                        n = 3;
                        cp = c & 0x0f;
                } else if ((c & 0xf8) == 0xf0) {
                        n = 4;
                        cp = c & 0x07;
                } else
                        return false;
                if (len - i < n)
                        return false;
                for (size_t k = 1; k < n; k++) {
                        if ((s[i + k] & 0xc0) != 0x80)
                                return false;
                        cp = (cp << 6) | (s[i + k] & 0x3f);
                }
                if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
                    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                        return false;
                i += n;
        }
        return true;
}

static int hexval(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int path_unescape(const char *s, size_t n, char *out, size_t size) {
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) s[i];
                if (o + 1 >= size)
                        return -ENAMETOOLONG;
                if (c == '\\') {
                        if (i + 3 >= n || s[i + 1] != 'x' || hexval(s[i + 2]) < 0 || hexval(s[i + 3]) < 0)
                                return -EINVAL;
                        out[o++] = (char) (hexval(s[i + 2]) * 16 + hexval(s[i + 3]));
                        i += 3;
                } else if ((c > 0x20 && c < 0x7f) || c >= 0x80)
                        out[o++] = (char) c;
                else
                        return -EINVAL;
        }
        out[o] = 0;
        return memchr(out, 0, o) ? -EINVAL : (int) o;
}

bool path_is_relative_normalized(const char *p) {
        if (!p || !*p || p[0] == '/')
                return false;
        for (const char *c = p;;) {
                size_t k = strcspn(c, "/");
                if (k == 0 || k > 255 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                if (!c[k])
                        return true;
                c += k + 1;
        }
}
