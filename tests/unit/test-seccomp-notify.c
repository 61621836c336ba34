/* SPDX-License-Identifier: MIT */
/* capsule/seccomp-notify.c (issue 49, threat 25): the answers of the runc capsule's seccomp
 * listener. A refused call is answered EPERM and named; connect to loopback or the unspecified
 * address (which Linux connects to loopback), to a unix socket, with an address too short for
 * its family or unreadable goes on to the kernel unreported; connect to any other IPv4 or IPv6
 * address is answered ENETUNREACH and named; sendto with such an address is named and goes on
 * to the kernel; the address read is bounded (what the call says beyond
 * CAPSULE_NOTIFY_ADDR_MAX is never asked for). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include "capsule/seccomp-notify.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

static struct seccomp_notif req_of(int nr, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                                   uint64_t a5) {
        struct seccomp_notif r = { .id = 7, .pid = 1, .data = { .nr = nr, .arch = SCMP_ARCH_NATIVE } };
        const uint64_t a[6] = { a0, a1, a2, a3, a4, a5 };
        memcpy(r.data.args, a, sizeof(a));
        return r;
}

static struct sockaddr_in in4(const char *ip, unsigned port) {
        struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
        assert_int_equal(inet_pton(AF_INET, ip, &s.sin_addr), 1);
        return s;
}

static struct sockaddr_in6 in6(const char *ip, unsigned port) {
        struct sockaddr_in6 s = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t) port) };
        assert_int_equal(inet_pton(AF_INET6, ip, &s.sin6_addr), 1);
        return s;
}

/* connect(fd, addr, len) judged with len bytes of addr read (at most the bound). */
static SeccompVerdict judge_connect(const void *addr, size_t len) {
        struct seccomp_notif r = req_of(SYS_connect, 3, 0x7000, len, 0, 0, 0);
        uint64_t ptr;
        size_t n;
        SeccompVerdict v;
        assert_true(capsule_seccomp_notify_address(&r, &ptr, &n));
        assert_int_equal(ptr, 0x7000);
        assert_int_equal(n, MIN(len, (size_t) CAPSULE_NOTIFY_ADDR_MAX));
        capsule_seccomp_notify_judge(&r, addr, n, &v);
        return v;
}

static void assert_continued(SeccompVerdict v) {
        assert_true(v.cont);
        assert_null(v.wall);
}

static void test_refused_named(void **state) {
        (void) state;
        const char *names[] = { "unshare", "bpf", "keyctl", "fsopen", "perf_event_open", "ptrace", "setns" };
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                struct seccomp_notif r = req_of(seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, names[i]), 0, 0, 0,
                                                0, 0, 0);
                SeccompVerdict v;
                uint64_t ptr;
                size_t n;
                assert_false(capsule_seccomp_notify_address(&r, &ptr, &n));
                capsule_seccomp_notify_judge(&r, NULL, 0, &v);
                assert_false(v.cont);
                assert_int_equal(v.error, EPERM);
                assert_string_equal(v.wall, WALL_SYSCALL);
                assert_string_equal(v.detail, names[i]);
        }
        struct seccomp_notif r = req_of(SYS_clone, 0x10000000 | 17, 0, 0, 0, 0, 0);
        SeccompVerdict v;
        capsule_seccomp_notify_judge(&r, NULL, 0, &v);
        assert_int_equal(v.error, EPERM);
        assert_string_equal(v.detail, "clone with a namespace flag (new namespaces are refused)");
        /* a number libseccomp does not know: still refused, named by its number */
        r = req_of(4000, 0, 0, 0, 0, 0, 0);
        capsule_seccomp_notify_judge(&r, NULL, 0, &v);
        assert_int_equal(v.error, EPERM);
        assert_string_equal(v.detail, "system call 4000");
}

