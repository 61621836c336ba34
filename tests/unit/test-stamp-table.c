/* SPDX-License-Identifier: MIT */
/* common/stamp-table.h, the table of stamps the workspace's watch and the file system's mark
 * keep: a stamp put is found and replaced; a full table refuses every stamp, a held key's too,
 * and is left unchanged (the mark's "a full table asks every file" rests on it); a key forgotten
 * leaves every other reachable; a table reserved whole never grows; the stamps up to a sequence
 * number forgotten leave every newer one. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "common/stamp-table.h"

static void test_put_get_replace(void **state) {
        (void) state;
        StampTable t = STAMP_TABLE_INIT(8);
        assert_null(stamp_table_get(&t, 7));
        assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = 7, .seq = 3 }), 0);
        assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = 0, .seq = 4, .closed_seq = 4 }), 0);
        const Stamp *s = stamp_table_get(&t, 7);
        assert_non_null(s);
        assert_int_equal(s->seq, 3);
        assert_int_equal(s->closed_seq, 0);
        /* Key 0 is a key like any other (an inode number may be): only seq 0 marks a free slot. */
        assert_int_equal(stamp_table_get(&t, 0)->closed_seq, 4);
        assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = 7, .seq = 9, .closed_seq = 5 }), 0);
        assert_int_equal(t.n_used, 2);
        assert_int_equal(stamp_table_get(&t, 7)->seq, 9);
        assert_int_equal(stamp_table_get(&t, 7)->closed_seq, 5);
        assert_null(stamp_table_get(&t, 8));
        /* A stamp of seq 0 would read as a free slot. */
        assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = 8, .seq = 0 }), -EINVAL);
        assert_null(stamp_table_get(&t, 8));
        stamp_table_done(&t);
        assert_null(stamp_table_get(&t, 7));
}

static void test_full_refuses_every_stamp(void **state) {
        (void) state;
        StampTable t = STAMP_TABLE_INIT(3);
        for (uint64_t k = 1; k <= 3; k++)
                assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = k, .seq = k }), 0);
        /* A new key, and a key held already: both refused, nothing changed. */
        assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = 4, .seq = 10 }), -E2BIG);
        assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = 2, .seq = 11, .closed_seq = 11 }), -E2BIG);
        assert_null(stamp_table_get(&t, 4));
        assert_int_equal(stamp_table_get(&t, 2)->seq, 2);
        assert_int_equal(stamp_table_get(&t, 2)->closed_seq, 0);
        assert_int_equal(t.n_used, 3);
        /* Started again: nothing of before, room for new stamps. */
        stamp_table_clear(&t);
        for (uint64_t k = 1; k <= 3; k++)
                assert_null(stamp_table_get(&t, k));
        assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = 4, .seq = 12 }), 0);
        assert_int_equal(stamp_table_get(&t, 4)->seq, 12);
        /* A table of no keys at all takes nothing. */
        StampTable none = STAMP_TABLE_INIT(0);
        assert_int_equal(stamp_table_put(&none, &(Stamp) { .key = 1, .seq = 1 }), -E2BIG);
        assert_null(stamp_table_get(&none, 1));
        stamp_table_done(&t);
}

/* Scattered keys (splitmix64: sequential ones would each find a slot of their own, and no run
 * would form). */
static uint64_t scattered(uint64_t k) {
        uint64_t z = k + 0x9E3779B97F4A7C15ULL;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
}

/* Many keys in few slots (half of them used: long runs), forgotten in a scrambled order: after
 * each, every key still held is found with its own stamp and no forgotten one is. */
static void test_forget_keeps_the_others(void **state) {
        (void) state;
        enum { N = 511 };
        StampTable t = STAMP_TABLE_INIT(N);
        bool held[N] = {};
        for (uint64_t k = 0; k < N; k++) {
                assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = scattered(k), .seq = k + 1 }), 0);
                held[k] = true;
        }
        assert_int_equal(t.n_slots, 1024);
        stamp_table_forget(&t, scattered(N)); /* never held: nothing happens */
        assert_int_equal(t.n_used, N);
        for (uint64_t i = 0; i < N; i++) {
                uint64_t gone = (i * 263) % N; /* 263 is prime to 511: each key once */
                stamp_table_forget(&t, scattered(gone));
                held[gone] = false;
                assert_int_equal(t.n_used, N - 1 - i);
                for (uint64_t k = 0; k < N; k++) {
                        const Stamp *s = stamp_table_get(&t, scattered(k));
                        if (!held[k]) {
                                assert_null(s);
                                continue;
                        }
                        assert_non_null(s);
                        assert_int_equal(s->seq, k + 1);
                }
        }
        stamp_table_done(&t);
}

