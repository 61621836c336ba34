/* SPDX-License-Identifier: MIT */
/* Byte sizes as the config spells them: a plain integer, or digits with one binary suffix
 * k, m or g (1k = 1024). Nothing else: no spaces, no sign, no decimals, no overflow. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Returns -EINVAL for a malformed string, -ERANGE on overflow. */
int parse_size(const char *s, uint64_t *ret);

/* Format as the shortest exact form ("2g", "256m", "1000"); buf of at least 24 bytes. */
const char *format_size(uint64_t v, char *buf, size_t len);

/* A decimal CPU count like "2.0" or "0.5", returned in thousandths (2000, 500). At most three
 * decimals, no sign, no exponent. Returns -EINVAL when malformed, -ERANGE when zero or huge. */
int parse_cpus(const char *s, uint64_t *ret_millicpus);
