/* SPDX-License-Identifier: MIT */
/* The egress proxy's request-head parser (parser/egress-request.h): CONNECT targets, the
 * forward rewrite byte for byte, and every refusal the proxy relies on. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "parser/egress-request.h"
#include "tests/unit/lib/tfw-test.h"

static int parse_n(const char *s, size_t n, EgressRequest *r, const char **reason) {
        size_t consumed = 0;
        *r = (EgressRequest) {};
        int q = egress_request_parse(s, n, r, &consumed, reason);
        if (q == 0)
                assert_int_equal(consumed, n);
        return q;
}

static int parse(const char *s, EgressRequest *r, const char **reason) {
        return parse_n(s, strlen(s), r, reason);
}

static void refused(const char *s, const char *want_reason) {
        EgressRequest r;
        const char *reason = NULL;
        assert_int_equal(parse(s, &r, &reason), -EINVAL);
        assert_non_null(reason);
        if (want_reason)
                assert_string_equal(reason, want_reason);
        assert_null(r.head);
}

static void test_connect_name(void **state _unused_) {
        EgressRequest r;
        const char *reason = NULL;
        assert_int_equal(parse("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", &r, &reason), 0);
        assert_int_equal(r.kind, EGRESS_REQ_CONNECT);
        assert_string_equal(r.host, "example.com");
        assert_int_equal(r.port, 443);
        assert_null(r.head);
        egress_request_done(&r);
}

static void test_connect_v6(void **state _unused_) {
        EgressRequest r;
        const char *reason = NULL;
        assert_int_equal(parse("CONNECT [::1]:443 HTTP/1.1\r\n\r\n", &r, &reason), 0);
        assert_int_equal(r.kind, EGRESS_REQ_CONNECT);
        assert_string_equal(r.host, "::1");
        assert_int_equal(r.port, 443);
        refused("CONNECT [::g]:443 HTTP/1.1\r\n\r\n", "bad IPv6 literal");
        refused("CONNECT [::1]443 HTTP/1.1\r\n\r\n", NULL);
}

static void test_connect_uppercase(void **state _unused_) {
        EgressRequest r;
        const char *reason = NULL;
        assert_int_equal(parse("CONNECT Api.GitHub.COM:8443 HTTP/1.0\r\n\r\n", &r, &reason), 0);
        assert_string_equal(r.host, "api.github.com");
        assert_int_equal(r.port, 8443);
}

static void test_connect_ports(void **state _unused_) {
        EgressRequest r;
        const char *reason = NULL;
        refused("CONNECT example.com HTTP/1.1\r\n\r\n", "missing port");
        refused("CONNECT example.com: HTTP/1.1\r\n\r\n", "bad port");
        refused("CONNECT example.com:0 HTTP/1.1\r\n\r\n", "bad port");
        refused("CONNECT example.com:65536 HTTP/1.1\r\n\r\n", "bad port");
        refused("CONNECT example.com:0443 HTTP/1.1\r\n\r\n", "bad port");
        refused("CONNECT example.com:+443 HTTP/1.1\r\n\r\n", "bad port");
        assert_int_equal(parse("CONNECT example.com:65535 HTTP/1.1\r\n\r\n", &r, &reason), 0);
        assert_int_equal(r.port, 65535);
        assert_int_equal(parse("CONNECT example.com:1 HTTP/1.1\r\n\r\n", &r, &reason), 0);
        assert_int_equal(r.port, 1);
}

static void test_host_names(void **state _unused_) {
        char big[512];
        char label64[65];
        memset(label64, 'a', 64);
        label64[64] = 0;
        snprintf(big, sizeof(big), "CONNECT %s.example.com:443 HTTP/1.1\r\n\r\n", label64);
        refused(big, "bad host name");
        label64[63] = 0;        /* 63 is fine */
        snprintf(big, sizeof(big), "CONNECT %s.example.com:443 HTTP/1.1\r\n\r\n", label64);
        EgressRequest r;
        const char *reason = NULL;
        assert_int_equal(parse(big, &r, &reason), 0);
        refused("CONNECT a..b:443 HTTP/1.1\r\n\r\n", "bad host name");
        refused("CONNECT .a:443 HTTP/1.1\r\n\r\n", "bad host name");
        refused("CONNECT -a.example:443 HTTP/1.1\r\n\r\n", "bad host name");
        refused("CONNECT a-.example:443 HTTP/1.1\r\n\r\n", "bad host name");
        refused("CONNECT a_b.example:443 HTTP/1.1\r\n\r\n", "bad host name");
        refused("CONNECT a.:443 HTTP/1.1\r\n\r\n", "bad host name");
        refused("CONNECT a_b:443 HTTP/1.1\r\n\r\n", "bad host name");
        refused("CONNECT :443 HTTP/1.1\r\n\r\n", "bad host name");
        /* 254 bytes total: four 63-byte labels joined is 255. */
        char name[300];
        memset(name, 'a', 255);
        name[63] = name[127] = name[191] = '.';
        name[255] = 0;
        snprintf(big, sizeof(big), "CONNECT %s:443 HTTP/1.1\r\n\r\n", name);
        refused(big, "bad host name");
}

