/* SPDX-License-Identifier: MIT */
/* The bounded job log (capsule/log-cap.h): whole output under the cap, head + marker + tail
 * over it, the file never above the cap, and a 1 GiB flood passing through in bounded memory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "capsule/log-cap.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

/* Write the capped log to a memfd and read it back. */
static char *render(const LogCap *c, size_t *ret_len) {
        _cleanup_close_ int fd = memfd_create("log", MFD_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(log_cap_write(c, fd), 0);
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        char *buf = NULL;
        assert_int_equal(read_full_fd_bounded(fd, 1 << 30, &buf, ret_len), 0);
        assert_int_equal(*ret_len, log_cap_size(c));
        return buf;
}

static uint64_t xorshift(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

/* Feed input in pseudo-random chunk sizes (from 0 to max_chunk bytes). */
static void feed_chunks(LogCap *c, const char *in, size_t len, size_t max_chunk, uint64_t seed) {
        for (size_t off = 0; off < len;) {
                size_t want = (size_t) (xorshift(&seed) % (max_chunk + 1));
                size_t n = MIN(len - off, want);
                log_cap_feed(c, in + off, n);
                off += n;
        }
}

static char *pattern(size_t len, uint64_t seed) {
        char *p = malloc(len + 1);
        for (size_t i = 0; i < len; i++)
                p[i] = (char) ('a' + xorshift(&seed) % 26);
        p[len] = 0;
        return p;
}

/* The expected file for input in under cap max, built independently of the ring logic. */
static void check_capped(const char *in, size_t len, uint64_t max, size_t max_chunk) {
        _cleanup_(log_cap_freep) LogCap *c = NULL;
        assert_int_equal(log_cap_new(max, &c), 0);
        feed_chunks(c, in, len, max_chunk, len * 31 + max);
        assert_int_equal(log_cap_seen(c), len);

        size_t n;
        _cleanup_free_ char *out = render(c, &n);
        if (len <= max) {
                assert_false(log_cap_truncated(c));
                assert_int_equal(n, len);
                assert_memory_equal(out, in, len);
                return;
        }
        assert_true(log_cap_truncated(c));
        assert_true(n <= max);
        /* head + "\n[tentaflake-worker: N bytes omitted]\n" + tail, halves equal to a byte */
        const char *m = memmem(out, n, "\n[tentaflake-worker: ", 21);
        assert_non_null(m);
        size_t head = (size_t) (m - out);
        uint64_t omitted;
        int used = 0;
        assert_int_equal(sscanf(m, "\n[tentaflake-worker: %" SCNu64 " bytes omitted]\n%n",
                                &omitted, &used),
                         1);
        assert_true(used > 0);
        size_t tail = n - head - (size_t) used;
        assert_true(head == tail || head + 1 == tail);
        assert_int_equal(head + omitted + tail, len);
        assert_memory_equal(out, in, head);
        assert_memory_equal(out + head + used, in + len - tail, tail);
        /* The cap is used: at most the longest marker's room is left unused. */
        assert_true(n + 64 >= max);
}

static void test_under_and_at_cap(void **state _unused_) {
        _cleanup_free_ char *in = pattern(8192, 1);

        check_capped(in, 0, 4096, 100);
        check_capped(in, 1, 4096, 100);
        check_capped(in, 2000, 4096, 100);
        /* Exactly at the cap: nothing dropped, no marker, the file is the cap. */
        check_capped(in, 4096, 4096, 100);
        check_capped(in, 4096, 4096, 4096);
        check_capped(in, 4096, 4096, 1);
}

static void test_over_cap(void **state _unused_) {
        _cleanup_free_ char *in = pattern(1 << 20, 2);

        /* One byte over: truncated, marker counts what is missing. */
        check_capped(in, 4097, 4096, 100);
        check_capped(in, 4097, 4096, 4097);
        check_capped(in, 8192, 4096, 7);
        /* Many ring wraps, chunks larger than the ring, odd caps. */
        check_capped(in, 1 << 20, 4096, 10000);
        check_capped(in, 1 << 20, 4097, 333);
        check_capped(in, 1 << 20, LOG_CAP_MIN, 50);
        check_capped(in, 1 << 20, 100000, 1 << 16);
        check_capped(in, 1 << 20, 1 << 20, 1 << 16);
        check_capped(in, (1 << 20) - 1, 1 << 20, 1 << 16);
}

static void test_exact_marker(void **state _unused_) {
        _cleanup_(log_cap_freep) LogCap *c = NULL;
        char in[1000];

        memset(in, 'x', sizeof(in));
        assert_int_equal(log_cap_new(LOG_CAP_MIN, &c), 0);
        log_cap_feed(c, in, sizeof(in));
        size_t n;
        _cleanup_free_ char *out = render(c, &n);
        /* 256 - 57 (longest marker) = 199 bytes of output: 99 first, 100 last. */
        char want[512];
        int k = snprintf(want, sizeof(want), "%.*s\n[tentaflake-worker: %d bytes omitted]\n%.*s", 99,
                         in, 1000 - 199, 100, in);
        assert_int_equal(n, (size_t) k);
        assert_memory_equal(out, want, n);

        /* Feeding may go on after a write, and the next write reflects it. */
        log_cap_feed(c, "END", 3);
        _cleanup_free_ char *again = render(c, &n);
        assert_memory_equal(again + n - 3, "END", 3);
        assert_int_equal(log_cap_seen(c), 1003);
}

static void test_refuses_tiny_cap(void **state _unused_) {
        LogCap *c = NULL;
        assert_int_equal(log_cap_new(LOG_CAP_MIN - 1, &c), -EINVAL);
        assert_int_equal(log_cap_new(0, &c), -EINVAL);
        assert_null(c);
}

static long rss_kib(void) {
        _cleanup_close_ int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
        char buf[128] = "";
        assert_true(fd >= 0);
        assert_true(read(fd, buf, sizeof(buf) - 1) > 0);
        long pages = 0, resident = 0;
        assert_int_equal(sscanf(buf, "%ld %ld", &pages, &resident), 2);
        return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The byte at absolute position p of the flood: chunk k starts with k's 8 bytes. */
#define CHUNK (64u << 10)
static uint8_t flood_byte(const uint8_t *base, uint64_t p) {
        uint64_t k = p / CHUNK;
        size_t i = (size_t) (p % CHUNK);
        return i < sizeof(k) ? ((const uint8_t *) &k)[i] : base[i];
}

/* A 1 GiB log flood in 64 KiB chunks: memory stays at the cap, the file at most the cap, and
 * the bytes kept are the flood's first and last ones. */
static void test_flood(void **state _unused_) {
        const uint64_t max = 8u << 20, total = 1ULL << 30;
        static uint8_t chunk[CHUNK], base[CHUNK];
        _cleanup_(log_cap_freep) LogCap *c = NULL;

        for (size_t i = 0; i < CHUNK; i++)
                base[i] = (uint8_t) (i * 7 + 3);
        memcpy(chunk, base, CHUNK);
        long before = rss_kib();
        assert_int_equal(log_cap_new(max, &c), 0);
        for (uint64_t k = 0; k < total / CHUNK; k++) {
                memcpy(chunk, &k, sizeof(k));
                log_cap_feed(c, chunk, CHUNK);
        }
        long growth = rss_kib() - before;
        print_message("1 GiB through an 8 MiB cap: RSS grew by %ld KiB\n", growth);
        /* The cap's own buffers plus slack; keeping the flood would be a million KiB. */
        assert_true(growth < (long) (max / 1024) + 4096);

        assert_int_equal(log_cap_seen(c), total);
        assert_true(log_cap_truncated(c));
        size_t n;
        _cleanup_free_ char *out = render(c, &n);
        assert_true(n <= max);
        const char *m = memmem(out, n, "\n[tentaflake-worker: ", 21);
        assert_non_null(m);
        size_t head = (size_t) (m - out);
        const char *nl = memchr(m + 1, '\n', 64);
        assert_non_null(nl);
        size_t tail = n - (size_t) (nl + 1 - out);
        for (size_t i = 0; i < head; i++)
                if ((uint8_t) out[i] != flood_byte(base, i))
                        fail_msg("head byte %zu differs", i);
        for (size_t i = 0; i < tail; i++)
                if ((uint8_t) nl[1 + i] != flood_byte(base, total - tail + i))
                        fail_msg("tail byte %zu differs", i);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_under_and_at_cap),
                cmocka_unit_test(test_over_cap),
                cmocka_unit_test(test_exact_marker),
                cmocka_unit_test(test_refuses_tiny_cap),
                cmocka_unit_test(test_flood),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
