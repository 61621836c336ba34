/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "time-util.h"

static usec_t now_clock(clockid_t c) {
        struct timespec ts;
        (void) clock_gettime(c, &ts);
        return (usec_t) ts.tv_sec * USEC_PER_SEC + (usec_t) ts.tv_nsec / 1000;
}

usec_t now_realtime(void) {
        return now_clock(CLOCK_REALTIME);
}

usec_t now_monotonic(void) {
        return now_clock(CLOCK_MONOTONIC);
}

static const char *format_tm(usec_t t, char *buf, bool compact) {
        time_t sec = (time_t) (t / USEC_PER_SEC);
        struct tm tm;
        if (!gmtime_r(&sec, &tm))
                buf[0] = 0;
        else
                (void) snprintf(buf, RFC3339_MAX,
                                compact ? "%04d%02d%02dT%02d%02d%02dZ" : "%04d-%02d-%02dT%02d:%02d:%02dZ",
                                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                                tm.tm_sec);
        return buf;
}

const char *format_rfc3339(usec_t t, char buf[static RFC3339_MAX]) {
        return format_tm(t, buf, false);
}

const char *format_utc_stamp(usec_t t, char buf[static RFC3339_MAX]) {
        return format_tm(t, buf, true);
}

int parse_rfc3339(const char *s, usec_t *ret) {
        struct tm tm = {0};
        const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
        if (!p)
                return -EINVAL;
        if (*p == '.') {
                p++;
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                while (*p >= '0' && *p <= '9')
                        p++;
        }
        if (strcmp(p, "Z") != 0)
                return -EINVAL;
        time_t sec = timegm(&tm);
        if (sec < 0)
                return -ERANGE;
        *ret = (usec_t) sec * USEC_PER_SEC;
        return 0;
}
