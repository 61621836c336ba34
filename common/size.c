/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>

#include "size.h"

int parse_size(const char *s, uint64_t *ret) {
        uint64_t v = 0, mult = 1;
        const char *p = s;

        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                if (v > (UINT64_MAX - (uint64_t) (*p - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (*p - '0');
        }
        switch (*p) {
        case 0:
                break;
        case 'k':
                mult = 1ULL << 10;
                p++;
                break;
        case 'm':
                mult = 1ULL << 20;
                p++;
                break;
        case 'g':
                mult = 1ULL << 30;
                p++;
                break;
        default:
                return -EINVAL;
        }
        if (*p != 0)
                return -EINVAL;
        if (v > UINT64_MAX / mult)
                return -ERANGE;
        *ret = v * mult;
        return 0;
}

const char *format_size(uint64_t v, char *buf, size_t len) {
        if (v != 0 && v % (1ULL << 30) == 0)
                snprintf(buf, len, "%llug", (unsigned long long) (v >> 30));
        else if (v != 0 && v % (1ULL << 20) == 0)
                snprintf(buf, len, "%llum", (unsigned long long) (v >> 20));
        else if (v != 0 && v % (1ULL << 10) == 0)
                snprintf(buf, len, "%lluk", (unsigned long long) (v >> 10));
        else
                snprintf(buf, len, "%llu", (unsigned long long) v);
        return buf;
}

int parse_cpus(const char *s, uint64_t *ret_millicpus) {
        uint64_t whole = 0, frac = 0;
        int ndec = 0;
        const char *p = s;

        if (!s || *s < '0' || *s > '9')
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                whole = whole * 10 + (uint64_t) (*p - '0');
                if (whole > 1000000)
                        return -ERANGE;
        }
        if (*p == '.') {
                p++;
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                for (; *p >= '0' && *p <= '9'; p++) {
                        if (++ndec > 3)
                                return -EINVAL;
                        frac = frac * 10 + (uint64_t) (*p - '0');
                }
                for (int i = ndec; i < 3; i++)
                        frac *= 10;
        }
        if (*p != 0)
                return -EINVAL;
        uint64_t m = whole * 1000 + frac;
        if (m == 0)
                return -ERANGE;
        *ret_millicpus = m;
        return 0;
}
