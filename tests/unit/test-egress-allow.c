/* SPDX-License-Identifier: MIT */
/* The egress allowlist rule and address classes (parser/egress-allow.h): which entries parse,
 * what each matches and never matches, and that every address class a name could be pointed at
 * to reach the host or its network is refused. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "parser/egress-allow.h"
#include "tests/unit/lib/tfw-test.h"

static EgressAllow parse_ok(const char *s) {
        EgressAllow a;
        const char *reason = "unset";
        if (egress_allow_parse(s, &a, &reason) != 0)
                fail_msg("'%s' refused: %s", s, reason);
        assert_null(reason);
        return a;
}

static void test_parse_accepts(void **state) {
        (void) state;
        EgressAllow a = parse_ok("Registry.NPMjs.org:443");
        assert_int_equal(a.kind, EGRESS_ALLOW_NAME);
        assert_string_equal(a.name, "registry.npmjs.org");
        assert_int_equal(a.port, 443);

        a = parse_ok("*.example.net:8443");
        assert_int_equal(a.kind, EGRESS_ALLOW_SUFFIX);
        assert_string_equal(a.name, "example.net");
        assert_int_equal(a.port, 8443);

        a = parse_ok("127.0.0.1:65535");
        assert_int_equal(a.kind, EGRESS_ALLOW_IP);
        assert_int_equal(a.family, AF_INET);
        assert_int_equal(a.port, 65535);

        a = parse_ok("[::1]:1");
        assert_int_equal(a.kind, EGRESS_ALLOW_IP);
        assert_int_equal(a.family, AF_INET6);
        assert_int_equal(a.addr[15], 1);

        a = parse_ok("localhost:80");
        assert_int_equal(a.kind, EGRESS_ALLOW_NAME);

        char name[300];   /* 4 labels of 63 and one of 1: 253 bytes, the longest name */
        snprintf(name, sizeof name, "%.63s.%.63s.%.63s.%.59s.a:1",
                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
                 "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc",
                 "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd");
        assert_int_equal(strlen(name), 253 + 2);
        parse_ok(name);
}

static void test_parse_refuses(void **state) {
        (void) state;
        static const char *const bad[] = {
                "example.org",          /* no port */
                "example.org:",         /* empty port */
                "example.org:0",        /* port 0 */
                "example.org:65536",    /* over 65535 */
                "example.org:0443",     /* leading zero */
                "example.org:+443",     /* sign */
                "example.org:44 3",     /* space */
                "example.org:123456",   /* too many digits */
                ":443",                 /* no host */
                "*:443",                /* bare wildcard */
                "*.:443",               /* empty suffix */
                "*.*.example.org:443",  /* two wildcards */
                "*.com:443",            /* a whole top-level domain */
                "a*.example.org:443",   /* wildcard inside a label */
                "example.*:443",        /* wildcard at the end */
                "ex ample.org:443",     /* space in a name */
                "example..org:443",     /* empty label */
                ".example.org:443",     /* leading dot */
                "example.org.:443",     /* trailing dot */
                "-example.org:443",     /* label starting with '-' */
                "example-.org:443",     /* label ending with '-' */
                "exa_mple.org:443",     /* underscore */
                "1.2.3:443",            /* an IP written as a name */
                "01.2.3.4:443",         /* leading zero in an IPv4 literal */
                "1.2.3.256:443",        /* not an IPv4 */
                "::1:443",              /* IPv6 without brackets */
                "[::1]443",             /* no ':' after ']' */
                "[]:443",               /* empty brackets */
                "[example.org]:443",    /* a name in brackets */
                "[::1:443",             /* no ']' */
                "user@example.org:443", /* userinfo */
                "",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                EgressAllow a;
                const char *reason = NULL;
                if (egress_allow_parse(bad[i], &a, &reason) != -EINVAL)
                        fail_msg("'%s' was accepted", bad[i]);
                if (!reason || !*reason)
                        fail_msg("'%s' refused without a reason", bad[i]);
        }
        char label[80];
        memset(label, 'a', 64);
        strcpy(label + 64, ".org:443");   /* a 64-byte label */
        EgressAllow a;
        const char *reason;
        assert_int_equal(egress_allow_parse(label, &a, &reason), -EINVAL);
        char longname[400];   /* 255 bytes of labels: over 253 */
        memset(longname, 'a', 255);
        for (int i = 60; i < 255; i += 61)
                longname[i] = '.';
        strcpy(longname + 255, ":443");
        assert_int_equal(egress_allow_parse(longname, &a, &reason), -EINVAL);
}

