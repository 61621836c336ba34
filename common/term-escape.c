/* SPDX-License-Identifier: MIT */
/* The one escaper of bytes someone else chose, for a terminal (term-escape.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "term-escape.h"

/* The longest text of one character: four bytes as \xHH each (TERM_ESCAPE_ASCII). */
#define FORM_MAX 16

/* The well-formed UTF-8 sequence at s[0..n) (Unicode's table 3-7: no overlong form, no
 * surrogate, nothing above U+10FFFF): its length with *ret_cp, 0 when s[0] begins none, -1
 * when the n bytes are the start of one that needs more. */
static int utf8_next(const unsigned char *s, size_t n, uint32_t *ret_cp) {
        unsigned char c = s[0], lo = 0x80, hi = 0xbf;
        uint32_t cp;
        size_t len;

        if (c < 0x80) {
                *ret_cp = c;
                return 1;
        }
        if (c >= 0xc2 && c <= 0xdf)
                len = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) {
                len = 3, cp = c & 0x0f;
                lo = c == 0xe0 ? 0xa0 : 0x80; /* E0 80..9F: overlong */
                hi = c == 0xed ? 0x9f : 0xbf; /* ED A0..BF: a surrogate */
        } else if (c >= 0xf0 && c <= 0xf4) {
                len = 4, cp = c & 0x07;
                lo = c == 0xf0 ? 0x90 : 0x80; /* F0 80..8F: overlong */
                hi = c == 0xf4 ? 0x8f : 0xbf; /* F4 90..: above U+10FFFF */
        } else
                return 0;
        for (size_t k = 1; k < len; k++) {
                if (k >= n)
                        return -1;
                if (s[k] < lo || s[k] > hi)
                        return 0;
                lo = 0x80, hi = 0xbf;
                cp = (cp << 6) | (s[k] & 0x3f);
        }
        *ret_cp = cp;
        return (int) len;
}

