/* SPDX-License-Identifier: MIT */
/* common/term-escape.h: the one escaper of what a job or an agent chose, on its way to a
 * terminal (issue 46 items 2 and 3; docs/threats.md row 18). C0, DEL, C1 as UTF-8, invalid
 * UTF-8 (truncated, overlong, surrogates, beyond U+10FFFF, stray bytes) and the bidirectional
 * controls, in names (one line, quoted) and in contents (a stream split anywhere). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/path-util.h"
#include "common/term-escape.h"
#include "tests/unit/lib/tfw-test.h"

static void escaped_is(const char *s, size_t n, unsigned flags, const char *want) {
        char out[512];
        const char *got = term_escape(s, n, flags, out, sizeof(out));
        if (strcmp(got, want) != 0)
                fail_msg("term_escape(%zu bytes, flags %u): got '%s', want '%s'", n, flags, got, want);
}
#define ESC(lit, flags, want) escaped_is(lit, sizeof(lit) - 1, flags, want)

/* The name a job gave in issue 46 and its kin: a C1 CSI, C0, DEL, as a name is shown. */
static void test_controls(void **state _unused_) {
        ESC("n\xc2\x9b" "2J.txt", TERM_ESCAPE_NAME, "n\\u009b2J.txt");
        ESC("n\xc2\x9b" "2J.txt", TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII, "n\\xc2\\x9b2J.txt");
        ESC("a\xc2\x85" "b\xc2\x80\xc2\x9f", 0, "a\\u0085b\\u0080\\u009f"); /* NEL, the first and last C1 */
        ESC("\x1b[8mhidden\x1b[0m", 0, "\\x1b[8mhidden\\x1b[0m");           /* SGR 8, conceal */
        ESC("\x1b]0;title\x07", 0, "\\x1b]0;title\\x07");                   /* OSC, BEL */
        ESC("a\rb\bc\x7f", 0, "a\\x0db\\x08c\\x7f");                         /* CR, BS, DEL */
        ESC("a\0b", 0, "a\\x00b");                                         /* NUL inside a length */
        ESC("a\nb\tc", 0, "a\nb\tc");                                      /* contents keep lines */
        ESC("a\nb\tc", TERM_ESCAPE_LINE, "a\\x0ab\\x09c");                 /* a name is one line */
        ESC("it's a\\b", 0, "it's a\\b");
        ESC("it's a\\b", TERM_ESCAPE_NAME, "it\\x27s a\\x5cb");             /* unambiguous in quotes */
        ESC("a'b\\c\n\xff", TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII, "a\\x27b\\x5cc\\x0a\\xff");
        ESC("caf\xc3\xa9 \xc2\xa0 \xe2\x82\xac \xf0\x9f\x98\x80", 0, "caf\xc3\xa9 \xc2\xa0 \xe2\x82\xac \xf0\x9f\x98\x80");
        ESC("caf\xc3\xa9", TERM_ESCAPE_ASCII, "caf\\xc3\\xa9");
}

/* Every bidirectional control shown as its code point; its neighbours are text. */
static void test_bidi(void **state _unused_) {
        ESC("\xd8\x9c", 0, "\\u061c");                       /* ALM */
        ESC("\xe2\x80\x8e\xe2\x80\x8f", 0, "\\u200e\\u200f"); /* LRM, RLM */
        ESC("\xe2\x80\xaa\xe2\x80\xab\xe2\x80\xac\xe2\x80\xad\xe2\x80\xae", 0, "\\u202a\\u202b\\u202c\\u202d\\u202e");
        ESC("\xe2\x81\xa6\xe2\x81\xa7\xe2\x81\xa8\xe2\x81\xa9", 0, "\\u2066\\u2067\\u2068\\u2069");
        ESC("evil\xe2\x80\xaetxt.exe", TERM_ESCAPE_NAME, "evil\\u202etxt.exe");
        ESC("\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa", 0, "\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xa5\xe2\x81\xaa");
        ESC("\xd8\x9b", 0, "\xd8\x9b"); /* U+061B, beside ALM, is text */
}

