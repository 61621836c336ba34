/* SPDX-License-Identifier: MIT */
/* The host's side of the artifact channel (capsule/outputs.h): after init's token, chunks parted
 * between the artifacts' importer and the cache's; a channel that breaks the framing keeps
 * nothing of the cache. Runs the real importers (forked, confined: root only). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/outputs.h"
#include "common/fd-util.h"
#include "common/macro.h"
#include "tests/unit/lib/tfw-test.h"

static const uint8_t token[CAPSULE_TOKEN_SIZE] = "0123456789abcdef";

typedef struct Chan {
        uint8_t *p;
        size_t n;
} Chan;

static void put(Chan *c, const void *p, size_t n) {
        c->p = realloc(c->p, c->n + n + 1);
        assert_non_null(c->p);
        memcpy(c->p + c->n, p, n);
        c->n += n;
}

static void chunk(Chan *c, uint8_t kind, const void *p, size_t n) {
        uint8_t h[CAPSULE_CHUNK_HEADER] = { kind, (uint8_t) n, (uint8_t) (n >> 8), (uint8_t) (n >> 16), (uint8_t) (n >> 24) };
        put(c, h, sizeof(h));
        put(c, p, n);
}

/* A tar stream made by tar(1) of `names` after `make` (shell) ran in a fresh directory. */
static void tar_made(TestDir *d, const char *make, const char *names, Chan *ret) {
        _cleanup_free_ char *cmd = NULL;
        assert_true(asprintf(&cmd, "cd '%s' && rm -rf t && mkdir t && cd t && %s tar --format=pax -cf ../t.tar %s",
                             d->path, make, names) > 0);
        assert_int_equal(system(cmd), 0);
        _cleanup_close_ int fd = openat(d->fd, "t.tar", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        char *buf = NULL;
        size_t n = 0;
        assert_int_equal(read_full_fd_bounded(fd, 64 << 20, &buf, &n), 0);
        *ret = (Chan) { .p = (uint8_t *) buf, .n = n };
}

/* "" for no entry, "0" for a cache path's directory holding one file. */
static void tar_of(TestDir *d, const char *what, Chan *ret) {
        if (streq(what, "0"))
                tar_made(d, "mkdir 0 && echo x >0/f &&", "0", ret);
        else
                tar_made(d, "", "-T /dev/null", ret);
}

/* A stream as chunks of at most CAPSULE_CHUNK_MAX bytes, as init sends it. */
static void chunks(Chan *c, uint8_t kind, const Chan *t);

typedef struct Run {
        bool whole;
        OutputSink art, cache;
        ArtifactSummary as, cs;
} Run;

/* The channel through outputs, with a cache importer when with_cache, without the artifacts'
 * when !want_art, the control channel ctl (or none: -1), handed over from the start or, late,
 * halfway through the channel; byte by byte when split (every header and payload cut at every
 * place). */
static void run_ctl(TestDir *d, const Chan *c, bool with_cache, bool want_art, bool split, int ctl, bool late, Run *ret) {
        (void) rm_rf_at(d->fd, "art");
        (void) rm_rf_at(d->fd, "cache");
        assert_int_equal(mkdirat(d->fd, "art", 0700), 0);
        assert_int_equal(mkdirat(d->fd, "cache", 0700), 0);
        _cleanup_close_ int art = open_dir_at(d->fd, "art"), cache = open_dir_at(d->fd, "cache");
        ArtifactLimits al = { .max_bytes = 1 << 20, .max_entries = 100, .unpriv_uid = 65534, .unpriv_gid = 65534,
                              .group = getgid() };
        ArtifactLimits cl = al;
        cl.cache = true;
        cl.owner = getuid();
        Outputs o;
        outputs_init(&o, token, &al, want_art ? art : -1, &cl, with_cache ? cache : -1, NULL, -1);
        if (ctl >= 0 && !late)
                outputs_set_control(&o, fcntl(ctl, F_DUPFD_CLOEXEC, 3));
        bool handed = ctl < 0 || !late;
        for (size_t i = 0; i < c->n;) {
                size_t end = handed ? c->n : c->n / 2, m = split ? MIN((size_t) 1, end - i) : end - i;
                if (m == 0) {
                        outputs_control_handoff(&o, fcntl(ctl, F_DUPFD_CLOEXEC, 3));
                        handed = true;
                        continue;
                }
                outputs_feed(&o, c->p + i, m);
                while (outputs_blocked_fd(&o) >= 0)
                        outputs_writable(&o, false);
                i += m;
        }
        outputs_end(&o);
        *ret = (Run) {};
        ArtifactSummary hs;
        ret->whole = outputs_finish(&o, &ret->as, &ret->cs, &hs);
        ret->art = o.art;
        ret->cache = o.cache;
        assert_true(o.ctl_fd < 0); /* outputs_finish closed it */
}

static void run(TestDir *d, const Chan *c, bool with_cache, bool split, Run *ret) {
        run_ctl(d, c, with_cache, true, split, -1, false, ret);
}

static void chunks(Chan *c, uint8_t kind, const Chan *t) {
        for (size_t i = 0; i < t->n; i += CAPSULE_CHUNK_MAX)
                chunk(c, kind, t->p + i, MIN(t->n - i, (size_t) CAPSULE_CHUNK_MAX));
}

static void test_both_streams(void **state) {
        TestDir *d = *state;
        Chan a, t, c = {};
        Run r;
        if (getuid() != 0)
                tfw_skip("the importers drop to another uid: root only");
        tar_of(d, "", &a);
        tar_of(d, "0", &t);
        put(&c, "junk", 4);
        put(&c, token, sizeof(token));
        chunk(&c, CAPSULE_CHUNK_ARTIFACTS, a.p, a.n);
        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n / 2);
        chunk(&c, CAPSULE_CHUNK_CACHE, t.p + t.n / 2, t.n - t.n / 2);
        for (int split = 0; split < 2; split++) {
                run(d, &c, true, split, &r);
                assert_true(r.whole);
                assert_null(r.art.error_code);
                assert_null(r.cache.error_code);
                assert_int_equal(faccessat(d->fd, "cache/0/f", F_OK, AT_SYMLINK_NOFOLLOW), 0);
        }
        free(a.p);
        free(t.p);
        free(c.p);
}