static void test_connect_unreachable(void **state) {
        (void) state;
        struct sockaddr_in a = in4("203.0.113.1", 443);
        SeccompVerdict v = judge_connect(&a, sizeof(a));
        assert_false(v.cont);
        assert_int_equal(v.error, ENETUNREACH);
        assert_string_equal(v.wall, WALL_NETWORK);
        assert_string_equal(v.detail, "direct connection to 203.0.113.1:443 (no route: only the proxy is reachable)");
        struct sockaddr_in6 b = in6("2001:db8::1", 80);
        v = judge_connect(&b, sizeof(b));
        assert_int_equal(v.error, ENETUNREACH);
        assert_string_equal(v.detail, "direct connection to [2001:db8::1]:80 (no route: only the proxy is reachable)");
        /* a v4-mapped address that is not loopback */
        b = in6("::ffff:192.0.2.5", 22);
        v = judge_connect(&b, sizeof(b));
        assert_int_equal(v.error, ENETUNREACH);
        assert_string_equal(v.detail, "direct connection to [::ffff:192.0.2.5]:22 (no route: only the proxy is reachable)");
        /* a longer length than the family's: only the bound read, the same answer */
        uint8_t big[64] = { 0 };
        memcpy(big, &a, sizeof(a));
        v = judge_connect(big, sizeof(big));
        assert_int_equal(v.error, ENETUNREACH);
}

static void test_connect_loopback(void **state) {
        (void) state;
        const char *v4[] = { "127.0.0.1", "127.1.2.3", "0.0.0.0" };
        for (size_t i = 0; i < ELEMENTSOF(v4); i++) {
                struct sockaddr_in a = in4(v4[i], 8080);
                assert_continued(judge_connect(&a, sizeof(a)));
        }
        const char *v6[] = { "::1", "::", "::ffff:127.0.0.1", "::ffff:0.0.0.0" };
        for (size_t i = 0; i < ELEMENTSOF(v6); i++) {
                struct sockaddr_in6 a = in6(v6[i], 8080);
                assert_continued(judge_connect(&a, sizeof(a)));
        }
        struct sockaddr_un u = { .sun_family = AF_UNIX, .sun_path = "/tmp/s" };
        assert_continued(judge_connect(&u, sizeof(u)));
        /* too short for its family (the kernel's EINVAL), or unreadable: the kernel decides */
        struct sockaddr_in a = in4("203.0.113.1", 443);
        assert_continued(judge_connect(&a, sizeof(a) - 1));
        struct sockaddr_in6 b = in6("2001:db8::1", 443);
        assert_continued(judge_connect(&b, sizeof(b) - 4));
        assert_continued(judge_connect(NULL, 0));
        struct seccomp_notif r = req_of(SYS_connect, 3, 0x7000, sizeof(a), 0, 0, 0);
        SeccompVerdict v;
        capsule_seccomp_notify_judge(&r, &a, 1, &v); /* one byte read of the call's sixteen */
        assert_continued(v);
}

static void test_sendto(void **state) {
        (void) state;
        struct sockaddr_in a = in4("198.51.100.7", 53);
        struct seccomp_notif r = req_of(SYS_sendto, 3, 0x1000, 10, 0, 0x7000, sizeof(a));
        uint64_t ptr;
        size_t n;
        SeccompVerdict v;
        assert_true(capsule_seccomp_notify_address(&r, &ptr, &n));
        assert_int_equal(ptr, 0x7000);
        assert_int_equal(n, sizeof(a));
        capsule_seccomp_notify_judge(&r, &a, n, &v);
        /* reported, and left to the kernel (whose namespace answers ENETUNREACH) */
        assert_true(v.cont);
        assert_string_equal(v.wall, WALL_NETWORK);
        assert_string_equal(v.detail, "datagram sent directly to 198.51.100.7:53 (no route: only the proxy is reachable)");
        a = in4("127.0.0.53", 53);
        capsule_seccomp_notify_judge(&r, &a, n, &v);
        assert_continued(v);
        /* no address: nothing to read */
        r = req_of(SYS_sendto, 3, 0x1000, 10, 0, 0, 0);
        assert_false(capsule_seccomp_notify_address(&r, &ptr, &n));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_refused_named),
                cmocka_unit_test(test_connect_unreachable),
                cmocka_unit_test(test_connect_loopback),
                cmocka_unit_test(test_sendto),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