bool term_char_is_control(uint32_t cp) {
        return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x061c || cp == 0x200e || cp == 0x200f ||
               (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

bool utf8_is_plain_text(const char *s, size_t n) {
        const unsigned char *p = (const unsigned char *) s;
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                int len = utf8_next(p + i, n - i, &cp);
                if (len <= 0 || term_char_is_control(cp))
                        return false;
                i += (size_t) len;
        }
        return true;
}

/* Does this ASCII byte pass as it is? */
static bool ascii_kept(unsigned char c, unsigned flags) {
        if (c == '\n' || c == '\t')
                return !(flags & TERM_ESCAPE_LINE);
        if (c == '\\' || c == '\'')
                return !(flags & TERM_ESCAPE_QUOTE);
        return c >= 0x20 && c < 0x7f;
}

static size_t hex_byte(unsigned char c, char *out) {
        static const char hex[] = "0123456789abcdef";
        out[0] = '\\';
        out[1] = 'x';
        out[2] = hex[c >> 4];
        out[3] = hex[c & 15];
        return 4;
}

/* The text of one character: u[0..len) a well-formed sequence for cp, or with !valid the one
 * byte u[0] that begins none. */
static size_t form(const unsigned char *u, size_t len, bool valid, uint32_t cp, unsigned flags, char out[static FORM_MAX]) {
        static const char hex[] = "0123456789abcdef";
        size_t k = 0;

        if (!valid)
                return hex_byte(u[0], out);
        if (len == 1) {
                if (!ascii_kept(u[0], flags))
                        return hex_byte(u[0], out);
                out[0] = (char) u[0];
                return 1;
        }
        if (flags & TERM_ESCAPE_ASCII) {
                for (size_t i = 0; i < len; i++)
                        k += hex_byte(u[i], out + k);
                return k;
        }
        if (term_char_is_control(cp)) {
                out[k++] = '\\';
                out[k++] = 'u';
                for (int shift = 12; shift >= 0; shift -= 4)
                        out[k++] = hex[(cp >> shift) & 15];
                return k;
        }
        memcpy(out, u, len);
        return len;
}

/* The length of the text of p[0..n). */
static size_t measure(const unsigned char *p, size_t n, unsigned flags) {
        size_t total = 0;
        for (size_t i = 0; i < n;) {
                char f[FORM_MAX];
                uint32_t cp = 0;
                int len = utf8_next(p + i, n - i, &cp);
                size_t used = len > 0 ? (size_t) len : 1;
                total += form(p + i, used, len > 0, cp, flags, f);
                i += used;
        }
        return total;
}

const char *term_escape(const char *s, size_t n, unsigned flags, char *out, size_t size) {
        const unsigned char *p = (const unsigned char *) s;
        size_t o = 0;
        bool rest_fits = false;

        if (size < 4) {
                if (size)
                        out[0] = 0;
                return out;
        }
        for (size_t i = 0; i < n;) {
                char f[FORM_MAX];
                uint32_t cp = 0;
                int len = utf8_next(p + i, n - i, &cp);
                size_t used = len > 0 ? (size_t) len : 1;
                size_t k = form(p + i, used, len > 0, cp, flags, f);
                bool last = i + used >= n;
                /* Room for this character, and after it for "..." unless it is the last or all
                 * the rest fits: the "..." always fits where a character did not. */
                if (!rest_fits && !last && o + k + 3 + 1 > size)
                        rest_fits = o + measure(p + i, n - i, flags) + 1 <= size;
                if (o + k + (last || rest_fits ? 0 : 3) + 1 > size) {
                        memcpy(out + o, "...", 3);
                        o += 3;
                        break;
                }
                memcpy(out + o, f, k);
                o += k;
                i += used;
        }
        out[o] = 0;
        return out;
}

char *term_escape_strdup(const char *s, unsigned flags) {
        size_t n = strlen(s);
        /* At most four bytes of text a byte: \xHH; \uHHHH stands for two or three. */
        if (n > (SIZE_MAX - 1) / 4)
                return NULL;
        size_t size = MAX(4 * n + 1, (size_t) 8);
        char *out = malloc(size);
        return out ? (char *) term_escape(s, n, flags, out, size) : NULL;
}

/* The text on its way to f, a few KiB at a time (one fwrite a character would dominate). */
typedef struct Sink {
        FILE *f;
        size_t n;
        bool failed;
        char buf[4096];
} Sink;

static void sink_flush(Sink *k) {
        if (k->n && fwrite(k->buf, 1, k->n, k->f) != k->n)
                k->failed = true;
        k->n = 0;
}

static void sink_put(Sink *k, const void *p, size_t n) {
        if (k->n + n > sizeof(k->buf))
                sink_flush(k);
        if (n > sizeof(k->buf)) {
                if (fwrite(p, 1, n, k->f) != n)
                        k->failed = true;
                return;
        }
        memcpy(k->buf + k->n, p, n);
        k->n += n;
}

/* The characters held, as far as they are decided (all of them at the end). */
static void drain(TermEscape *t, Sink *k, bool end) {
        while (t->n_held > 0) {
                char text[FORM_MAX];
                uint32_t cp = 0;
                int len = utf8_next(t->held, t->n_held, &cp);
                if (len < 0 && !end)
                        return;
                size_t used = len > 0 ? (size_t) len : 1;
                sink_put(k, text, form(t->held, used, len > 0, cp, t->flags, text));
                memmove(t->held, t->held + used, t->n_held - used);
                t->n_held -= used;
        }
}

int term_escape_write(TermEscape *t, const void *buf, size_t n, FILE *f) {
        const unsigned char *p = buf;
        Sink k = { .f = f };
        for (size_t i = 0; i < n;) {
                /* A run that passes as it is, at once. */
                size_t run = 0;
                while (t->n_held == 0 && i + run < n && p[i + run] < 0x80 && ascii_kept(p[i + run], t->flags))
                        run++;
                if (run) {
                        sink_put(&k, p + i, run);
                        i += run;
                        continue;
                }
                /* One byte at a time otherwise: held is always the start of a sequence, so each
                 * byte completes it, keeps it open, or shows that it was none. */
                t->held[t->n_held++] = p[i++];
                drain(t, &k, false);
        }
        sink_flush(&k);
        return k.failed ? -EIO : 0;
}

int term_escape_finish(TermEscape *t, FILE *f) {
        Sink k = { .f = f };
        drain(t, &k, true);
        sink_flush(&k);
        return k.failed ? -EIO : 0;
}
