/* SPDX-License-Identifier: MIT */
/* The error a user reads. Library code fills one of these and returns a negative errno; only
 * main() prints it and decides the exit status (as crun's libcrun_error_t). The code is a stable
 * machine-readable word (for example "unknown_field"); the message names the object and the
 * reason. A fixed buffer: filling an error never allocates, so it works after ENOMEM too. */
#pragma once

#include <stdarg.h>

#include "macro.h"

typedef struct TfwError {
        int error;          /* positive errno */
        const char *code;   /* static string, NULL when unset */
        char message[1024];
} TfwError;

/* Record an error (first one wins is NOT the rule: the latest call overwrites) and return -err
 * so callers can write `return tfw_error(e, EBADMSG, "bad_type", "...")`. e may be NULL. */
int tfw_error(TfwError *e, int err, const char *code, const char *fmt, ...) _printf_(4, 5);
int tfw_errorv(TfwError *e, int err, const char *code, const char *fmt, va_list ap) _printf_(4, 0);

/* Prepend context ("config '/etc/x.json': ") to an already recorded message. */
void tfw_error_prefix(TfwError *e, const char *fmt, ...) _printf_(2, 3);

static inline void tfw_error_clear(TfwError *e) {
        if (e) {
                e->error = 0;
                e->code = NULL;
                e->message[0] = 0;
        }
}