static void test_forward_rewrite(void **state _unused_) {
        EgressRequest r;
        const char *reason = NULL;
        const char *in =
                "GET http://Example.COM:8080/a/b?c=d HTTP/1.1\r\n"
                "Host: evil.example\r\n"
                "User-Agent: t/1\r\n"
                "Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"
                "proxy-connection: keep-alive\r\n"
                "Connection: keep-alive\r\n"
                "Keep-Alive: 5\r\n"
                "host: second.example\r\n"
                "Accept: */*\r\n"
                "\r\n";
        assert_int_equal(parse(in, &r, &reason), 0);
        assert_int_equal(r.kind, EGRESS_REQ_FORWARD);
        assert_string_equal(r.host, "example.com");
        assert_int_equal(r.port, 8080);
        const char *want =
                "GET /a/b?c=d HTTP/1.1\r\n"
                "User-Agent: t/1\r\n"
                "Accept: */*\r\n"
                "Host: example.com:8080\r\n"
                "Connection: close\r\n"
                "\r\n";
        assert_non_null(r.head);
        assert_int_equal(r.head_len, strlen(want));
        assert_memory_equal(r.head, want, strlen(want));
        assert_int_equal(r.head[r.head_len], 0);
        egress_request_done(&r);
        assert_null(r.head);

        /* Default port and path. */
        assert_int_equal(parse("HEAD http://example.com HTTP/1.0\r\n\r\n", &r, &reason), 0);
        assert_int_equal(r.port, 80);
        assert_string_equal(r.head, "HEAD / HTTP/1.0\r\nHost: example.com\r\nConnection: close\r\n\r\n");
        egress_request_done(&r);
        assert_int_equal(parse("POST http://[::1]:81?x HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &r, &reason), 0);
        assert_string_equal(r.host, "::1");
        assert_string_equal(r.head, "POST /?x HTTP/1.1\r\nContent-Length: 0\r\nHost: [::1]:81\r\nConnection: close\r\n\r\n");
        egress_request_done(&r);
}

static void test_forward_refusals(void **state _unused_) {
        refused("GET https://example.com/ HTTP/1.1\r\n\r\n", "https:// must use CONNECT");
        refused("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", NULL);
        refused("GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n", "userinfo in target");
        refused("GET http://example.com:0/ HTTP/1.1\r\n\r\n", "bad port");
        refused("GET ftp://example.com/ HTTP/1.1\r\n\r\n", NULL);
        refused("TRACE http://example.com/ HTTP/1.1\r\n\r\n", "method not allowed");
        refused("get http://example.com/ HTTP/1.1\r\n\r\n", "method not allowed");
        refused("BREW http://example.com/ HTTP/1.1\r\n\r\n", "method not allowed");
}

static void test_request_line(void **state _unused_) {
        refused("GET http://example.com/ HTTP/1.1\nHost: a\n\n", "bare LF");
        refused("GET http://example.com/ HTTP/1.1\r\nX: a\nY: b\r\n\r\n", "bare LF");
        refused(" GET http://example.com/ HTTP/1.1\r\n\r\n", "bad request line");
        refused("GET  http://example.com/ HTTP/1.1\r\n\r\n", "bad request line");
        refused("GET http://example.com/  HTTP/1.1\r\n\r\n", "bad request line");
        refused("GET http://example.com/ HTTP/2.0\r\n\r\n", "bad request line");
        refused("GET http://example.com/\r\n\r\n", "bad request line");
        refused("GET http://example.com/ HTTP/1.1\rX: y\r\n\r\n", "bare CR");
        refused("GET http://example.com/ HTTP/1.1\r\nX: \x01\r\n\r\n", "control byte");

        static const char nul[] = "GET http://exa\0mple.com/ HTTP/1.1\r\n\r\n";
        EgressRequest r;
        const char *reason = NULL;
        assert_int_equal(parse_n(nul, sizeof(nul) - 1, &r, &reason), -EINVAL);
        assert_string_equal(reason, "NUL byte");
}

static void test_headers(void **state _unused_) {
        refused("GET http://example.com/ HTTP/1.1\r\nX-A: 1\r\n folded\r\n\r\n", "obsolete line folding");
        refused("GET http://example.com/ HTTP/1.1\r\n\tX-A: 1\r\n\r\n", "obsolete line folding");
        refused("POST http://example.com/ HTTP/1.1\r\nContent-Length: 1\r\ncontent-length: 1\r\n\r\n",
                "duplicate Content-Length");
        refused("POST http://example.com/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n",
                "Transfer-Encoding with Content-Length");
        refused("CONNECT a.b:1 HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "Transfer-Encoding with Content-Length");
        refused("POST http://example.com/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", "bad Content-Length");
        refused("GET http://example.com/ HTTP/1.1\r\nNoColon\r\n\r\n", "bad header");
        refused("GET http://example.com/ HTTP/1.1\r\n: v\r\n\r\n", "bad header");
        refused("GET http://example.com/ HTTP/1.1\r\nBad Name: v\r\n\r\n", "bad header name");

        /* 100 headers pass, 101 do not. */
        char buf[4096];
        size_t n = (size_t) snprintf(buf, sizeof(buf), "GET http://example.com/ HTTP/1.1\r\n");
        for (int i = 0; i < 100; i++)
                n += (size_t) snprintf(buf + n, sizeof(buf) - n, "X-%d: v\r\n", i);
        memcpy(buf + n, "\r\n", 3);
        EgressRequest r;
        const char *reason = NULL;
        assert_int_equal(parse(buf, &r, &reason), 0);
        egress_request_done(&r);
        memcpy(buf + n, "Y: z\r\n\r\n", 9);
        refused(buf, "too many headers");
}

static void test_partial_and_too_big(void **state _unused_) {
        EgressRequest r = {};
        const char *reason = NULL;
        size_t consumed = 0;
        const char *full = "CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n";
        for (size_t i = 0; i < strlen(full); i++)
                assert_int_equal(egress_request_parse(full, i, &r, &consumed, &reason), -EAGAIN);
        assert_int_equal(egress_request_parse(full, 0, &r, &consumed, &reason), -EAGAIN);

        /* Bytes after the head (a pipelined body) are not consumed. */
        char extra[128];
        snprintf(extra, sizeof(extra), "%sBODY", full);
        assert_int_equal(egress_request_parse(extra, strlen(extra), &r, &consumed, &reason), 0);
        assert_int_equal(consumed, strlen(full));

        /* 16 KiB with no terminator. */
        _cleanup_free_ char *big = malloc(EGRESS_HEAD_MAX + 10);
        assert_non_null(big);
        size_t n = (size_t) snprintf(big, 64, "GET http://example.com/ HTTP/1.1\r\nX: ");
        memset(big + n, 'a', EGRESS_HEAD_MAX + 10 - n);
        assert_int_equal(egress_request_parse(big, EGRESS_HEAD_MAX - 1, &r, &consumed, &reason), -EAGAIN);
        assert_int_equal(egress_request_parse(big, EGRESS_HEAD_MAX, &r, &consumed, &reason), -E2BIG);
        assert_int_equal(egress_request_parse(big, EGRESS_HEAD_MAX + 10, &r, &consumed, &reason), -E2BIG);

        /* A terminator just past the limit is still too big; one ending exactly at it is fine. */
        memcpy(big + EGRESS_HEAD_MAX - 3, "\r\n\r\n", 4);
        assert_int_equal(egress_request_parse(big, EGRESS_HEAD_MAX + 10, &r, &consumed, &reason), -E2BIG);
        memcpy(big + EGRESS_HEAD_MAX - 4, "\r\n\r\n", 4);
        assert_int_equal(egress_request_parse(big, EGRESS_HEAD_MAX + 10, &r, &consumed, &reason), 0);
        assert_int_equal(consumed, EGRESS_HEAD_MAX);
        egress_request_done(&r);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_connect_name),
                cmocka_unit_test(test_connect_v6),
                cmocka_unit_test(test_connect_uppercase),
                cmocka_unit_test(test_connect_ports),
                cmocka_unit_test(test_host_names),
                cmocka_unit_test(test_forward_rewrite),
                cmocka_unit_test(test_forward_refusals),
                cmocka_unit_test(test_request_line),
                cmocka_unit_test(test_headers),
                cmocka_unit_test(test_partial_and_too_big),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
