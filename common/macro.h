/* SPDX-License-Identifier: MIT */
/* Small language helpers shared by every component: cleanup attributes and ownership transfer.
 * The pattern is systemd's (macro.h, fd-util.h): an owned resource is declared with a cleanup
 * attribute and handed on with TAKE_PTR / TAKE_FD, so every return path releases it. */
#pragma once

#include <stdio.h>

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_ __attribute__((noreturn))
#define _warn_unused_result_ __attribute__((warn_unused_result))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Take ownership out of a variable and leave a value its cleanup ignores. */
#define TAKE_GENERIC(var, type, nullvalue)                                                       \
        ({                                                                                       \
                type *_pvar_ = &(var);                                                           \
                type _var_ = *_pvar_;                                                            \
                *_pvar_ = (nullvalue);                                                           \
                _var_;                                                                           \
        })
#define TAKE_PTR(p) TAKE_GENERIC(p, __typeof__(p), NULL)
#define TAKE_FD(fd) TAKE_GENERIC(fd, int, -EBADF)

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

/* close() that is safe on negative values and never retried on EINTR (the fd is gone either
 * way on Linux). Returns -EBADF so callers can write fd = safe_close(fd). */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}
static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)
static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* Free a NULL-terminated array of strings. */
static inline char **strv_free(char **l) {
        if (l) {
                for (char **i = l; *i; i++)
                        free(*i);
                free(l);
        }
        return NULL;
}
static inline void strv_freep(char ***l) {
        strv_free(*l);
}
#define _cleanup_strv_free_ _cleanup_(strv_freep)

#define streq(a, b) (strcmp((a), (b)) == 0)
/* Both NULL, or both strings and equal. */
static inline bool streq_ptr(const char *a, const char *b) {
        return a == b || (a && b && strcmp(a, b) == 0);
}
