/* SPDX-License-Identifier: MIT */
/* Libraries only some paths need, loaded by those paths (systemd's dlopen_many_sym_or_warn):
 * libarchive (artifact import, in job processes), libcurl (serve) and libcrypto (streaming
 * SHA-256: snapshots, tree checks). The daemon links none of them, so idle it maps none of them
 * (issue 5: they were 7 of its 11.5 MiB of RSS).
 *
 * Call sites use sym_NAME, declared with DLSYM_PROTOTYPE(NAME) from the library's own header, so
 * the compiler checks every call against the real prototype. */
#pragma once

#include <stddef.h>

#include "common/error.h"

#define DLSYM_PROTOTYPE(symbol) __typeof__(symbol) *sym_##symbol
/* The pointer's type must match the function's, or the build fails. */
#define DLSYM_ARG(symbol)                                                                          \
        ({                                                                                         \
                _Static_assert(__builtin_types_compatible_p(__typeof__(sym_##symbol),              \
                                                            __typeof__(&symbol)),                  \
                               "sym_" #symbol " has the wrong type");                              \
                (void **) &sym_##symbol;                                                           \
        }),                                                                                        \
                #symbol

/* Security contract: loads filename, which must be an absolute path fixed at build time (the
 * library pkg-config names; see the Makefile's dl_path), so neither LD_LIBRARY_PATH nor the
 * working directory chooses the code; refuses a relative name with EINVAL. Then resolves every
 * (void **slot, const char *name) pair up to the NULL sentinel. All or nothing: on any failure no
 * slot is written, the library is closed and -EOPNOTSUPP returned with dlerror() in e. Once
 * loaded, *dlp is set and later calls return 0 at once. Safe from several threads (one lock). */
int dlopen_many_sym_sentinel(void **dlp, const char *filename, TfwError *e, ...)
        __attribute__((sentinel));
#define dlopen_many_sym(dlp, filename, e, ...) dlopen_many_sym_sentinel(dlp, filename, e, __VA_ARGS__, NULL)