static void test_match(void **state) {
        (void) state;
        EgressAllow list[] = {
                parse_ok("registry.npmjs.org:443"),
                parse_ok("*.example.net:443"),
                parse_ok("127.0.0.1:8080"),
                parse_ok("[2001:db8::7]:443"),
        };
        size_t n = ELEMENTSOF(list);
        assert_true(egress_allow_match(list, n, "registry.npmjs.org", 443));
        assert_true(egress_allow_match(list, n, "REGISTRY.npmjs.ORG", 443));
        assert_false(egress_allow_match(list, n, "registry.npmjs.org", 80));     /* other port */
        assert_false(egress_allow_match(list, n, "x.registry.npmjs.org", 443));  /* exact only */
        assert_false(egress_allow_match(list, n, "registry.npmjs.org.evil", 443));
        assert_false(egress_allow_match(list, n, "registry.npmjs.org.", 443));   /* trailing dot */

        assert_true(egress_allow_match(list, n, "a.example.net", 443));
        assert_true(egress_allow_match(list, n, "a.b.example.net", 443));
        assert_false(egress_allow_match(list, n, "example.net", 443));   /* suffix itself */
        assert_false(egress_allow_match(list, n, "badexample.net", 443));
        assert_false(egress_allow_match(list, n, ".example.net", 443));
        assert_false(egress_allow_match(list, n, "a.example.net", 444));

        assert_true(egress_allow_match(list, n, "127.0.0.1", 8080));
        assert_false(egress_allow_match(list, n, "127.0.0.1", 443));
        assert_false(egress_allow_match(list, n, "127.0.0.2", 8080));
        assert_true(egress_allow_match(list, n, "2001:db8::7", 443));
        assert_true(egress_allow_match(list, n, "2001:DB8:0::7", 443));   /* same address */
        assert_false(egress_allow_match(list, n, "2001:db8::8", 443));
        assert_false(egress_allow_match(list, n, "::ffff:127.0.0.1", 8080));   /* mapped */

        /* A name is never matched by an IP entry, an IP never by a name entry. */
        EgressAllow names[] = {parse_ok("*.in-addr.arpa:443"), parse_ok("localhost:8080")};
        assert_false(egress_allow_match(names, 2, "127.0.0.1", 8080));
        assert_false(egress_allow_match(list, 3, "localhost", 8080));
        assert_false(egress_allow_match(list, 0, "registry.npmjs.org", 443));
}

static struct sockaddr_storage sa(const char *ip, uint16_t port) {
        struct sockaddr_storage ss = {0};
        struct sockaddr_in *in = (struct sockaddr_in *) &ss;
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
        if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
                in->sin_family = AF_INET;
                in->sin_port = htons(port);
        } else {
                assert_int_equal(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
                in6->sin6_family = AF_INET6;
                in6->sin6_port = htons(port);
        }
        return ss;
}

static void test_lists_address(void **state) {
        (void) state;
        EgressAllow list[] = {parse_ok("127.0.0.1:8080"), parse_ok("[::1]:8081"),
                              parse_ok("localhost:8082")};
        struct sockaddr_storage s = sa("127.0.0.1", 8080);
        assert_true(egress_allow_lists_address(list, 3, (struct sockaddr *) &s));
        s = sa("127.0.0.1", 8081);
        assert_false(egress_allow_lists_address(list, 3, (struct sockaddr *) &s));
        s = sa("::1", 8081);
        assert_true(egress_allow_lists_address(list, 3, (struct sockaddr *) &s));
        s = sa("127.0.0.1", 8082);   /* a name entry never exempts its address */
        assert_false(egress_allow_lists_address(list, 3, (struct sockaddr *) &s));
        s = sa("::ffff:127.0.0.1", 8080);
        assert_false(egress_allow_lists_address(list, 3, (struct sockaddr *) &s));
}

