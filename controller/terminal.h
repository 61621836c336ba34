/* SPDX-License-Identifier: MIT */
/* submit and shell on a terminal (issue 46 item 3, issue 50; docs/controller.md, "On a terminal"; docs/threats.md
 * row 18): a job's output must not drive the reviewer's terminal, and must not pass for
 * submit's own lines.
 *
 * When stdout is a terminal (and neither --raw nor --json is given), the job's bytes go through
 * the streaming escaper (common/term-escape.h): every control sequence, C1 control, bidi
 * control and byte of ill-formed UTF-8 shown as text, lines and tabs kept. When stderr is a
 * terminal, every line submit (and apply, for --apply) writes there starts with
 * TERMINAL_MARK: a reset of the terminal's attributes (whatever --raw output set, submit's
 * line is shown), then "tfw" in bold reverse video. Why the job cannot print a line that looks
 * the same: an attribute can only be set by an escape sequence, which starts with ESC (0x1b) or
 * a C1 CSI (0x9b, or U+009B as UTF-8), and the escaper rewrites each of them, wherever it is in
 * the stream, however the stream is split; no character shows lowercase letters in reverse
 * video by itself. When the job's output ended in the middle of a line, submit's next line
 * starts on a line of its own. With --raw the job's bytes reach the terminal as they are: the
 * reset still undoes what they set, but the mark can be imitated.
 *
 * When stdout or stderr is not a terminal (a harness, a pipe, a file, the MCP server), what
 * goes there is unchanged, byte for byte. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "common/error.h"
#include "controller/shell.h"
#include "controller/submit.h"

#define TERMINAL_MARK "\033[0m\033[1;7mtfw\033[0m "

/* A stream writing the escaped form of what it is given to under, flushed through on every
 * flush; its fclose() ends the escaping (a sequence left open shown as bytes) but leaves under
 * open. NULL with errno when out of memory. */
FILE *terminal_escaped_open(FILE *under);

/* A line-buffered stream writing to under with TERMINAL_MARK before every line. As above. */
FILE *terminal_marked_open(FILE *under);

/* The pair a verb writes to: out, escaped (or as it is with raw) when escape_out and it is a
 * terminal; err, marked when it is a terminal; either as it is otherwise (a pipe, a file: byte
 * for byte). 0 with *ret, or -ENOMEM with e set; terminal_streams_close() ends the wrapping
 * (flushed), leaving out and err open. */
typedef struct TerminalStreams {
        FILE *out, *err;        /* what to write to */
        FILE *escaped, *marked; /* the wrapping streams made, or NULL */
} TerminalStreams;
int terminal_streams_open(FILE *out, FILE *err, bool escape_out, bool raw, TerminalStreams *ret, TfwError *e);
void terminal_streams_close(TerminalStreams *t);

/* controller_submit() with out and err as above when they are terminals (out escaped unless
 * o->raw, untouched with o->json; err marked). */
int controller_submit_on_terminal(const SubmitOptions *o, FILE *out, FILE *err, int *ret_status, TfwError *e);

/* controller_shell() likewise: a person running `shell` on a terminal sees the job's output
 * escaped and shell's (submit's, apply's) lines marked; a harness, which gives it pipes, gets
 * the bytes as they are. */
int controller_shell_on_terminal(const ShellOptions *o, FILE *out, FILE *err, int *ret_status, TfwError *e);
