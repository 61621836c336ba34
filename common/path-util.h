/* SPDX-License-Identifier: MIT */
/* Checks on path strings that come from configuration. Agent-controlled paths are never
 * resolved as strings at all (see snapshot/); these only validate the operator's spelling. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Absolute and normalised: starts with '/', no empty, "." or ".." component, no trailing '/'
 * (except "/" itself), no control characters, shorter than PATH_MAX. */
bool path_is_absolute_normalized(const char *p);

/* Is child equal to parent or below it (both normalised absolute paths)? */
bool path_is_below_or_equal(const char *child, const char *parent);

/* a + "/" + b into buf; -ENAMETOOLONG when it does not fit. */
int path_join_buf(char *buf, size_t size, const char *a, const char *b);

/* A name as a message or a log may show it: printable ASCII kept, every other byte (and the
 * quote and backslash) as \xHH, cut with "..." when long (term_escape() with
 * TERM_ESCAPE_NAME | TERM_ESCAPE_ASCII). Never a byte from 0x80 or a control character,
 * whatever the input. out_size must be at least 8. Returns out. */
const char *printable_name(const char *s, char *out, size_t out_size);

/* Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF. */
bool utf8_is_valid(const unsigned char *s, size_t len);

/* A list's path field (capsule/protocol.h, the changes' and the cache's lists): bytes
 * 0x21..0x7e but backslash, and from 0x80, as they are, \xHH (lowercase hex) for any byte.
 * Decoded into out (NUL-terminated); its length, -EINVAL for anything else (a NUL byte
 * included), -ENAMETOOLONG when it does not fit. */
int path_unescape(const char *s, size_t n, char *out, size_t size);

/* Relative and normalised, as a path below a directory is named: non-empty, no leading or
 * trailing '/', no empty, "." or ".." component, each component at most 255 bytes. */
bool path_is_relative_normalized(const char *p);

/* A single file name: non-empty, no '/', not "." or "..", shorter than NAME_MAX. */
bool filename_is_valid(const char *name);
