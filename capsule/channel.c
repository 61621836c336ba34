/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "capsule/channel.h"
#include "common/macro.h"

void token_scanner_init(TokenScanner *s, const uint8_t token[static CAPSULE_TOKEN_SIZE]) {
        memset(s, 0, sizeof(*s));
        memcpy(s->token, token, CAPSULE_TOKEN_SIZE);
}

ptrdiff_t token_scanner_feed(TokenScanner *s, const uint8_t *buf, size_t len) {
        const size_t T = CAPSULE_TOKEN_SIZE;

        if (s->found)
                return 0;
        /* A token that began in the carried bytes and ends in this chunk. */
        for (size_t i = 0; i < s->n_carry; i++) {
                size_t have = s->n_carry - i, need = T - have;
                if (need > len)
                        continue;
                if (memcmp(s->carry + i, s->token, have) == 0 &&
                    memcmp(buf, s->token + have, need) == 0) {
                        s->found = true;
                        s->discarded += i;
                        return (ptrdiff_t) need;
                }
        }
        const uint8_t *hit = memmem(buf, len, s->token, T);
        if (hit) {
                s->found = true;
                s->discarded += s->n_carry + (size_t) (hit - buf);
                return (hit - buf) + (ptrdiff_t) T;
        }
        /* Keep the last T-1 bytes of carry+buf: the longest possible token prefix. */
        uint8_t joined[2 * CAPSULE_TOKEN_SIZE];
        size_t keep = T - 1, n = 0;
        if (len >= keep) {
                s->discarded += s->n_carry + len - keep;
                memcpy(s->carry, buf + len - keep, keep);
                s->n_carry = keep;
                return -1;
        }
        memcpy(joined, s->carry, s->n_carry);
        n = s->n_carry;
        memcpy(joined + n, buf, len);
        n += len;
        size_t start = n > keep ? n - keep : 0;
        s->discarded += start;
        memcpy(s->carry, joined + start, n - start);
        s->n_carry = n - start;
        return -1;
}

/* "<tag><hex of token><end>" into buf; its length. */
static size_t token_line(char *buf, size_t size, const char *tag, const uint8_t token[static CAPSULE_TOKEN_SIZE],
                         const char *end) {
        char hex[2 * CAPSULE_TOKEN_SIZE + 1];
        capsule_token_hex(token, hex);
        return (size_t) snprintf(buf, size, "%s%s%s", tag, hex, end);
}

void trailer_splitter_init(TrailerSplitter *t, const uint8_t log_token[static CAPSULE_TOKEN_SIZE],
                           LogSinkFn sink, void *userdata) {
        memset(t, 0, sizeof(*t));
        t->tag_len = token_line(t->tag, sizeof(t->tag), CAPSULE_TRAILER_TAG, log_token, "");
        t->sink = sink;
        t->userdata = userdata;
}

void trailer_splitter_feed(TrailerSplitter *t, const void *buf, size_t len) {
        const uint8_t *b = buf;
        const size_t M = CAPSULE_TRAILER_MAX;

        if (t->n_tail + len <= M) {
                memcpy(t->tail + t->n_tail, b, len);
                t->n_tail += len;
                return;
        }
        size_t flush = t->n_tail + len - M;
        if (flush <= t->n_tail) {
                t->sink(t->userdata, t->tail, flush);
                memmove(t->tail, t->tail + flush, t->n_tail - flush);
                t->n_tail -= flush;
                memcpy(t->tail + t->n_tail, b, len);
                t->n_tail += len;
                return;
        }
        if (t->n_tail > 0)
                t->sink(t->userdata, t->tail, t->n_tail);
        t->sink(t->userdata, b, flush - t->n_tail);
        memcpy(t->tail, b + len - M, M);
        t->n_tail = M;
}

static bool parse_int(const char **p, const char *end, const char *key, long long min,
                      long long max, long long *ret) {
        size_t kl = strlen(key);
        long long v = 0;
        bool neg = false, digits = false;

        if ((size_t) (end - *p) < kl || memcmp(*p, key, kl) != 0)
                return false;
        *p += kl;
        if (*p < end && **p == '-') {
                neg = true;
                (*p)++;
        }
        while (*p < end && **p >= '0' && **p <= '9') {
                if (v > (max + 1) / 10 + 1)
                        return false;
                v = v * 10 + (**p - '0');
                (*p)++;
                digits = true;
        }
        if (!digits)
                return false;
        if (neg)
                v = -v;
        if (v < min || v > max)
                return false;
        *ret = v;
        return true;
}

