/* SPDX-License-Identifier: MIT */
/* capsule/egress.c: the worker's reading of its egress proxy's records (threat 16: a proxy the
 * job took over can write anything there, and root reads it). Every shape the wire allows is
 * taken and re-made; every other line is refused; the sums and the kept lines of a whole
 * records stream; and the host's route check. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/egress-wire.h"
#include "capsule/egress.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

#define OK_CONNECT                                                                                           \
        "{\"kind\":\"connect\",\"host\":\"registry.npmjs.org\",\"port\":443,\"address\":\"104.16.1.34\","     \
        "\"verdict\":\"allowed\",\"reason\":null,\"detail\":null,\"bytes_up\":1840,\"bytes_down\":2345678,"  \
        "\"duration_ms\":812}"
#define OK_REFUSED                                                                                           \
        "{\"kind\":\"forward\",\"host\":\"127.0.0.1\",\"port\":18081,\"address\":null,\"verdict\":\"refused\"," \
        "\"reason\":\"not_allowed\",\"detail\":\"127.0.0.1:18081 is not on network.allow\",\"bytes_up\":0,"   \
        "\"bytes_down\":210,\"duration_ms\":0}"

static int parse(const char *line, json_t **ret) {
        return egress_record_parse(line, strlen(line), ret);
}

static void test_accepted(void **state) {
        (void) state;
        static const char *const good[] = {
                OK_CONNECT,
                OK_REFUSED,
                /* an IPv6 literal host, a cut word on an allowed connection */
                "{\"kind\":\"connect\",\"host\":\"2001:db8::1\",\"port\":443,\"address\":\"2001:db8::1\","
                "\"verdict\":\"allowed\",\"reason\":\"upload_limit\",\"detail\":\"spent\",\"bytes_up\":1048576,"
                "\"bytes_down\":0,\"duration_ms\":3}",
                /* nothing understood */
                "{\"kind\":null,\"host\":null,\"port\":null,\"address\":null,\"verdict\":\"refused\","
                "\"reason\":\"no_request\",\"detail\":\"ended\",\"bytes_up\":0,\"bytes_down\":0,\"duration_ms\":1}",
                /* keys in another order, a refused address named */
                "{\"verdict\":\"refused\",\"reason\":\"address_refused\",\"port\":80,\"kind\":\"forward\","
                "\"host\":\"evil.test\",\"address\":\"127.0.0.1\",\"detail\":\"evil.test resolves to loopback\","
                "\"bytes_up\":0,\"bytes_down\":150,\"duration_ms\":2}",
        };
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                json_t *rec = NULL;
                if (parse(good[i], &rec) != 0)
                        fail_msg("refused: %s", good[i]);
                assert_int_equal(json_object_size(rec), 10);
                json_decref(rec);
        }
        /* What comes back is the worker's own serialisation of the same values. */
        json_t *rec = NULL;
        assert_int_equal(parse(OK_CONNECT, &rec), 0);
        _cleanup_free_ char *text = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
        assert_string_equal(text, "{\"address\":\"104.16.1.34\",\"bytes_down\":2345678,\"bytes_up\":1840,\"detail\":null,"
                                  "\"duration_ms\":812,\"host\":\"registry.npmjs.org\",\"kind\":\"connect\",\"port\":443,"
                                  "\"reason\":null,\"verdict\":\"allowed\"}");
        json_decref(rec);
}

static void test_refused(void **state) {
        (void) state;
        char big[EGRESS_RECORD_MAX + 64], detail[EGRESS_DETAIL_MAX + 2];
        memset(detail, 'd', sizeof(detail) - 1);
        detail[sizeof(detail) - 1] = 0;
        snprintf(big, sizeof(big),
                 "{\"kind\":null,\"host\":null,\"port\":null,\"address\":null,\"verdict\":\"refused\","
                 "\"reason\":\"no_request\",\"detail\":\"%s\",\"bytes_up\":0,\"bytes_down\":0,\"duration_ms\":1}",
                 detail);
        const char *const bad[] = {
                "",
                "null",
                "[]",
                "{}",
                OK_CONNECT " " OK_CONNECT,
                /* a key missing, one more, one twice */
                "{\"kind\":\"connect\",\"host\":\"a.example\",\"port\":443,\"address\":\"192.0.2.1\",\"verdict\":\"allowed\","
                "\"reason\":null,\"detail\":null,\"bytes_up\":0,\"bytes_down\":0}",
                "{\"kind\":\"connect\",\"host\":\"a.example\",\"port\":443,\"address\":\"192.0.2.1\",\"verdict\":\"allowed\","
                "\"reason\":null,\"detail\":null,\"bytes_up\":0,\"bytes_down\":0,\"duration_ms\":1,\"x\":1}",
                "{\"kind\":\"connect\",\"kind\":\"connect\",\"host\":\"a.example\",\"port\":443,\"address\":\"192.0.2.1\","
                "\"verdict\":\"allowed\",\"reason\":null,\"detail\":null,\"bytes_up\":0,\"bytes_down\":0,\"duration_ms\":1}",
#define REC(kind, host, port, addr, verdict, reason, detail, up, down, ms)                                     \
        "{\"kind\":" kind ",\"host\":" host ",\"port\":" port ",\"address\":" addr ",\"verdict\":" verdict         \
        ",\"reason\":" reason ",\"detail\":" detail ",\"bytes_up\":" up ",\"bytes_down\":" down ",\"duration_ms\":" ms "}"
                REC("\"tunnel\"", "\"a.example\"", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "\"192.0.2.1\"", "\"ok\"", "null", "null", "0", "0", "1"),
                /* a refusal word on an allowed connection, a cut word on a refused one, none */
                REC("\"connect\"", "\"a.example\"", "443", "\"192.0.2.1\"", "\"allowed\"", "\"not_allowed\"", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "null", "\"refused\"", "\"idle_timeout\"", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "null", "\"refused\"", "null", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "null", "\"refused\"", "\"because\"", "null", "0", "0", "1"),
                /* an allowed connection that went nowhere known */
                REC("\"connect\"", "null", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "null", "\"allowed\"", "null", "null", "0", "0", "1"),
                /* hosts, ports, addresses, counts, details out of shape */
                REC("\"connect\"", "\"a example\"", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\\n\"", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "0", "0", "1"),
                REC("\"connect\"", "7", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "0", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "65536", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "\"443\"", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "\"a.example\"", "\"allowed\"", "null", "null", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "-1", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "0", "9007199254740993", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "null", "0", "0", "1.5"),
                REC("\"connect\"", "\"a.example\"", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "\"line\\nbreak\"", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "\"caf\\u00e9\"", "0", "0", "1"),
                REC("\"connect\"", "\"a.example\"", "443", "\"192.0.2.1\"", "\"allowed\"", "null", "7", "0", "0", "1"),
                big,
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_t *rec = NULL;
                if (parse(bad[i], &rec) != -EBADMSG)
                        fail_msg("taken: %s", bad[i]);
                assert_null(rec);
        }
        /* A NUL inside, and a line of EGRESS_RECORD_MAX bytes or more. */
        char nul[] = OK_CONNECT;
        json_t *rec = NULL;
        nul[10] = 0;
        assert_int_equal(egress_record_parse(nul, sizeof(nul) - 1, &rec), -EBADMSG);
        char *huge = malloc(EGRESS_RECORD_MAX);
        memset(huge, ' ', EGRESS_RECORD_MAX);
        memcpy(huge, OK_CONNECT, strlen(OK_CONNECT));
        assert_int_equal(egress_record_parse(huge, EGRESS_RECORD_MAX, &rec), -EBADMSG);
        free(huge);
}

