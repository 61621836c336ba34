/* SPDX-License-Identifier: MIT */
/* The live log (capsule/log-live.h): fed through the trailer splitter and the log cap as the
 * worker feeds it, in chunks of any size, it is at every step a prefix of the job.log the job
 * ends with, it holds whole output lines as soon as they are read (not kept back with the
 * trailer splitter's tail), it never grows past the head, and init's trailer never reaches it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "capsule/channel.h"
#include "capsule/log-cap.h"
#include "capsule/log-live.h"
#include "capsule/protocol.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

static const uint8_t token[CAPSULE_TOKEN_SIZE] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

typedef struct Feed {
        LogCap *cap;
        TrailerSplitter sp;
        LogLive live;
} Feed;

static void sink(void *userdata, const void *data, size_t len) {
        log_cap_feed(((Feed *) userdata)->cap, data, len);
}

static char *read_back(int fd, size_t *ret_len) {
        char *buf = NULL;
        assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
        assert_int_equal(read_full_fd_bounded(fd, 1 << 26, &buf, ret_len), 0);
        return buf;
}

static uint64_t xorshift(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

/* Feed out in random chunks, then init's trailer in one (init writes it with one write),
 * checking the live log after each. */
static void run(const char *out, size_t len, uint64_t max, uint64_t seed) {
        Feed f = {};
        char trailer[256];
        char hex[2 * CAPSULE_TOKEN_SIZE + 1];
        capsule_token_hex(token, hex);
        int tl = snprintf(trailer, sizeof(trailer),
                          CAPSULE_TRAILER_TAG "%s exit=0 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=none\n",
                          hex);
        _cleanup_free_ char *all = malloc(len + (size_t) tl);
        memcpy(all, out, len);
        memcpy(all + len, trailer, (size_t) tl);

        assert_int_equal(log_cap_new(max, &f.cap), 0);
        trailer_splitter_init(&f.sp, token, sink, &f);
        _cleanup_close_ int live_fd = memfd_create("live", MFD_CLOEXEC);
        _cleanup_close_ int final_fd = memfd_create("final", MFD_CLOEXEC);
        f.live = (LogLive) {.fd = live_fd};
        size_t head_max = log_cap_head_max(f.cap);

        for (size_t off = 0; off < len + (size_t) tl;) {
                size_t want = (size_t) (xorshift(&seed) % 5000) + 1; /* not in MIN: evaluated once */
                size_t n = off < len ? MIN(len - off, want) : (size_t) tl;
                trailer_splitter_feed(&f.sp, all + off, n);
                log_live_update(&f.live, f.cap, &f.sp);
                off += n;
                assert_true(f.live.len <= head_max);
                /* Whole lines of output already read are there, unless the head is full. */
                if (off <= len && f.live.len < head_max) {
                        const char *nl = memrchr(out, '\n', off);
                        if (nl && (size_t) (nl - out) < head_max)
                                assert_true(f.live.len >= (size_t) (nl - out) + 1);
                }
        }
        CapsuleTrailer tr;
        assert_true(trailer_splitter_finish(&f.sp, &tr));
        assert_int_equal(log_cap_write(f.cap, final_fd), 0);
        size_t ln, fn;
        _cleanup_free_ char *live = read_back(live_fd, &ln);
        _cleanup_free_ char *final = read_back(final_fd, &fn);
        assert_int_equal(ln, f.live.len);
        assert_true(ln <= fn);
        assert_memory_equal(live, final, ln);
        assert_int_equal(ln, MIN(len, head_max));
        assert_null(memmem(live, ln, "\036", 1));
        log_cap_free(f.cap);
}

static char *lines(size_t len, uint64_t seed) {
        char *p = malloc(len + 1);
        for (size_t i = 0; i < len; i++)
                p[i] = xorshift(&seed) % 40 == 0 ? '\n' : (char) ('a' + xorshift(&seed) % 26);
        p[len] = 0;
        return p;
}

static void test_under_cap(void **state _unused_) {
        _cleanup_free_ char *out = lines(3000, 7);
        run(out, 3000, 64 * 1024, 1);
        run("tick\n", 5, 4096, 2);
        run("no newline", 10, 4096, 3);
}

static void test_over_cap(void **state _unused_) {
        _cleanup_free_ char *out = lines(200000, 11);
        for (uint64_t seed = 1; seed < 20; seed++)
                run(out, 200000, 4096 + seed * 1000, seed);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_under_cap),
                cmocka_unit_test(test_over_cap),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
