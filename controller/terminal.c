/* SPDX-License-Identifier: MIT */
/* submit on a terminal (terminal.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/term-escape.h"
#include "controller/terminal.h"

/* Did the job's output end in the middle of a line? Then submit's next line on the terminal
 * starts on a line of its own, its mark first. */
static bool job_mid_line;

typedef struct Escaped {
        FILE *under;
        bool raw; /* --raw: as it is */
        TermEscape t;
} Escaped;

static ssize_t escaped_write(void *cookie, const char *buf, size_t n) {
        Escaped *c = cookie;
        int r = c->raw ? (fwrite(buf, 1, n, c->under) == n ? 0 : -EIO) : term_escape_write(&c->t, buf, n, c->under);
        if (r < 0 || fflush(c->under) != 0) {
                errno = EIO;
                return -1;
        }
        if (n > 0)
                job_mid_line = buf[n - 1] != '\n';
        return (ssize_t) n;
}

static int escaped_close(void *cookie) {
        Escaped *c = cookie;
        int r = (!c->raw && term_escape_finish(&c->t, c->under) < 0) || fflush(c->under) != 0 ? -1 : 0;
        free(c);
        return r;
}

static FILE *job_stream_open(FILE *under, bool raw) {
        Escaped *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        *c = (Escaped) { .under = under, .raw = raw, .t = TERM_ESCAPE_INIT(0) };
        FILE *f = fopencookie(c, "w", (cookie_io_functions_t) { .write = escaped_write, .close = escaped_close });
        if (!f)
                free(c);
        return f;
}

FILE *terminal_escaped_open(FILE *under) {
        return job_stream_open(under, false);
}

typedef struct Marked {
        FILE *under;
        bool mid_line;
} Marked;

static ssize_t marked_write(void *cookie, const char *buf, size_t n) {
        Marked *c = cookie;
        for (size_t i = 0; i < n;) {
                const char *nl = memchr(buf + i, '\n', n - i);
                size_t k = nl ? (size_t) (nl - (buf + i)) + 1 : n - i;
                if (!c->mid_line && job_mid_line && fputc('\n', c->under) == EOF)
                        goto fail;
                job_mid_line = false;
                if (!c->mid_line && fputs(TERMINAL_MARK, c->under) < 0)
                        goto fail;
                if (fwrite(buf + i, 1, k, c->under) != k)
                        goto fail;
                c->mid_line = !nl;
                i += k;
        }
        if (fflush(c->under) == 0)
                return (ssize_t) n;
fail:
        errno = EIO;
        return -1;
}

static int marked_close(void *cookie) {
        Marked *c = cookie;
        int r = fflush(c->under) != 0 ? -1 : 0;
        free(c);
        return r;
}

FILE *terminal_marked_open(FILE *under) {
        Marked *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->under = under;
        FILE *f = fopencookie(c, "w", (cookie_io_functions_t) { .write = marked_write, .close = marked_close });
        if (!f) {
                free(c);
                return NULL;
        }
        setvbuf(f, NULL, _IOLBF, 0);
        return f;
}

void terminal_streams_close(TerminalStreams *t) {
        if (t->escaped)
                (void) fclose(t->escaped);
        if (t->marked)
                (void) fclose(t->marked);
        *t = (TerminalStreams) {};
}

int terminal_streams_open(FILE *out, FILE *err, bool escape_out, bool raw, TerminalStreams *ret, TfwError *e) {
        *ret = (TerminalStreams) {.out = out, .err = err};
        if (escape_out && isatty(fileno(out)) && !(ret->out = ret->escaped = job_stream_open(out, raw)))
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        if (isatty(fileno(err)) && !(ret->err = ret->marked = terminal_marked_open(err))) {
                terminal_streams_close(ret);
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        }
        return 0;
}

int controller_submit_on_terminal(const SubmitOptions *o, FILE *out, FILE *err, int *ret_status, TfwError *e) {
        _cleanup_(terminal_streams_close) TerminalStreams t = {};
        int r = terminal_streams_open(out, err, !o->json, o->raw, &t, e);
        return r < 0 ? r : controller_submit(o, t.out, t.err, ret_status, e);
}

int controller_shell_on_terminal(const ShellOptions *o, FILE *out, FILE *err, int *ret_status, TfwError *e) {
        _cleanup_(terminal_streams_close) TerminalStreams t = {};
        int r = terminal_streams_open(out, err, true, false, &t, e);
        return r < 0 ? r : controller_shell(o, t.out, t.err, ret_status, e);
}
