/* SPDX-License-Identifier: MIT */
/* capsule/walls.c (issue 49, threat 24): the walls' list is bounded (entries, detail, counts
 * kept whole past the bound), holds only the known walls, and its words for an agent escape
 * whatever of a detail is not printable. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/walls.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

static json_t *entry_at(json_t *a, size_t i) {
        json_t *e = json_array_get(a, i);
        assert_non_null(e);
        return e;
}

static void test_empty(void **state) {
        (void) state;
        Walls w = {};
        json_t *a = walls_json(&w);
        assert_true(json_is_array(a));
        assert_int_equal(json_array_size(a), 0);
        json_decref(a);
}

static void test_add_and_count(void **state) {
        (void) state;
        Walls w = {};
        walls_add(&w, WALL_NETWORK, 1, "connect to %s:%d (not in network.allow)", "registry.npmjs.org", 443);
        walls_add(&w, WALL_NETWORK, 1, "connect to %s:%d (not in network.allow)", "registry.npmjs.org", 443);
        walls_add(&w, WALL_MEMORY, 3, "killed at the memory limit (limits.memory, 2g)");
        /* Nothing for a count of 0 or a wall that is not one of the list's. */
        walls_add(&w, WALL_PIDS, 0, "x");
        walls_add(&w, "firewall", 1, "x");
        json_t *a = walls_json(&w);
        assert_int_equal(json_array_size(a), 2);
        assert_string_equal(json_string_value(json_object_get(entry_at(a, 0), "wall")), "network");
        assert_string_equal(json_string_value(json_object_get(entry_at(a, 0), "detail")),
                            "connect to registry.npmjs.org:443 (not in network.allow)");
        assert_int_equal(json_integer_value(json_object_get(entry_at(a, 0), "count")), 2);
        assert_int_equal(json_integer_value(json_object_get(entry_at(a, 1), "count")), 3);
        json_decref(a);
}

static void test_bounded(void **state) {
        (void) state;
        Walls w = {}, more = {};
        char long_host[600];
        memset(long_host, 'a', sizeof(long_host) - 1);
        long_host[sizeof(long_host) - 1] = 0;
        for (int i = 0; i < 100; i++)
                walls_add(&w, WALL_NETWORK, 1, "connect to h%d.example:443 (not in network.allow)", i);
        walls_add(&more, WALL_DISK, 5, "/tmp is full");
        walls_merge(&w, &more);
        assert_int_equal(w.n, WALLS_MAX);
        json_t *a = walls_json(&w);
        assert_int_equal(json_array_size(a), WALLS_MAX);
        json_t *last = entry_at(a, WALLS_MAX - 1);
        assert_string_equal(json_string_value(json_object_get(last, "detail")), WALLS_FURTHER);
        /* 100 + 5 meetings in all, 31 of them listed one by one. */
        assert_int_equal(json_integer_value(json_object_get(last, "count")), 100 + 5 - (WALLS_MAX - 1));
        json_decref(a);

        Walls one = {};
        walls_add(&one, WALL_NETWORK, 1, "connect to %s:443", long_host);
        assert_int_equal(strlen(one.entry[0].detail), WALL_DETAIL_MAX);
}

static void test_sentence(void **state) {
        (void) state;
        char line[1024];
        json_t *e = json_pack("{s:s, s:s, s:i}", "wall", "network", "detail",
                              "connect to registry.npmjs.org:443 (not in network.allow)", "count", 2);
        assert_true(walls_sentence(e, line, sizeof(line)));
        assert_non_null(strstr(line, "blocked by the sandbox: connect to registry.npmjs.org:443 (not in network.allow) (2 times)"));
        assert_non_null(strstr(line, "not broken"));
        json_decref(e);

        /* Controls, escapes and non-ASCII of a detail are shown escaped, never raw. */
        e = json_pack("{s:s, s:s, s:i}", "wall", "read-only", "detail", "/work/\x1b[2Jx\n\\y\xc3\xa9", "count", 1);
        assert_true(walls_sentence(e, line, sizeof(line)));
        assert_non_null(strstr(line, "/work/\\x1b[2Jx\\x0a\\x5cy\\xc3\\xa9"));
        for (const char *c = line; *c; c++)
                assert_true(*c >= 0x20 && *c < 0x7f);
        json_decref(e);

        /* A short buffer cuts the line, still terminated. */
        e = json_pack("{s:s, s:s, s:i}", "wall", "memory", "detail", "killed at the memory limit", "count", 1);
        char small[16];
        assert_true(walls_sentence(e, small, sizeof(small)));
        assert_int_equal(strlen(small), sizeof(small) - 1);
        json_decref(e);

        /* Anything but a well-formed entry of a known wall gives no line. */
        const char *bad[] = {
                "{\"wall\":\"firewall\",\"detail\":\"x\",\"count\":1}",
                "{\"wall\":\"memory\",\"detail\":1,\"count\":1}",
                "{\"wall\":\"memory\",\"detail\":\"x\",\"count\":0}",
                "{\"wall\":\"memory\",\"detail\":\"x\",\"count\":\"1\"}",
                "{\"detail\":\"x\",\"count\":1}",
                "[]",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_t *b = json_loads(bad[i], 0, NULL);
                assert_non_null(b);
                assert_false(walls_sentence(b, line, sizeof(line)));
                json_decref(b);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_empty),
                cmocka_unit_test(test_add_and_count),
                cmocka_unit_test(test_bounded),
                cmocka_unit_test(test_sentence),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
