/* SPDX-License-Identifier: MIT */
/* The egress allowlist rule and the refused address classes: see egress-allow.h. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <strings.h>

#include "common/macro.h"
#include "parser/egress-allow.h"

bool egress_port_parse(const char *s, size_t n, uint16_t *ret) {
        if (n < 1 || n > 5 || s[0] < '1' || s[0] > '9')
                return false;
        unsigned v = 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return false;
                v = v * 10 + (unsigned) (s[i] - '0');
        }
        if (v > 65535)
                return false;
        *ret = (uint16_t) v;
        return true;
}

bool egress_ipv6_parse(const char *s, size_t n, uint8_t ret[static 16]) {
        char tmp[INET6_ADDRSTRLEN];
        if (n == 0 || n >= sizeof tmp)
                return false;
        memcpy(tmp, s, n);
        tmp[n] = 0;
        return inet_pton(AF_INET6, tmp, ret) == 1;
}

/* The name rule of egress-allow.h, lowercased into out; *ret_numeric says whether the last
 * label is all digits (an IPv4 literal's shape). */
static int parse_name(const char *s, size_t len, char out[static EGRESS_NAME_MAX + 1], bool *ret_numeric) {
        if (len == 0 || len > EGRESS_NAME_MAX)
                return -EINVAL;
        size_t label = 0;
        bool all_digits = true;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                if (c >= 'A' && c <= 'Z')
                        c = (char) (c - 'A' + 'a');
                if (c == '.') {
                        if (label == 0 || out[i - 1] == '-')
                                return -EINVAL;
                        label = 0;
                        all_digits = true;
                } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') {
                        if (c == '-' && label == 0)
                                return -EINVAL;
                        if (++label > 63)
                                return -EINVAL;
                        if (c < '0' || c > '9')
                                all_digits = false;
                } else
                        return -EINVAL;
                out[i] = c;
        }
        if (label == 0 || out[len - 1] == '-')
                return -EINVAL;
        out[len] = 0;
        *ret_numeric = all_digits;
        return 0;
}

bool egress_host_parse(const char *s, size_t n, char out[static EGRESS_NAME_MAX + 1]) {
        bool numeric;
        return parse_name(s, n, out, &numeric) == 0;
}

static int parse_allow_name(const char *s, size_t len, char out[static EGRESS_NAME_MAX + 1]) {
        bool numeric;
        if (parse_name(s, len, out, &numeric) < 0 || numeric)
                return -EINVAL;
        return 0;
}

int egress_allow_parse(const char *s, EgressAllow *ret, const char **ret_reason) {
        EgressAllow a = {0};
        const char *colon;
        size_t hlen;

        *ret_reason = NULL;
        if (s[0] == '[') {
                const char *close = strchr(s, ']');
                if (!close || close[1] != ':') {
                        *ret_reason = "an IPv6 literal is written [ADDRESS]:PORT";
                        return -EINVAL;
                }
                if (!egress_ipv6_parse(s + 1, (size_t) (close - s - 1), a.addr)) {
                        *ret_reason = "not an IPv6 address";
                        return -EINVAL;
                }
                a.kind = EGRESS_ALLOW_IP;
                a.family = AF_INET6;
                colon = close + 1;
        } else {
                colon = strrchr(s, ':');
                if (!colon) {
                        *ret_reason = "the port is required (HOST:PORT)";
                        return -EINVAL;
                }
                hlen = (size_t) (colon - s);
                if (hlen > EGRESS_NAME_MAX + 2) {
                        *ret_reason = "the host is longer than 253 bytes";
                        return -EINVAL;
                }
                char ip[INET_ADDRSTRLEN] = "";
                if (hlen < sizeof ip)
                        memcpy(ip, s, hlen);
                if (inet_pton(AF_INET, ip, a.addr) == 1) {
                        a.kind = EGRESS_ALLOW_IP;
                        a.family = AF_INET;
                } else if (hlen > 2 && s[0] == '*' && s[1] == '.') {
                        a.kind = EGRESS_ALLOW_SUFFIX;
                        if (parse_allow_name(s + 2, hlen - 2, a.name) < 0) {
                                *ret_reason = "*.SUFFIX needs a host name after \"*.\"";
                                return -EINVAL;
                        }
                        /* "*.com" would allow a whole top-level domain, every name in it ours
                         * to choose (and to fill with data in its labels). */
                        if (!strchr(a.name, '.')) {
                                *ret_reason = "*.SUFFIX needs at least two labels (*.example.com), not a top-level domain";
                                return -EINVAL;
                        }
                } else {
                        a.kind = EGRESS_ALLOW_NAME;
                        if (parse_allow_name(s, hlen, a.name) < 0) {
                                *ret_reason = strchr(s, '*') ? "a wildcard is only \"*.\" at the start"
                                                             : "not a host name, IPv4 or [IPv6] literal";
                                return -EINVAL;
                        }
                }
        }
        if (!egress_port_parse(colon + 1, strlen(colon + 1), &a.port)) {
                *ret_reason = "the port must be 1..65535 (decimal, no leading zero)";
                return -EINVAL;
        }
        *ret = a;
        return 0;
}

