/* SPDX-License-Identifier: MIT */
/* capsule/channel.c: the host trusts on the capsule's channels only what follows the
 * per-run token (artifacts) or carries it (the status trailer). A job can write anything to
 * both channels (gVisor lets it open /proc/1/fd/N), so these tests feed junk, forged trailers,
 * token prefixes and every chunking. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/channel.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

static const uint8_t token[CAPSULE_TOKEN_SIZE] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4,
                                                   5, 6, 7, 8, 9, 10, 11, 12 };

/* Feed data in chunks of `chunk` bytes; return the offset in data where the tar begins,
 * or -1. */
static ptrdiff_t scan(const uint8_t *data, size_t len, size_t chunk, uint64_t *discarded) {
        TokenScanner s;
        token_scanner_init(&s, token);
        for (size_t off = 0; off < len; off += chunk) {
                size_t n = MIN(chunk, len - off);
                ptrdiff_t r = token_scanner_feed(&s, data + off, n);
                if (r >= 0) {
                        *discarded = s.discarded;
                        return (ptrdiff_t) off + r;
                }
        }
        *discarded = s.discarded;
        return -1;
}

static void test_token_every_chunking(void **state) {
        (void) state;
        uint8_t data[200];
        uint64_t disc;

        /* Junk made of token prefixes, then the token, then "tar". */
        size_t n = 0;
        for (int k = 0; k < 5; k++) {
                memcpy(data + n, token, 7);
                n += 7;
        }
        memcpy(data + n, token, 15); /* all but the last byte */
        n += 15;
        data[n++] = 'x';
        size_t junk = n;
        memcpy(data + n, token, sizeof(token));
        n += sizeof(token);
        memcpy(data + n, "tar", 3);
        n += 3;

        for (size_t chunk = 1; chunk <= n; chunk++) {
                ptrdiff_t r = scan(data, n, chunk, &disc);
                if (r != (ptrdiff_t) (junk + sizeof(token)))
                        fail_msg("chunk %zu: tar at %td, expected %zu", chunk, r,
                                 junk + sizeof(token));
                assert_int_equal(disc, junk);
        }
}

static void test_token_absent(void **state) {
        (void) state;
        uint8_t data[4096];
        uint64_t disc;
        memset(data, 0xde, sizeof(data));
        memcpy(data + 100, token, sizeof(token) - 1); /* a prefix is not the token */
        assert_int_equal(scan(data, sizeof(data), 1000, &disc), -1);
        assert_int_equal(scan(data, sizeof(data), 3, &disc), -1);
        assert_int_equal(scan(data, 0, 1, &disc), -1);
}

static void test_token_at_start(void **state) {
        (void) state;
        uint64_t disc;
        uint8_t data[CAPSULE_TOKEN_SIZE];
        memcpy(data, token, sizeof(token));
        assert_int_equal(scan(data, sizeof(data), sizeof(data), &disc), CAPSULE_TOKEN_SIZE);
        assert_int_equal(disc, 0);
}

typedef struct Sink {
        char buf[1 << 16];
        size_t n;
} Sink;

static void sink_fn(void *u, const void *d, size_t len) {
        Sink *s = u;
        assert_true(s->n + len <= sizeof(s->buf));
        memcpy(s->buf + s->n, d, len);
        s->n += len;
}

static char *trailer_for(const uint8_t *tok, const char *fields) {
        char hex[2 * CAPSULE_TOKEN_SIZE + 1], *s;
        capsule_token_hex(tok, hex);
        assert_true(asprintf(&s, "%s%s%s", CAPSULE_TRAILER_TAG, hex, fields) > 0);
        return s;
}

static bool split(const char *data, size_t len, size_t chunk, Sink *sink, CapsuleTrailer *t) {
        TrailerSplitter sp;
        memset(sink, 0, sizeof(*sink));
        trailer_splitter_init(&sp, token, sink_fn, sink);
        for (size_t off = 0; off < len; off += chunk)
                trailer_splitter_feed(&sp, data + off, MIN(chunk, len - off));
        return trailer_splitter_finish(&sp, t);
}

