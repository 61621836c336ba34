/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the one escaper (common/term-escape.h) on any bytes a job or an agent can
 * choose. Its promises, checked on every input: the text of a name (TERM_ESCAPE_LINE) is one
 * line of plain text, no ESC, no C1, no bidi control, valid UTF-8; a cut one is a prefix of the
 * whole with "..."; the stream, split where the first byte says, gives the text of the whole. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/term-escape.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned flag_sets[] = { 0, TERM_ESCAPE_LINE, TERM_ESCAPE_NAME, TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size == 0 || size > 4096)
                return 0;
        unsigned flags = flag_sets[data[0] % 4];
        size_t split = size > 1 ? data[0] % size : 0;
        const char *s = (const char *) data + 1;
        size_t n = size - 1, wsize = 4 * n + 1;
        char *whole = malloc(wsize < 8 ? 8 : wsize), cut[40];
        char *streamed = NULL;
        size_t slen = 0;
        if (!whole)
                return 0;
        term_escape(s, n, flags, whole, wsize < 8 ? 8 : wsize);
        size_t wlen = strlen(whole);
        if ((flags & TERM_ESCAPE_LINE) && !utf8_is_plain_text(whole, wlen))
                __builtin_trap();
        for (size_t i = 0; i < wlen; i++)
                if (whole[i] == 0x1b || ((flags & TERM_ESCAPE_ASCII) && (unsigned char) whole[i] >= 0x80))
                        __builtin_trap();
        term_escape(s, n, flags, cut, sizeof(cut));
        size_t clen = strlen(cut);
        if (strcmp(cut, whole) != 0 && (clen < 3 || strcmp(cut + clen - 3, "...") || strncmp(cut, whole, clen - 3)))
                __builtin_trap();
        FILE *f = open_memstream(&streamed, &slen);
        if (f) {
                TermEscape t = TERM_ESCAPE_INIT(flags);
                size_t k = split < n ? split : n;
                if (term_escape_write(&t, s, k, f) < 0 || term_escape_write(&t, s + k, n - k, f) < 0 ||
                    term_escape_finish(&t, f) < 0)
                        __builtin_trap();
                fclose(f);
                if (!streamed || strcmp(streamed, whole) != 0)
                        __builtin_trap();
        }
        free(streamed);
        free(whole);
        return 0;
}
