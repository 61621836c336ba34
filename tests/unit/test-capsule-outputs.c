/* SPDX-License-Identifier: MIT */
/* The host's side of the artifact channel (capsule/outputs.h): after init's token, chunks parted
 * between the artifacts' importer and the cache's; a channel that breaks the framing keeps
 * nothing of the cache. Runs the real importers (forked, confined: root only). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

/* A tar stream made by tar(1) of the entries named in a fresh directory: "" for none, "0" for a
 * cache path's directory holding one file. */
static void tar_of(TestDir *d, const char *what, Chan *ret) {
        _cleanup_free_ char *cmd = NULL, *path = NULL;
        assert_true(asprintf(&cmd,
                             "cd '%s' && rm -rf t && mkdir t && cd t && %s tar --format=pax -cf ../t.tar %s",
                             d->path, streq(what, "0") ? "mkdir 0 && echo x >0/f &&" : "", streq(what, "0") ? "0" : "-T /dev/null") > 0);
        assert_int_equal(system(cmd), 0);
        _cleanup_close_ int fd = openat(d->fd, "t.tar", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        char *buf = NULL;
        size_t n = 0;
        assert_int_equal(read_full_fd_bounded(fd, 1 << 20, &buf, &n), 0);
        *ret = (Chan) { .p = (uint8_t *) buf, .n = n };
}

typedef struct Run {
        bool whole;
        OutputSink art, cache;
        ArtifactSummary as, cs;
} Run;

/* The channel through outputs, with a cache importer when with_cache; byte by byte when split
 * (every header and payload cut at every place). */
static void run(TestDir *d, const Chan *c, bool with_cache, bool split, Run *ret) {
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
        outputs_init(&o, token, &al, art, &cl, with_cache ? cache : -1);
        for (size_t i = 0; i < c->n;) {
                size_t m = split ? 1 : c->n - i;
                outputs_feed(&o, c->p + i, m);
                while (outputs_blocked_fd(&o) >= 0)
                        outputs_writable(&o, false);
                i += m;
        }
        outputs_end(&o);
        *ret = (Run) {};
        ret->whole = outputs_finish(&o, &ret->as, &ret->cs);
        ret->art = o.art;
        ret->cache = o.cache;
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
                "no cache stream",
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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_both_streams, tfw_tmpdir_setup, tfw_tmpdir_teardown),
                cmocka_unit_test_setup_teardown(test_broken_channels, tfw_tmpdir_setup, tfw_tmpdir_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
