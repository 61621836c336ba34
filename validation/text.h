/* SPDX-License-Identifier: MIT */
/* Small checks on text that came from the server, shared by the claim and manifest parsers. */
#pragma once

#include <stdbool.h>
#include <string.h>

#define SHOW_MAX 64

/* s for a message: control characters as '?', at most SHOW_MAX-1 bytes ("..." when cut). */
static inline const char *text_show(const char *s, char buf[static SHOW_MAX]) {
        size_t i = 0;
        for (; s[i] && i < SHOW_MAX - 4; i++)
                buf[i] = (unsigned char) s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
        if (s[i]) {
                memcpy(buf + i, "...", 3);
                i += 3;
        }
        buf[i] = 0;
        return buf;
}

static inline bool has_control(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || *s == 0x7f)
                        return true;
        return false;
}

static inline bool is_lower_hex64(const char *s) {
        if (strlen(s) != 64)
                return false;
        for (size_t i = 0; i < 64; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}
