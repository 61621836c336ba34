/* SPDX-License-Identifier: MIT */
/* The one escaper for bytes someone else chose (a job's file names and output, an agent's argv)
 * on their way to a person's terminal or a log (docs/threats.md row 18).
 *
 * Contract: accepts any bytes. Guarantees that the result holds no byte a terminal acts on and
 * nothing that reorders what it shows: every C0 control and DEL as \xHH (newline and tab kept
 * unless TERM_ESCAPE_LINE), every C1 control written as UTF-8 (U+0080..U+009F, which a terminal
 * may take as CSI, OSC, ...) and every bidirectional control (U+061C, U+200E, U+200F,
 * U+202A..U+202E, U+2066..U+2069) as \uHHHH, and every byte that does not belong to well-formed
 * UTF-8 (a stray continuation byte, a truncated sequence, an overlong form, a surrogate,
 * anything above U+10FFFF) as \xHH, one byte at a time, the decoding resuming at the next
 * byte. Every other character passes as it is: printable ASCII, and valid UTF-8 unless
 * TERM_ESCAPE_ASCII. No ESC (0x1b) and no C1 byte pair can come out of it, whatever the input:
 * what submit writes around a job's escaped output can use an escape sequence as a mark that
 * the output cannot imitate (controller/terminal.h). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum {
        TERM_ESCAPE_LINE = 1 << 0,  /* newline and tab as \x0a and \x09 too: the result is one line */
        TERM_ESCAPE_QUOTE = 1 << 1, /* backslash and ' as \x5c and \x27 too: a name in quotes reads
                                     * back unambiguously (nothing in it looks like an escape) */
        TERM_ESCAPE_ASCII = 1 << 2, /* every byte from 0x80 as \xHH too: ASCII only (logs, JSON codes) */
};
/* A name in a message: one line, in quotes. */
#define TERM_ESCAPE_NAME (TERM_ESCAPE_LINE | TERM_ESCAPE_QUOTE)

/* Is cp a character a terminal acts on or that reorders text: C0, DEL, C1, a bidirectional
 * control? */
bool term_char_is_control(uint32_t cp);

/* Is s[0..n) well-formed UTF-8 without any character term_char_is_control() names (and so
 * without NUL)? The names a job may give to what leaves the capsule. */
bool utf8_is_plain_text(const char *s, size_t n);

/* The escaped form of s[0..n) into out (size at least 8), cut between two characters with
 * "..." when it does not fit. Returns out. */
const char *term_escape(const char *s, size_t n, unsigned flags, char *out, size_t size);

/* The escaped form of the string s, whole, in memory of its own (free() it); NULL when out of
 * memory. */
char *term_escape_strdup(const char *s, unsigned flags);

/* The same for a stream that comes in pieces: a UTF-8 sequence split between two writes is
 * judged whole, so that any split of the bytes gives the same text as one write. */
typedef struct TermEscape {
        unsigned flags;
        unsigned char held[4]; /* the start of a sequence the next write may complete */
        size_t n_held;
} TermEscape;

#define TERM_ESCAPE_INIT(f) { .flags = (f) }

/* The escaped form of buf[0..n) written to f, but for a sequence that may still complete. 0, or
 * -EIO when f failed. */
int term_escape_write(TermEscape *t, const void *buf, size_t n, FILE *f);

/* The end of the stream: what is held is not going to complete, written as \xHH. 0 or -EIO. */
int term_escape_finish(TermEscape *t, FILE *f);