static void test_trailer_split(void **state) {
        (void) state;
        _cleanup_free_ char *tr = trailer_for(token, " exit=3 signal=0 init_error=none errno=0 "
                                                     "skipped=2 artifacts=ok cache=none full=none\n");
        char data[2000];
        Sink sink;
        CapsuleTrailer t;

        for (size_t loglen = 0; loglen < 700; loglen += 37) {
                memset(data, 'L', loglen);
                memcpy(data + loglen, tr, strlen(tr));
                size_t len = loglen + strlen(tr);
                for (size_t chunk = 1; chunk < 600; chunk += 53) {
                        assert_true(split(data, len, chunk, &sink, &t));
                        assert_int_equal(sink.n, loglen);
                        for (size_t i = 0; i < sink.n; i++)
                                assert_int_equal(sink.buf[i], 'L');
                        assert_int_equal(t.exit_code, 3);
                        assert_int_equal(t.signal, 0);
                        assert_string_equal(t.init_error, "none");
                        assert_int_equal(t.skipped, 2);
                        assert_true(t.artifacts_ok);
                }
        }
}

static void test_trailer_forged(void **state) {
        (void) state;
        /* The job prints a trailer with a guessed token: it is log text, no status. */
        static const uint8_t wrong[CAPSULE_TOKEN_SIZE] = { 1 };
        _cleanup_free_ char *fake =
                trailer_for(wrong, " exit=0 signal=0 init_error=none errno=0 skipped=0 "
                                   "artifacts=ok cache=none full=none\n");
        Sink sink;
        CapsuleTrailer t;
        assert_false(split(fake, strlen(fake), 7, &sink, &t));
        assert_int_equal(sink.n, strlen(fake));
        assert_memory_equal(sink.buf, fake, sink.n);

        /* A real trailer with anything after it is not init's last word. */
        _cleanup_free_ char *real =
                trailer_for(token, " exit=0 signal=0 init_error=none errno=0 skipped=0 "
                                   "artifacts=ok cache=none full=none\n");
        char buf[512];
        snprintf(buf, sizeof(buf), "%sextra", real);
        assert_false(split(buf, strlen(buf), 5, &sink, &t));
        assert_int_equal(sink.n, strlen(buf));

        /* Nothing at all. */
        assert_false(split("", 0, 1, &sink, &t));
        assert_int_equal(sink.n, 0);
}

static void test_trailer_flood(void **state) {
        (void) state;
        /* A long log (bigger than the held-back window) keeps flowing to the sink. */
        size_t len = 60000;
        _cleanup_free_ char *data = malloc(len + 256);
        _cleanup_free_ char *tr = trailer_for(token, " exit=137 signal=9 init_error=none "
                                                     "errno=0 skipped=0 artifacts=failed cache=none full=none\n");
        Sink *sink = malloc(sizeof(Sink));
        CapsuleTrailer t;
        for (size_t i = 0; i < len; i++)
                data[i] = (char) ('a' + i % 26);
        memcpy(data + len, tr, strlen(tr));
        assert_true(split(data, len + strlen(tr), 4096, sink, &t));
        assert_int_equal(sink->n, len);
        assert_memory_equal(sink->buf, data, len);
        assert_int_equal(t.exit_code, 137);
        assert_int_equal(t.signal, 9);
        assert_false(t.artifacts_ok);
        free(sink);
}