/* A whole records stream (the pipe of a proxy that has ended): every good line counted and kept
 * in the worker's serialisation, the first bad one ends the reading and is said. */
static void test_finish(void **state) {
        (void) state;
        int p[2];
        EgressProxy ep;
        EgressSummary s = {};
        egress_proxy_init(&ep);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        const char *stream = OK_CONNECT "\n" OK_REFUSED "\n" "{\"ready\":true}\n" OK_CONNECT "\n";
        assert_int_equal(write_all(p[1], stream, strlen(stream)), 0);
        close(p[1]);
        ep.records = p[0];
        _cleanup_close_ int out = memfd_create("records", MFD_CLOEXEC);
        egress_proxy_finish(&ep, out, &s);
        assert_true(s.enabled);
        assert_int_equal(s.connections, 2);
        assert_int_equal(s.allowed, 1);
        assert_int_equal(s.refused, 1);
        assert_int_equal(s.bytes_up, 1840);
        assert_int_equal(s.bytes_down, 2345678 + 210);
        assert_string_equal(s.error, "egress_records");
        assert_non_null(strstr(s.message, "record 3"));
        assert_true(ep.records < 0);
        _cleanup_free_ char *kept = NULL;
        size_t n;
        assert_int_equal(lseek(out, 0, SEEK_SET), 0);
        assert_int_equal(read_full_fd_bounded(out, 1 << 16, &kept, &n), 0);
        assert_int_equal(strchr(kept, '\n') - kept + 1 + strchr(strchr(kept, '\n') + 1, '\n') - strchr(kept, '\n'), (long) n);

        /* What result.json shows of it: the allowlist and bounds of the config, the connections. */
        char *allow[] = { (char *) "registry.npmjs.org:443", NULL };
        Config c = { .network = { .allow = allow, .n_allow = 1, .max_upload_bytes = 1 << 20, .max_download_bytes = 1 << 30 } };
        _cleanup_(json_decrefp) json_t *j = egress_result_json(&c, &s, out);
        assert_non_null(j);
        assert_int_equal(json_array_size(json_object_get(j, "connections")), 2);
        assert_string_equal(json_string_value(json_array_get(json_object_get(j, "allow"), 0)), "registry.npmjs.org:443");
        assert_int_equal(json_integer_value(json_object_get(j, "refused")), 1);
        assert_non_null(json_string_value(json_object_get(j, "error")));

        /* A line cut off at the end is said too. */
        EgressSummary s2 = {};
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        assert_int_equal(write_all(p[1], OK_CONNECT "\n{\"kind\":", strlen(OK_CONNECT) + 10), 0);
        close(p[1]);
        ep.records = p[0];
        egress_proxy_finish(&ep, -1, &s2);
        assert_int_equal(s2.connections, 1);
        assert_non_null(strstr(s2.message, "cut off"));
}

/* The host's route check: here (a machine with a network) it passes; in a network namespace of
 * its own with only loopback (what a unit's PrivateNetwork=yes gives) it says so. */
static void test_host_route(void **state) {
        (void) state;
        char why[256] = "";
        if (egress_host_route_check(why, sizeof(why)) < 0)
                fail_msg("the host's route check failed here: %s", why);
        if (geteuid() != 0)
                tfw_skip("a network namespace of the test's own needs root");
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (unshare(CLONE_NEWNET) < 0)
                        _exit(90);
                int r = egress_host_route_check(why, sizeof(why));
                _exit(r < 0 && strstr(why, "PrivateNetwork") ? 0 : 91);
        }
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accepted),
                cmocka_unit_test(test_refused),
                cmocka_unit_test(test_finish),
                cmocka_unit_test(test_host_route),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
