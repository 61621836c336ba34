/* SPDX-License-Identifier: MIT */
/* Time in microseconds, and RFC 3339 UTC timestamps ("2026-11-29T15:00:00Z"). */
#pragma once

#include <stddef.h>
#include <stdint.h>

typedef uint64_t usec_t;
#define USEC_PER_SEC ((usec_t) 1000000ULL)
#define USEC_PER_MSEC ((usec_t) 1000ULL)
#define RFC3339_MAX 32

usec_t now_realtime(void);
usec_t now_monotonic(void);

/* Format whole seconds of a realtime value; buf must hold RFC3339_MAX bytes. */
const char *format_rfc3339(usec_t t, char buf[static RFC3339_MAX]);

/* Parse exactly "YYYY-MM-DDTHH:MM:SSZ" (an optional ".fraction" is accepted and dropped). */
int parse_rfc3339(const char *s, usec_t *ret);

/* A compact UTC stamp for file names: "20261129T150000Z". */
const char *format_utc_stamp(usec_t t, char buf[static RFC3339_MAX]);