static void test_trailer_parse(void **state) {
        (void) state;
        CapsuleTrailer t;
        const char *ok = " exit=127 signal=0 init_error=exec errno=2 skipped=0 artifacts=ok cache=none full=none\n";
        assert_true(capsule_trailer_parse(ok, strlen(ok), &t));
        assert_int_equal(t.exit_code, 127);
        assert_string_equal(t.init_error, "exec");
        assert_int_equal(t.error, 2);
        assert_false(t.cache_ok);
        const char *cache_ok = " exit=0 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=ok full=none\n";
        assert_true(capsule_trailer_parse(cache_ok, strlen(cache_ok), &t));
        assert_true(t.cache_ok);
        const char *cache_failed = " exit=0 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=failed full=none\n";
        assert_true(capsule_trailer_parse(cache_failed, strlen(cache_failed), &t));
        assert_false(t.cache_ok);
        assert_false(t.work_full || t.tmp_full);
        const char *full = " exit=1 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=work_tmp\n";
        assert_true(capsule_trailer_parse(full, strlen(full), &t));
        assert_true(t.work_full && t.tmp_full);
        const char *tmp = " exit=1 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=tmp\n";
        assert_true(capsule_trailer_parse(tmp, strlen(tmp), &t));
        assert_true(!t.work_full && t.tmp_full);

        const char *bad[] = {
                " exit=1 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=all\n",
                " exit=1 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none\n",
                " exit=256 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=none\n",
                " exit=1 signal=65 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=none\n",
                " exit=1 signal=0 init_error=none errno=0 skipped=0 artifacts=maybe cache=none full=none\n",
                " exit=1 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none",
                " exit=1 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=maybe\n",
                " exit=1 signal=0 init_error=none errno=0 skipped=0 artifacts=ok\n",
                " exit=1 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=none\n\n",
                " exit= signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=none\n",
                " exit=-1 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=none\n",
                " exit=1 signal=0 init_error=NONE errno=0 skipped=0 artifacts=ok cache=none full=none\n",
                " exit=1 signal=0 init_error= errno=0 skipped=0 artifacts=ok cache=none full=none\n",
                " exit=1  signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=none\n",
                " exit=99999999999999999999 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=none\n",
                "",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (capsule_trailer_parse(bad[i], strlen(bad[i]), &t))
                        fail_msg("accepted '%s'", bad[i]);
}

/* Feed data a byte at a time as the host does; the offset just past the answer, or -1 (then
 * flushed). */
static ptrdiff_t ack_scan(const uint8_t *tok, const char *data, size_t len, Sink *sink) {
        JobAckScanner s;
        memset(sink, 0, sizeof(*sink));
        job_ack_scanner_init(&s, tok, sink_fn, sink);
        for (size_t i = 0; i < len; i++)
                if (job_ack_scanner_feed(&s, (uint8_t) data[i]))
                        return (ptrdiff_t) i + 1;
        job_ack_scanner_flush(&s);
        return -1;
}

static char *ack_for(const uint8_t *tok) {
        char hex[2 * CAPSULE_TOKEN_SIZE + 1], *s;
        capsule_token_hex(tok, hex);
        assert_true(asprintf(&s, "%s%s\n", CAPSULE_JOB_ACK_TAG, hex) > 0);
        return s;
}

static void test_job_ack(void **state) {
        (void) state;
        _cleanup_free_ char *ack = ack_for(token);
        size_t alen = strlen(ack);
        char data[1024];
        Sink sink;

        /* Alone, and after what runsc may have written: found at its last byte, the words
         * before it passed on whole, the answer itself not. */
        assert_int_equal(ack_scan(token, ack, alen, &sink), (ptrdiff_t) alen);
        assert_int_equal(sink.n, 0);
        snprintf(data, sizeof(data), "runsc: a warning\n%s", ack);
        assert_int_equal(ack_scan(token, data, strlen(data), &sink), (ptrdiff_t) strlen(data));
        assert_int_equal(sink.n, strlen("runsc: a warning\n"));
        assert_memory_equal(sink.buf, "runsc: a warning\n", sink.n);

        /* A prefix of it, then the real one: the prefix is text. */
        snprintf(data, sizeof(data), "%.*s%s", (int) (alen - 3), ack, ack);
        assert_int_equal(ack_scan(token, data, strlen(data), &sink), (ptrdiff_t) strlen(data));
        assert_int_equal(sink.n, alen - 3);
        assert_memory_equal(sink.buf, ack, alen - 3);

        /* Bytes after it are not read here: the offset is just past its newline. */
        snprintf(data, sizeof(data), "%sjob output", ack);
        assert_int_equal(ack_scan(token, data, strlen(data), &sink), (ptrdiff_t) alen);

        /* Another token, a missing newline, nothing: never taken, every byte reaches the
         * sink at the end. */
        static const uint8_t wrong[CAPSULE_TOKEN_SIZE] = { 1 };
        _cleanup_free_ char *forged = ack_for(wrong);
        assert_int_equal(ack_scan(token, forged, strlen(forged), &sink), -1);
        assert_int_equal(sink.n, strlen(forged));
        assert_memory_equal(sink.buf, forged, sink.n);
        assert_int_equal(ack_scan(token, ack, alen - 1, &sink), -1);
        assert_int_equal(sink.n, alen - 1);
        assert_memory_equal(sink.buf, ack, sink.n);
        assert_int_equal(ack_scan(token, "", 0, &sink), -1);
        assert_int_equal(sink.n, 0);

        /* The status trailer is not the answer. */
        _cleanup_free_ char *tr = trailer_for(token, " exit=0 signal=0 init_error=none errno=0 "
                                                     "skipped=0 artifacts=ok cache=none full=none\n");
        assert_int_equal(ack_scan(token, tr, strlen(tr), &sink), -1);
        assert_int_equal(sink.n, strlen(tr));
}

/* The host's stop records (capsule/protocol.h): init takes only a record with the artifact
 * token that names one of the two streams. */
static void test_stop_record(void **state) {
        (void) state;
        uint8_t rec[CAPSULE_STOP_RECORD_SIZE];
        capsule_stop_record(CAPSULE_CHUNK_ARTIFACTS, token, rec);
        assert_int_equal(rec[0], CAPSULE_STOP_RECORD);
        assert_int_equal(capsule_stop_record_parse(rec, token), CAPSULE_CHUNK_ARTIFACTS);
        capsule_stop_record(CAPSULE_CHUNK_CACHE, token, rec);
        assert_int_equal(capsule_stop_record_parse(rec, token), CAPSULE_CHUNK_CACHE);

        /* Any other token (each byte wrong in turn), tag or stream kind: not the host's. */
        for (size_t i = 0; i < CAPSULE_TOKEN_SIZE; i++) {
                capsule_stop_record(CAPSULE_CHUNK_ARTIFACTS, token, rec);
                rec[2 + i] ^= 0x01;
                assert_int_equal(capsule_stop_record_parse(rec, token), -1);
        }
        static const uint8_t zero[CAPSULE_TOKEN_SIZE] = {};
        capsule_stop_record(CAPSULE_CHUNK_ARTIFACTS, zero, rec);
        assert_int_equal(capsule_stop_record_parse(rec, token), -1);
        static const uint8_t kinds[] = { CAPSULE_CHUNK_CACHE_REFUSED, CAPSULE_CHUNK_ARTIFACTS_OVER, CAPSULE_CHUNK_CACHE_OVER, 0, 0xff };
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++) {
                capsule_stop_record(kinds[i], token, rec);
                assert_int_equal(capsule_stop_record_parse(rec, token), -1);
        }
        capsule_stop_record(CAPSULE_CHUNK_CACHE, token, rec);
        rec[0] = 'S';
        assert_int_equal(capsule_stop_record_parse(rec, token), -1);
}

/* The bounds record's four numbers, little-endian, whole. */
static void test_bounds_record(void **state) {
        (void) state;
        CapsuleBounds b = { .art_bytes = 1ULL << 30, .art_entries = 200000, .cache_bytes = UINT64_MAX, .cache_entries = 1 }, got;
        uint8_t buf[CAPSULE_BOUNDS_SIZE];
        capsule_bounds_put(&b, buf);
        static const uint8_t want_first[8] = { 0, 0, 0, 0x40, 0, 0, 0, 0 };
        assert_memory_equal(buf, want_first, sizeof(want_first));
        capsule_bounds_get(buf, &got);
        assert_memory_equal(&got, &b, sizeof(b));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_stop_record),
                cmocka_unit_test(test_bounds_record),
                cmocka_unit_test(test_token_every_chunking),
                cmocka_unit_test(test_token_absent),
                cmocka_unit_test(test_token_at_start),
                cmocka_unit_test(test_trailer_split),
                cmocka_unit_test(test_trailer_forged),
                cmocka_unit_test(test_trailer_flood),
                cmocka_unit_test(test_trailer_parse),
                cmocka_unit_test(test_job_ack),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
