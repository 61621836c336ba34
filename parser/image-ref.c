/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "parser/image-ref.h"

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_lower_hex(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

/* "sha256:" and exactly 64 lowercase hex digits. */
static bool digest_is_valid(const char *s) {
        return strncmp(s, "sha256:", 7) == 0 && strlen(s + 7) == 64 && is_lower_hex(s + 7, 64);
}

static bool name_is_valid(const char *s, size_t n) {
        size_t start = 0;

        if (n == 0 || n > IMAGE_NAME_MAX)
                return false;
        for (size_t i = 0; i <= n; i++) {
                if (i < n && s[i] != '/') {
                        if (!is_lower_alnum(s[i]) && !strchr("._:-", s[i]))
                                return false;
                        continue;
                }
                if (i == start || !is_lower_alnum(s[start]) || !is_lower_alnum(s[i - 1]))
                        return false;
                start = i + 1;
        }
        return true;
}

bool image_ref_is_pinned(const char *s) {
        const char *at;

        if (!s)
                return false;
        at = strchr(s, '@');
        if (!at)
                return digest_is_valid(s);
        return name_is_valid(s, (size_t) (at - s)) && digest_is_valid(at + 1);
}