/* Each way of breaking the framing, or init's refusal: nothing of the cache is whole. */
static void test_broken_channels(void **state) {
        TestDir *d = *state;
        Chan a, t;
        Run r;
        if (getuid() != 0)
                tfw_skip("the importers drop to another uid: root only");
        tar_of(d, "", &a);
        tar_of(d, "0", &t);
        static const char *const cases[] = {
                "artifacts after the cache", "a cache nobody asked for", "an empty refusal", "the cache after its refusal",
                "an oversized chunk", "an unknown chunk", "the end inside a chunk", "the end inside a header",
                "no cache stream", "artifacts after their end", "artifacts' end after the cache", "the cache after its end",
        };
        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                Chan c = {};
                bool with_cache = k != 1;
                put(&c, token, sizeof(token));
                chunk(&c, CAPSULE_CHUNK_ARTIFACTS, a.p, a.n);
                switch (k) {
                case 0:
                        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
                        chunk(&c, CAPSULE_CHUNK_ARTIFACTS, a.p, 10);
                        break;
                case 1:
                        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
                        break;
                case 2:
                        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
                        chunk(&c, CAPSULE_CHUNK_CACHE_REFUSED, "", 0);
                        break;
                case 3:
                        chunk(&c, CAPSULE_CHUNK_CACHE_REFUSED, "no", 2);
                        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
                        break;
                case 4: {
                        uint8_t h[CAPSULE_CHUNK_HEADER] = { CAPSULE_CHUNK_CACHE, 0, 0, 0x20, 0 }; /* 2 MiB */
                        put(&c, h, sizeof(h));
                        put(&c, t.p, t.n);
                        break;
                }
                case 5:
                        chunk(&c, 'Q', t.p, t.n);
                        break;
                case 6:
                        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
                        c.n -= 100;
                        break;
                case 7:
                        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
                        put(&c, "C\x01", 2);
                        break;
                case 8:
                        break;
                case 9:
                        chunk(&c, CAPSULE_CHUNK_ARTIFACTS_OVER, "over", 4);
                        chunk(&c, CAPSULE_CHUNK_ARTIFACTS, a.p, 10);
                        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
                        break;
                case 10:
                        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
                        chunk(&c, CAPSULE_CHUNK_ARTIFACTS_OVER, "over", 4);
                        break;
                case 11:
                        chunk(&c, CAPSULE_CHUNK_CACHE_OVER, "over", 4);
                        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
                        break;
                }
                run(d, &c, with_cache, false, &r);
                if (r.whole || (with_cache && !r.cache.error_code) || (!with_cache && !r.art.error_code))
                        fail_msg("%s: whole=%d cache error %s art error %s", cases[k], r.whole, r.cache.error_code ?: "-",
                                 r.art.error_code ?: "-");
                free(c.p);
        }
        /* init's own words reach the result */
        Chan c = {};
        put(&c, token, sizeof(token));
        chunk(&c, CAPSULE_CHUNK_ARTIFACTS, a.p, a.n);
        chunk(&c, CAPSULE_CHUNK_CACHE_REFUSED, "'/work/build' is not a directory", 32);
        run(d, &c, true, true, &r);
        assert_false(r.whole);
        assert_string_equal(r.cache.error_code, "cache_refused");
        assert_string_equal(r.cache.error, "'/work/build' is not a directory");
        free(c.p);
        free(a.p);
        free(t.p);
}