static void test_classify(void **state) {
        (void) state;
        static const struct {
                const char *ip;
                EgressAddrClass c;
        } cases[] = {
                {"93.184.216.34", EGRESS_ADDR_PUBLIC},
                {"8.8.8.8", EGRESS_ADDR_PUBLIC},
                {"172.32.0.1", EGRESS_ADDR_PUBLIC},
                {"100.128.0.1", EGRESS_ADDR_PUBLIC},
                {"2606:4700::1111", EGRESS_ADDR_PUBLIC},
                {"127.0.0.1", EGRESS_ADDR_LOOPBACK},
                {"127.255.255.254", EGRESS_ADDR_LOOPBACK},
                {"::1", EGRESS_ADDR_LOOPBACK},
                {"0.0.0.0", EGRESS_ADDR_UNSPECIFIED},
                {"::", EGRESS_ADDR_UNSPECIFIED},
                {"0.1.2.3", EGRESS_ADDR_RESERVED},
                {"10.0.0.1", EGRESS_ADDR_PRIVATE},
                {"172.16.0.1", EGRESS_ADDR_PRIVATE},
                {"172.31.255.255", EGRESS_ADDR_PRIVATE},
                {"192.168.1.1", EGRESS_ADDR_PRIVATE},
                {"fd00::1", EGRESS_ADDR_PRIVATE},
                {"fc00::1", EGRESS_ADDR_PRIVATE},
                {"169.254.169.254", EGRESS_ADDR_LINK_LOCAL},
                {"fe80::1", EGRESS_ADDR_LINK_LOCAL},
                {"100.64.0.1", EGRESS_ADDR_SHARED},
                {"100.127.255.255", EGRESS_ADDR_SHARED},
                {"224.0.0.1", EGRESS_ADDR_MULTICAST},
                {"239.255.255.250", EGRESS_ADDR_MULTICAST},
                {"ff02::1", EGRESS_ADDR_MULTICAST},
                {"240.0.0.1", EGRESS_ADDR_RESERVED},
                {"255.255.255.255", EGRESS_ADDR_RESERVED},
                {"192.0.0.8", EGRESS_ADDR_RESERVED},
                {"198.18.0.1", EGRESS_ADDR_RESERVED},
                {"198.19.255.255", EGRESS_ADDR_RESERVED},
                {"::ffff:127.0.0.1", EGRESS_ADDR_MAPPED},
                {"::ffff:10.0.0.1", EGRESS_ADDR_MAPPED},
                {"::127.0.0.1", EGRESS_ADDR_MAPPED},
                {"64:ff9b::7f00:1", EGRESS_ADDR_MAPPED},
                {"2002:7f00:1::1", EGRESS_ADDR_MAPPED},
                {"100::1", EGRESS_ADDR_RESERVED},
                {"fec0::1", EGRESS_ADDR_RESERVED},
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct sockaddr_storage s = sa(cases[i].ip, 443);
                EgressAddrClass c = egress_addr_classify((struct sockaddr *) &s);
                if (c != cases[i].c)
                        fail_msg("%s: %s, expected %s", cases[i].ip, egress_addr_class_name(c),
                                 egress_addr_class_name(cases[i].c));
        }
        struct sockaddr_storage un = {.ss_family = AF_UNIX};
        assert_int_equal(egress_addr_classify((struct sockaddr *) &un), EGRESS_ADDR_RESERVED);
        for (int c = 0; c < _EGRESS_ADDR_MAX; c++)
                assert_non_null(egress_addr_class_name((EgressAddrClass) c));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_accepts),
                cmocka_unit_test(test_parse_refuses),
                cmocka_unit_test(test_match),
                cmocka_unit_test(test_lists_address),
                cmocka_unit_test(test_classify),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
