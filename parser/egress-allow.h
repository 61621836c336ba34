/* SPDX-License-Identifier: MIT */
/* The egress allowlist rule (contract section 2, network.allow; issue 21) and the address
 * classes the proxy refuses. An entry is one of:
 *   NAME:PORT          an exact host name, matched case-insensitively ("registry.npmjs.org:443")
 *   *.SUFFIX:PORT      every name below SUFFIX, never SUFFIX itself ("*.example.net:443");
 *                      SUFFIX has at least two labels (no "*.com")
 *   IPV4:PORT          an IPv4 literal ("192.0.2.7:8080")
 *   [IPV6]:PORT        an IPv6 literal ("[2001:db8::1]:443")
 * The port is required (1..65535, decimal, no sign or leading zero). A name is 1..253 bytes of
 * [a-z0-9.-] in labels of 1..63 that neither begin nor end with '-'; an all-digit last label
 * is refused (it would be an IP written as a name). A request for an IP literal matches only an
 * entry that lists that literal; a name never matches an IP entry, nor an IP a name entry.
 *
 * A name the proxy resolves must resolve only to public addresses: loopback, unspecified,
 * link-local, private (RFC 1918, ULA), shared (CGNAT), multicast, reserved (0.0.0.0/8,
 * 192.0.0.0/24, 198.18.0.0/15, 240.0.0.0/4 with broadcast; IPv6 outside 2000::/3) and IPv4
 * embedded in IPv6 (mapped, compatible, NAT64, 6to4) are refused, so an
 * allowlisted name cannot be pointed (DNS rebinding, /etc/hosts) at the host or its LAN. An
 * address listed literally is the operator's explicit choice and is exempt. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define EGRESS_NAME_MAX 253

typedef enum EgressAllowKind {
        EGRESS_ALLOW_NAME,     /* exact name */
        EGRESS_ALLOW_SUFFIX,   /* *.suffix: proper subdomains only */
        EGRESS_ALLOW_IP,       /* an address literal */
} EgressAllowKind;

typedef struct EgressAllow {
        EgressAllowKind kind;
        char name[EGRESS_NAME_MAX + 1];   /* lowercased name or suffix (without "*.") */
        int family;                       /* AF_INET or AF_INET6 for EGRESS_ALLOW_IP */
        uint8_t addr[16];                 /* network order; 4 bytes used for AF_INET */
        uint16_t port;
} EgressAllow;

/* A port: 1..65535, decimal, no sign or leading zero, in s[0..n). */
bool egress_port_parse(const char *s, size_t n, uint16_t *ret);
/* A requested host in s[0..n): the name rule above, lowercased into out, except that an
 * all-digit last label is let through (the caller tells an IPv4 literal by inet_pton; such a
 * "name" can never match a name entry). */
bool egress_host_parse(const char *s, size_t n, char out[static EGRESS_NAME_MAX + 1]);

/* An IPv6 address written without brackets in s[0..n), into ret (network order). */
bool egress_ipv6_parse(const char *s, size_t n, uint8_t ret[static 16]);

/* Parse one entry; -EINVAL with a static reason naming what is wrong. */
int egress_allow_parse(const char *s, EgressAllow *ret, const char **ret_reason);

/* Is host (a name, or an IP literal without brackets) at port allowed by list[0..n)? Names are
 * compared case-insensitively; a trailing dot is not accepted as the same name. */
bool egress_allow_match(const EgressAllow *list, size_t n, const char *host, uint16_t port);

/* Is this exact address and port (a sockaddr_in or sockaddr_in6) listed literally? */
bool egress_allow_lists_address(const EgressAllow *list, size_t n, const struct sockaddr *sa);

typedef enum EgressAddrClass {
        EGRESS_ADDR_PUBLIC,
        EGRESS_ADDR_LOOPBACK,
        EGRESS_ADDR_UNSPECIFIED,
        EGRESS_ADDR_LINK_LOCAL,
        EGRESS_ADDR_PRIVATE,
        EGRESS_ADDR_SHARED,      /* 100.64.0.0/10, carrier-grade NAT */
        EGRESS_ADDR_MULTICAST,
        EGRESS_ADDR_RESERVED,    /* see above; IPv6 outside 2000::/3 */
        EGRESS_ADDR_MAPPED,      /* ::ffff:0:0/96, ::/96, 64:ff9b::/96, 2002::/16 */
        _EGRESS_ADDR_MAX,
} EgressAddrClass;

/* The class of a sockaddr_in / sockaddr_in6 (anything else is EGRESS_ADDR_RESERVED). */
EgressAddrClass egress_addr_classify(const struct sockaddr *sa);
/* "public", "loopback", ...: for refusal reasons and audit lines. */
const char *egress_addr_class_name(EgressAddrClass c);