static void test_grow_keeps_every_stamp(void **state) {
        (void) state;
        enum { N = 100000 };
        StampTable t = STAMP_TABLE_INIT(N);
        for (uint64_t k = 1; k <= N; k++)
                assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = k, .seq = k, .closed_seq = k / 2 }), 0);
        assert_int_equal(t.n_used, N);
        assert_true(t.n_slots >= 2 * N);
        for (uint64_t k = 1; k <= N; k++) {
                const Stamp *s = stamp_table_get(&t, k);
                assert_non_null(s);
                assert_int_equal(s->seq, k);
                assert_int_equal(s->closed_seq, k / 2);
        }
        assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = N + 1, .seq = N + 1 }), -E2BIG);
        stamp_table_done(&t);
}

/* A view read whole: room made once, its stamps put without growing; never past max. */
static void test_reserve(void **state) {
        (void) state;
        StampTable t = STAMP_TABLE_INIT(300);
        assert_int_equal(stamp_table_reserve(&t, 301), -E2BIG);
        assert_null(t.slots);
        assert_int_equal(stamp_table_reserve(&t, 0), 0);
        assert_int_equal(t.n_slots, 16);
        assert_int_equal(stamp_table_reserve(&t, 300), 0);
        assert_int_equal(t.n_slots, 1024);
        const Stamp *slots = t.slots;
        for (uint64_t k = 1; k <= 300; k++)
                assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = k, .seq = k }), 0);
        assert_ptr_equal(t.slots, slots);
        /* Room for fewer keys than it has: nothing changes. */
        assert_int_equal(stamp_table_reserve(&t, 10), 0);
        assert_ptr_equal(t.slots, slots);
        assert_int_equal(stamp_table_get(&t, 300)->seq, 300);
        stamp_table_done(&t);
}

/* The mark's table after a flood (fan-mark.h, fan_mark_forget_upto): every stamp of seq or
 * older forgotten, every newer one found with its own stamp, the slots shrunk to fit; the bound
 * stays; forgetting them all leaves an empty table that takes stamps again. */
static void test_forget_upto(void **state) {
        (void) state;
        enum { N = 5000, KEEP_ABOVE = 4900 };
        StampTable t = STAMP_TABLE_INIT(N);
        for (uint64_t k = 0; k < N; k++)
                assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = scattered(k), .seq = k + 1, .closed_seq = k / 2 }), 0);
        assert_true(t.n_slots >= 2 * N);
        assert_int_equal(stamp_table_forget_upto(&t, 0), 0); /* nothing that old: nothing changes */
        assert_int_equal(t.n_used, N);
        assert_int_equal(stamp_table_forget_upto(&t, KEEP_ABOVE), 0);
        assert_int_equal(t.n_used, N - KEEP_ABOVE);
        assert_int_equal(t.n_slots, 256);
        for (uint64_t k = 0; k < N; k++) {
                const Stamp *s = stamp_table_get(&t, scattered(k));
                if (k + 1 <= KEEP_ABOVE) {
                        assert_null(s);
                        continue;
                }
                assert_non_null(s);
                assert_int_equal(s->seq, k + 1);
                assert_int_equal(s->closed_seq, k / 2);
        }
        assert_int_equal(t.max, N);
        assert_int_equal(stamp_table_forget_upto(&t, N), 0);
        assert_int_equal(t.n_used, 0);
        assert_null(stamp_table_get(&t, scattered(N - 1)));
        assert_int_equal(t.max, N);
        assert_int_equal(stamp_table_put(&t, &(Stamp) { .key = 1, .seq = N + 1 }), 0);
        assert_int_equal(stamp_table_get(&t, 1)->seq, N + 1);
        stamp_table_done(&t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_put_get_replace),
                cmocka_unit_test(test_full_refuses_every_stamp),
                cmocka_unit_test(test_forget_keeps_the_others),
                cmocka_unit_test(test_grow_keeps_every_stamp),
                cmocka_unit_test(test_reserve),
                cmocka_unit_test(test_forget_upto),
        };
        return cmocka_run_group_tests_name("stamp-table", tests, NULL, NULL);
}
