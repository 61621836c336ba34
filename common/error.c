/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>

#include "error.h"

int tfw_errorv(TfwError *e, int err, const char *code, const char *fmt, va_list ap) {
        if (err < 0)
                err = -err;
        if (err == 0)
                err = EIO;
        if (e) {
                e->error = err;
                e->code = code;
                (void) vsnprintf(e->message, sizeof(e->message), fmt, ap);
        }
        return -err;
}

int tfw_error(TfwError *e, int err, const char *code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = tfw_errorv(e, err, code, fmt, ap);
        va_end(ap);
        return r;
}

void tfw_error_prefix(TfwError *e, const char *fmt, ...) {
        char prefix[512], old[sizeof(e->message)];
        va_list ap;

        if (!e)
                return;
        va_start(ap, fmt);
        (void) vsnprintf(prefix, sizeof(prefix), fmt, ap);
        va_end(ap);
        memcpy(old, e->message, sizeof(old));
        /* Truncation is acceptable: the message stays a bounded, NUL-terminated line. */
        size_t n = strnlen(prefix, sizeof(prefix));
        n = MIN(n, sizeof(e->message) - 1);
        memcpy(e->message, prefix, n);
        size_t m = MIN(strnlen(old, sizeof(old)), sizeof(e->message) - 1 - n);
        memcpy(e->message + n, old, m);
        e->message[n + m] = 0;
}