static bool name_matches(const EgressAllow *a, const char *host, size_t hlen) {
        if (a->kind == EGRESS_ALLOW_NAME)
                return strcasecmp(a->name, host) == 0;
        size_t slen = strlen(a->name);
        return hlen > slen + 1 && host[hlen - slen - 1] == '.' &&
               strcasecmp(host + hlen - slen, a->name) == 0;
}

bool egress_allow_match(const EgressAllow *list, size_t n, const char *host, uint16_t port) {
        uint8_t addr[16];
        int family = 0;
        if (inet_pton(AF_INET, host, addr) == 1)
                family = AF_INET;
        else if (inet_pton(AF_INET6, host, addr) == 1)
                family = AF_INET6;

        size_t hlen = strlen(host);
        for (size_t i = 0; i < n; i++) {
                const EgressAllow *a = &list[i];
                if (a->port != port)
                        continue;
                if (family != 0) {
                        if (a->kind == EGRESS_ALLOW_IP && a->family == family &&
                            memcmp(a->addr, addr, family == AF_INET ? 4 : 16) == 0)
                                return true;
                } else if (a->kind != EGRESS_ALLOW_IP && name_matches(a, host, hlen))
                        return true;
        }
        return false;
}

bool egress_allow_lists_address(const EgressAllow *list, size_t n, const struct sockaddr *sa) {
        const void *addr;
        uint16_t port;
        if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
                addr = &in->sin_addr;
                port = ntohs(in->sin_port);
        } else if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
                addr = &in6->sin6_addr;
                port = ntohs(in6->sin6_port);
        } else
                return false;
        for (size_t i = 0; i < n; i++)
                if (list[i].kind == EGRESS_ALLOW_IP && list[i].family == sa->sa_family &&
                    list[i].port == port &&
                    memcmp(list[i].addr, addr, sa->sa_family == AF_INET ? 4 : 16) == 0)
                        return true;
        return false;
}

static EgressAddrClass classify_v4(uint32_t a) {
        uint8_t o1 = (uint8_t) (a >> 24), o2 = (uint8_t) (a >> 16);
        if (a == 0)
                return EGRESS_ADDR_UNSPECIFIED;
        if (o1 == 127)
                return EGRESS_ADDR_LOOPBACK;
        if (o1 == 10 || (o1 == 172 && (o2 & 0xf0) == 16) || (o1 == 192 && o2 == 168))
                return EGRESS_ADDR_PRIVATE;
        if (o1 == 169 && o2 == 254)
                return EGRESS_ADDR_LINK_LOCAL;
        if (o1 == 100 && (o2 & 0xc0) == 64)
                return EGRESS_ADDR_SHARED;
        if (o1 >= 224 && o1 <= 239)
                return EGRESS_ADDR_MULTICAST;
        if (o1 == 0 || o1 >= 240 || (o1 == 192 && o2 == 0 && (uint8_t) (a >> 8) == 0) ||
            (o1 == 198 && (o2 & 0xfe) == 18))
                return EGRESS_ADDR_RESERVED;
        return EGRESS_ADDR_PUBLIC;
}

static EgressAddrClass classify_v6(const uint8_t b[16]) {
        static const uint8_t zero[16] = {0};
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
        if (memcmp(b, zero, 16) == 0)
                return EGRESS_ADDR_UNSPECIFIED;
        if (memcmp(b, zero, 15) == 0 && b[15] == 1)
                return EGRESS_ADDR_LOOPBACK;
        if (memcmp(b, mapped, 12) == 0 || memcmp(b, nat64, 12) == 0 || memcmp(b, zero, 12) == 0 ||
            (b[0] == 0x20 && b[1] == 0x02))
                return EGRESS_ADDR_MAPPED;
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
                return EGRESS_ADDR_LINK_LOCAL;
        if ((b[0] & 0xfe) == 0xfc)
                return EGRESS_ADDR_PRIVATE;
        if (b[0] == 0xff)
                return EGRESS_ADDR_MULTICAST;
        if ((b[0] & 0xe0) != 0x20)
                return EGRESS_ADDR_RESERVED;
        return EGRESS_ADDR_PUBLIC;
}

EgressAddrClass egress_addr_classify(const struct sockaddr *sa) {
        if (sa->sa_family == AF_INET)
                return classify_v4(ntohl(((const struct sockaddr_in *) sa)->sin_addr.s_addr));
        if (sa->sa_family == AF_INET6)
                return classify_v6(((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr);
        return EGRESS_ADDR_RESERVED;
}

const char *egress_addr_class_name(EgressAddrClass c) {
        static const char *const names[_EGRESS_ADDR_MAX] = {
                [EGRESS_ADDR_PUBLIC] = "public",
                [EGRESS_ADDR_LOOPBACK] = "loopback",
                [EGRESS_ADDR_UNSPECIFIED] = "unspecified",
                [EGRESS_ADDR_LINK_LOCAL] = "link-local",
                [EGRESS_ADDR_PRIVATE] = "private",
                [EGRESS_ADDR_SHARED] = "shared (carrier-grade NAT)",
                [EGRESS_ADDR_MULTICAST] = "multicast",
                [EGRESS_ADDR_RESERVED] = "reserved",
                [EGRESS_ADDR_MAPPED] = "IPv4 embedded in IPv6",
        };
        return c < _EGRESS_ADDR_MAX ? names[c] : "reserved";
}