/* Bytes that are not well-formed UTF-8: each shown as \xHH, decoding going on at the next. */
static void test_invalid_utf8(void **state _unused_) {
        ESC("\x9b" "31m", 0, "\\x9b31m");                            /* a raw C1 byte */
        ESC("\x80\xbf", 0, "\\x80\\xbf");                             /* stray continuations */
        ESC("\xe2\x80", 0, "\\xe2\\x80");                             /* truncated at the end */
        ESC("\xe2\x80" "a", 0, "\\xe2\\x80a");                        /* ... and by ASCII */
        ESC("\xf0\x9f\x98", 0, "\\xf0\\x9f\\x98");
        ESC("\xe2\xc2\x9b", 0, "\\xe2\\u009b");                       /* a lead, then a C1 */
        ESC("\xc0\xaf", 0, "\\xc0\\xaf");                             /* overlong '/' */
        ESC("\xc1\xbf", 0, "\\xc1\\xbf");
        ESC("\xe0\x80\xaf", 0, "\\xe0\\x80\\xaf");                    /* overlong, three bytes */
        ESC("\xe0\x82\x9b", 0, "\\xe0\\x82\\x9b");                    /* an overlong C1 CSI */
        ESC("\xf0\x80\x80\xaf", 0, "\\xf0\\x80\\x80\\xaf");           /* overlong, four bytes */
        ESC("\xed\xa0\x80", 0, "\\xed\\xa0\\x80");                    /* a surrogate */
        ESC("\xed\xbf\xbf", 0, "\\xed\\xbf\\xbf");
        ESC("\xed\x9f\xbf", 0, "\xed\x9f\xbf");                       /* U+D7FF is fine */
        ESC("\xf4\x90\x80\x80", 0, "\\xf4\\x90\\x80\\x80");           /* above U+10FFFF */
        ESC("\xf4\x8f\xbf\xbf", 0, "\xf4\x8f\xbf\xbf");               /* U+10FFFF */
        ESC("\xf5\xf8\xfe\xff", 0, "\\xf5\\xf8\\xfe\\xff");
}

/* Cut between two characters, never inside an escape or a sequence, "..." when cut, the NUL
 * always in the buffer. */