/* Init ended a stream over the bounds ('a', 'c'): its words are the reason, nothing of that
 * stream is kept (its import is ended, even where what came so far was a whole archive), and
 * the artifacts' end does not end the cache's stream. */
static void test_init_over(void **state) {
        TestDir *d = *state;
        static const char words[] = "artifacts: more than 1048576 bytes (at 'big'); the capsule did not send it";
        Chan t, c = {};
        Run r;
        if (getuid() != 0)
                tfw_skip("the importers drop to another uid: root only");
        tar_of(d, "0", &t);
        put(&c, token, sizeof(token));
        chunk(&c, CAPSULE_CHUNK_ARTIFACTS, t.p, t.n); /* whole: it would be imported */
        chunk(&c, CAPSULE_CHUNK_ARTIFACTS_OVER, words, sizeof(words) - 1);
        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
        for (int split = 0; split < 2; split++) {
                run(d, &c, true, split, &r);
                assert_string_equal(r.art.error_code, "artifact_too_large");
                assert_string_equal(r.art.error, words);
                assert_int_equal(faccessat(d->fd, "art/0", F_OK, AT_SYMLINK_NOFOLLOW), -1);
                assert_true(r.whole);
                assert_null(r.cache.error_code);
                assert_int_equal(faccessat(d->fd, "cache/0/f", F_OK, AT_SYMLINK_NOFOLLOW), 0);
        }
        free(c.p);

        /* The cache's: not whole, in init's words; an empty message keeps the generic ones. */
        static const char cwords[] = "cache: more than 100 entries (at '0/x'); the capsule did not send it";
        c = (Chan) {};
        put(&c, token, sizeof(token));
        chunk(&c, CAPSULE_CHUNK_CACHE, t.p, t.n);
        chunk(&c, CAPSULE_CHUNK_CACHE_OVER, cwords, sizeof(cwords) - 1);
        run(d, &c, true, true, &r);
        assert_false(r.whole);
        assert_string_equal(r.cache.error_code, "cache_too_large");
        assert_string_equal(r.cache.error, cwords);
        assert_int_equal(faccessat(d->fd, "cache/0", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        free(c.p);
        c = (Chan) {};
        put(&c, token, sizeof(token));
        chunk(&c, CAPSULE_CHUNK_ARTIFACTS_OVER, "", 0);
        run(d, &c, false, false, &r);
        assert_string_equal(r.art.error_code, "artifact_too_large");
        assert_non_null(strstr(r.art.error, "max_artifact_bytes"));
        free(c.p);
        free(t.p);
}

/* What init is told on the control channel: nothing when both streams are taken whole; one stop
 * record for a stream the importer stopped reading (over its bound), and the other stream still
 * taken; one for a stream nobody takes. */
static void test_stop_records(void **state) {
        TestDir *d = *state;
        Chan big, t, none;
        Run r;
        int ctl[2];
        uint8_t got[4 * CAPSULE_STOP_RECORD_SIZE];
        if (getuid() != 0)
                tfw_skip("the importers drop to another uid: root only");
        /* The importer stops at 1 MiB: the host writes into a pipe it no longer reads. */
        assert_true(signal(SIGPIPE, SIG_IGN) != SIG_ERR);
        tar_made(d, "mkdir 0 && head -c 8000000 /dev/zero >0/big &&", "0", &big);
        tar_of(d, "0", &t);
        tar_of(d, "", &none);
        assert_int_equal(pipe2(ctl, O_CLOEXEC | O_NONBLOCK), 0);
        struct { const char *what; const Chan *art, *cache; bool want_art; int stop; bool late; } cases[] = {
                { "both taken", &none, &t, true, 0, false },
                { "artifacts over their bound", &big, &t, true, CAPSULE_CHUNK_ARTIFACTS, false },
                { "the cache over its bound", &none, &big, true, CAPSULE_CHUNK_CACHE, false },
                { "artifacts nobody takes", &t, &t, false, CAPSULE_CHUNK_ARTIFACTS, false },
                /* the input thread hands the channel over after the stop was wanted */
                { "artifacts over their bound, the channel late", &big, &t, true, CAPSULE_CHUNK_ARTIFACTS, true },
                { "both taken, the channel late", &none, &t, true, 0, true },
        };
        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                Chan c = {};
                put(&c, token, sizeof(token));
                chunks(&c, CAPSULE_CHUNK_ARTIFACTS, cases[k].art);
                chunks(&c, CAPSULE_CHUNK_CACHE, cases[k].cache);
                run_ctl(d, &c, true, cases[k].want_art, false, ctl[1], cases[k].late, &r);
                free(c.p);
                ssize_t n = read(ctl[0], got, sizeof(got));
                if (!cases[k].stop) {
                        if (n != -1 || errno != EAGAIN)
                                fail_msg("%s: %zd bytes on the control channel", cases[k].what, n);
                        assert_true(r.whole);
                        assert_null(r.art.error_code);
                        continue;
                }
                if (n != CAPSULE_STOP_RECORD_SIZE || capsule_stop_record_parse(got, token) != cases[k].stop)
                        fail_msg("%s: %zd bytes on the control channel, not one stop record", cases[k].what, n);
                if (cases[k].stop == CAPSULE_CHUNK_ARTIFACTS && cases[k].want_art) {
                        assert_string_equal(r.art.error_code, "artifact_too_large");
                        assert_true(r.whole); /* the cache still taken, whole */
                }
                if (cases[k].stop == CAPSULE_CHUNK_CACHE) {
                        assert_string_equal(r.cache.error_code, "cache_too_large");
                        assert_false(r.whole);
                }
                if (!cases[k].want_art) {
                        assert_null(r.art.error_code);
                        assert_true(r.whole);
                }
        }
        safe_close(ctl[0]);
        safe_close(ctl[1]);
        free(big.p);
        free(t.p);
        free(none.p);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_init_over, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_stop_records, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_both_streams, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_broken_channels, tfw_tmpdir_setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
