/* SPDX-License-Identifier: MIT */
/* The names a folding file system takes for another (common/name-fold.h). */
#include <stdint.h>
#include <string.h>

#include "common/macro.h"
#include "common/name-fold.h"

/* Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, 15.0): HFS+ drops a few of
 * them from names (git's utf8.c lists which), and the kernel's casefolding tables dropped all of
 * them until 6.12. */
static bool ignorable(uint32_t c) {
        static const uint32_t ranges[][2] = {
                { 0x00ad, 0x00ad }, { 0x034f, 0x034f }, { 0x061c, 0x061c }, { 0x115f, 0x1160 },
                { 0x17b4, 0x17b5 }, { 0x180b, 0x180f }, { 0x200b, 0x200f }, { 0x202a, 0x202e },
                { 0x2060, 0x206f }, { 0x3164, 0x3164 }, { 0xfe00, 0xfe0f }, { 0xfeff, 0xfeff },
                { 0xffa0, 0xffa0 }, { 0xfff0, 0xfff8 }, { 0x1bca0, 0x1bca3 }, { 0x1d173, 0x1d17a },
                { 0xe0000, 0xe0fff },
        };
        for (size_t i = 0; i < ELEMENTSOF(ranges); i++)
                if (c >= ranges[i][0] && c <= ranges[i][1])
                        return true;
        return false;
}

/* The ASCII letters a non-ASCII code point becomes under full case folding or canonical
 * decomposition (or in some file system's upcase table: the two I's), or NULL. */
static const char *ascii_of(uint32_t c) {
        switch (c) {
        case 0x212a: return "k";   /* KELVIN SIGN: decomposes to K */
        case 0x017f: return "s";   /* LATIN SMALL LETTER LONG S */
        case 0x0130: return "i";   /* I WITH DOT ABOVE */
        case 0x0131: return "i";   /* DOTLESS I: its capital is I */
        case 0x00df: return "ss";
        case 0x1e9e: return "ss";
        case 0xfb00: return "ff";
        case 0xfb01: return "fi";
        case 0xfb02: return "fl";
        case 0xfb03: return "ffi";
        case 0xfb04: return "ffl";
        case 0xfb05: return "st";
        case 0xfb06: return "st";
        default: return NULL;
        }
}

/* One code point of s[0..n) in *ret: its length in bytes, 0 for a sequence that is not strict
 * UTF-8. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *ret) {
        static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
        size_t k = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
        if (k == 0 || k > n)
                return 0;
        uint32_t c = k == 1 ? s[0] : (uint32_t) (s[0] & (0x7f >> k));
        for (size_t i = 1; i < k; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                c = (c << 6) | (s[i] & 0x3f);
        }
        if (c < min[k] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
                return 0;
        *ret = c;
        return k;
}

bool name_fold(const char *name, size_t len, char out[static NAME_FOLD_MAX]) {
        const unsigned char *s = (const unsigned char *) name;
        size_t o = 0;
        if (len > NAME_MAX)
                return false; /* no file system holds it */
        for (size_t i = 0; i < len;) {
                uint32_t c;
                size_t k = utf8_next(s + i, len - i, &c);
                if (k == 0 || c == 0)
                        return false; /* not UTF-8, or a NUL no name holds */
                i += k;
                const char *a = c < 0x80 ? NULL : ascii_of(c);
                if (c < 0x80)
                        out[o++] = (char) (c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
                else if (a)
                        for (; *a; a++)
                                out[o++] = *a; /* never longer than the bytes it replaces */
                else if (!ignorable(c))
                        return false;
        }
        out[o] = 0;
        char *colon = strchr(out, ':');
        if (colon)
                *colon = 0, o = (size_t) (colon - out);
        while (o > 0 && (out[o - 1] == '.' || out[o - 1] == ' '))
                out[--o] = 0;
        return true;
}

static bool all_of(const char *s, size_t n, const char *set) {
        return strspn(s, set) >= n;
}

/* Is folded one of NTFS's 8.3 short names for target: its first letters (up to six, fewer
 * when the number after '~' is longer), or its first two and four hex digits of a hash, then
 * '~' and a number, eight characters at most? */
static bool short_name_of(const char *folded, const char *target) {
        const char *base = target[0] == '.' ? target + 1 : target;
        size_t bl = strlen(base), k = strlen(folded);
        const char *tilde = strchr(folded, '~');
        if ((target[0] != '.' && bl <= 8) || !tilde)
                return false;
        size_t p = (size_t) (tilde - folded), d = k - p - 1;
        if (d < 1 || p + 1 + d > 8 || tilde[1] < '1' || tilde[1] > '9' || !all_of(tilde + 1, d, "0123456789"))
                return false;
        if (p == MIN(bl, 7 - d) && strncmp(folded, base, p) == 0)
                return true;
        return p == 6 && bl >= 2 && strncmp(folded, base, 2) == 0 && all_of(folded + 2, 4, "0123456789abcdef");
}

bool name_folded_is(const char *folded, const char *target) {
        return streq(folded, target) || short_name_of(folded, target);
}

bool name_folds_to(const char *name, size_t len, const char *target) {
        char folded[NAME_FOLD_MAX];
        return name_fold(name, len, folded) && name_folded_is(folded, target);
}

bool path_component_folds_to(const char *path, const char *target) {
        for (const char *c = path;;) {
                size_t k = strcspn(c, "/");
                if (name_folds_to(c, k, target))
                        return true;
                if (!c[k])
                        return false;
                c += k + 1;
        }
}