static bool parse_word(const char **p, const char *end, const char *key, char *out, size_t n) {
        size_t kl = strlen(key), i = 0;

        if ((size_t) (end - *p) < kl || memcmp(*p, key, kl) != 0)
                return false;
        *p += kl;
        while (*p < end && ((**p >= 'a' && **p <= 'z') || **p == '_')) {
                if (i + 1 >= n)
                        return false;
                out[i++] = *(*p)++;
        }
        out[i] = 0;
        return i > 0;
}

bool capsule_trailer_parse(const char *s, size_t len, CapsuleTrailer *ret) {
        const char *p = s, *end = s + len;
        CapsuleTrailer t = {};
        long long exit_code, sig, err, skipped;
        char art[8], cache[8], full[12];

        if (!parse_int(&p, end, " exit=", 0, 255, &exit_code) ||
            !parse_int(&p, end, " signal=", 0, 64, &sig) ||
            !parse_word(&p, end, " init_error=", t.init_error, sizeof(t.init_error)) ||
            !parse_int(&p, end, " errno=", 0, 4095, &err) ||
            !parse_int(&p, end, " skipped=", 0, (long long) 1 << 62, &skipped) ||
            !parse_word(&p, end, " artifacts=", art, sizeof(art)) ||
            !parse_word(&p, end, " cache=", cache, sizeof(cache)) ||
            !parse_word(&p, end, " full=", full, sizeof(full)))
                return false;
        if (p + 1 != end || *p != '\n')
                return false;
        if (!streq(art, "ok") && !streq(art, "failed"))
                return false;
        if (!streq(cache, "ok") && !streq(cache, "failed") && !streq(cache, "none"))
                return false;
        if (!streq(full, "none") && !streq(full, "work") && !streq(full, "tmp") && !streq(full, "work_tmp"))
                return false;
        t.cache_ok = streq(cache, "ok");
        t.work_full = streq(full, "work") || streq(full, "work_tmp");
        t.tmp_full = streq(full, "tmp") || streq(full, "work_tmp");
        t.exit_code = (int) exit_code;
        t.signal = (int) sig;
        t.error = (int) err;
        t.skipped = (uint64_t) skipped;
        t.artifacts_ok = streq(art, "ok");
        *ret = t;
        return true;
}

bool trailer_splitter_finish(TrailerSplitter *t, CapsuleTrailer *ret) {
        const uint8_t *hit = memmem(t->tail, t->n_tail, t->tag, t->tag_len);
        CapsuleTrailer tr;

        if (hit) {
                size_t pos = (size_t) (hit - t->tail), after = pos + t->tag_len;
                if (capsule_trailer_parse((const char *) t->tail + after, t->n_tail - after,
                                          &tr)) {
                        if (pos > 0)
                                t->sink(t->userdata, t->tail, pos);
                        t->n_tail = 0;
                        *ret = tr;
                        return true;
                }
        }
        if (t->n_tail > 0)
                t->sink(t->userdata, t->tail, t->n_tail);
        t->n_tail = 0;
        return false;
}

void job_ack_scanner_init(JobAckScanner *s, const uint8_t log_token[static CAPSULE_TOKEN_SIZE],
                          LogSinkFn sink, void *userdata) {
        memset(s, 0, sizeof(*s));
        s->ack_len = token_line(s->ack, sizeof(s->ack), CAPSULE_JOB_ACK_TAG, log_token, "\n");
        s->sink = sink;
        s->userdata = userdata;
}

bool job_ack_scanner_feed(JobAckScanner *s, uint8_t c) {
        s->held[s->n_held++] = (char) c;
        /* Keep the longest tail of what is held that is still a prefix of the answer. */
        size_t skip = 0;
        while (skip < s->n_held && memcmp(s->held + skip, s->ack, s->n_held - skip) != 0)
                skip++;
        if (skip > 0) {
                s->sink(s->userdata, s->held, skip);
                memmove(s->held, s->held + skip, s->n_held - skip);
                s->n_held -= skip;
        }
        if (s->n_held == s->ack_len) {
                s->n_held = 0;
                s->found = true;
                return true;
        }
        return false;
}

void job_ack_scanner_flush(JobAckScanner *s) {
        if (s->n_held > 0)
                s->sink(s->userdata, s->held, s->n_held);
        s->n_held = 0;
}