static void test_cut(void **state _unused_) {
        char out[64];
        assert_string_equal(term_escape("abcdefg", 7, 0, out, 8), "abcdefg");
        assert_string_equal(term_escape("abcdefgh", 8, 0, out, 8), "abcd...");
        assert_string_equal(term_escape("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 8, 0, out, 8), "\xc3\xa9\xc3\xa9...");
        assert_string_equal(term_escape("\x1b\x1b\x1b", 3, 0, out, 8), "\\x1b...");
        assert_string_equal(term_escape("\xe2\x80\xae\xe2\x80\xae", 6, 0, out, 10), "\\u202e...");
        char longname[1000];
        memset(longname, 'n', sizeof(longname));
        const char *s = term_escape(longname, sizeof(longname), TERM_ESCAPE_NAME, out, sizeof(out));
        assert_int_equal(strlen(s), sizeof(out) - 1);
        assert_string_equal(s + strlen(s) - 3, "...");
        /* printable_name is the same escaper, ASCII only. */
        assert_string_equal(printable_name("a\x1b'\xc3\xa9\xc2\x9b", out, sizeof(out)), "a\\x1b\\x27\\xc3\\xa9\\xc2\\x9b");
        _cleanup_free_ char *d = term_escape_strdup("x\xe2\x80\xae\x1b\xff", TERM_ESCAPE_NAME);
        assert_string_equal(d, "x\\u202e\\x1b\\xff");
}

static uint32_t rnd_state = 46;
static unsigned char rnd_byte(void) {
        static const unsigned char interesting[] = { 0x1b, '\n', '\\', '\'', 0x7f, 0x80, 0x9b, 0xbf, 0xc0, 0xc2,
                                                     0xd8, 0xe0, 0xe2, 0xed, 0xf0, 0xf4, 0xf5, 0xff, 0x80, 0xae };
        rnd_state = rnd_state * 1103515245u + 12345u;
        uint32_t r = rnd_state >> 16;
        return (r & 1) ? interesting[(r >> 1) % sizeof(interesting)] : (unsigned char) (r >> 3);
}

/* Whatever the bytes and the buffer: one line of plain text (no control, no bidi, valid
 * UTF-8) that is a prefix of the whole text, cut with "..." only when it must be. */
static void test_any_input(void **state _unused_) {
        for (unsigned round = 0; round < 20000; round++) {
                unsigned char in[24];
                size_t n = round % sizeof(in);
                for (size_t i = 0; i < n; i++)
                        in[i] = rnd_byte();
                char whole[4 * sizeof(in) + 1], cut[64];
                term_escape((const char *) in, n, TERM_ESCAPE_LINE, whole, sizeof(whole));
                assert_true(utf8_is_plain_text(whole, strlen(whole)));
                assert_null(strchr(whole, '\x1b'));
                size_t size = 8 + round % 40;
                term_escape((const char *) in, n, TERM_ESCAPE_LINE, cut, size);
                size_t k = strlen(cut);
                assert_true(k < size);
                if (strlen(whole) < size)
                        assert_string_equal(cut, whole);
                if (strcmp(cut, whole) != 0) {
                        assert_true(k >= 3 && memcmp(cut + k - 3, "...", 3) == 0);
                        assert_memory_equal(cut, whole, k - 3);
                }
        }
}

/* A stream: the text of every split of the bytes into two writes, and of one byte a write, is
 * the text of the whole. */
static char *streamed(const char *s, size_t n, unsigned flags, size_t split, bool bytewise) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        TermEscape t = TERM_ESCAPE_INIT(flags);
        assert_non_null(f);
        if (bytewise)
                for (size_t i = 0; i < n; i++)
                        assert_int_equal(term_escape_write(&t, s + i, 1, f), 0);
        else {
                assert_int_equal(term_escape_write(&t, s, split, f), 0);
                assert_int_equal(term_escape_write(&t, s + split, n - split, f), 0);
        }
        assert_int_equal(term_escape_finish(&t, f), 0);
        assert_int_equal(fclose(f), 0);
        return text;
}

static void test_stream_splits(void **state _unused_) {
        static const char hostile[] =
                "submit 'x': succeeded\n\x1b[8m\xc2\x9b" "2J\xe2\x80\xae" "evil\xe2\x81\xa6\n"
                "\xe2\x80\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80\xf0\x9f\x98\x80\x9b\x7f\r\tcaf\xc3\xa9\xf0\x9f\x98";
        size_t n = sizeof(hostile) - 1;
        static const unsigned flag_sets[] = { 0, TERM_ESCAPE_NAME, TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII };
        for (size_t f = 0; f < ELEMENTSOF(flag_sets); f++) {
                _cleanup_free_ char *whole = malloc(4 * n + 1);
                assert_non_null(whole);
                term_escape(hostile, n, flag_sets[f], whole, 4 * n + 1);
                if (flag_sets[f] == 0)
                        assert_string_equal(whole, "submit 'x': succeeded\n\\x1b[8m\\u009b2J\\u202eevil\\u2066\n"
                                                   "\\xe2\\x80\\xc0\\xaf\\xed\\xa0\\x80\\xf4\\x90\\x80\\x80"
                                                   "\xf0\x9f\x98\x80\\x9b\\x7f\\x0d\tcaf\xc3\xa9\\xf0\\x9f\\x98");
                for (size_t split = 0; split <= n; split++) {
                        _cleanup_free_ char *got = streamed(hostile, n, flag_sets[f], split, false);
                        if (strcmp(got, whole) != 0)
                                fail_msg("flags %u, split at %zu: '%s'", flag_sets[f], split, got);
                }
                _cleanup_free_ char *bytewise = streamed(hostile, n, flag_sets[f], 0, true);
                assert_string_equal(bytewise, whole);
        }
}

/* A sequence left open by one write is completed by the next, and shown as bytes at the end. */
static void test_stream_held(void **state _unused_) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        TermEscape t = TERM_ESCAPE_INIT(0);
        assert_int_equal(term_escape_write(&t, "a\xe2\x80", 3, f), 0);
        fflush(f);
        assert_string_equal(text, "a"); /* held: it may still be U+202E */
        assert_int_equal(term_escape_write(&t, "\xae" "b\xc2", 3, f), 0);
        fflush(f);
        assert_string_equal(text, "a\\u202eb");
        assert_int_equal(term_escape_finish(&t, f), 0);
        assert_int_equal(fclose(f), 0);
        assert_string_equal(text, "a\\u202eb\\xc2");
        free(text);
}

static void test_plain_text(void **state _unused_) {
        assert_true(utf8_is_plain_text("plain caf\xc3\xa9 \xc2\xa0", 11));
        assert_true(utf8_is_plain_text("", 0));
        assert_false(utf8_is_plain_text("a\0b", 3));
        assert_false(utf8_is_plain_text("tab\t", 4));
        assert_false(utf8_is_plain_text("del\x7f", 4));
        assert_false(utf8_is_plain_text("n\xc2\x9b", 3));
        assert_false(utf8_is_plain_text("\xe2\x80\xae", 3));
        assert_false(utf8_is_plain_text("\xe2\x81\xa8", 3));
        assert_false(utf8_is_plain_text("\xd8\x9c", 2));
        assert_false(utf8_is_plain_text("\xe2\x80\x8f", 3));
        assert_false(utf8_is_plain_text("\xed\xa0\x80", 3));
        assert_false(utf8_is_plain_text("\xe2\x80", 2));
        for (uint32_t cp = 0; cp < 0x3000; cp++)
                assert_int_equal(term_char_is_control(cp),
                                 cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
                                         (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_controls),
                cmocka_unit_test(test_bidi),
                cmocka_unit_test(test_invalid_utf8),
                cmocka_unit_test(test_cut),
                cmocka_unit_test(test_any_input),
                cmocka_unit_test(test_stream_splits),
                cmocka_unit_test(test_stream_held),
                cmocka_unit_test(test_plain_text),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
