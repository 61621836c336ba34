/* SPDX-License-Identifier: MIT */
/* The artifact channel's chunks parted between the two importers (capsule/outputs.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "capsule/outputs.h"
#include "common/fd-util.h"
#include "common/macro.h"

static void sink_error(OutputSink *s, const char *code, const char *fmt, ...) _printf_(3, 4);
static void sink_error(OutputSink *s, const char *code, const char *fmt, ...) {
        va_list ap;
        if (s->error_code)
                return; /* the first reason is the one to tell */
        s->error_code = code;
        va_start(ap, fmt);
        vsnprintf(s->error, sizeof(s->error), fmt, ap);
        va_end(ap);
}

static const char *sink_code(const OutputSink *s, const char *what) {
        return s->limits.cache ? (streq(what, "failed") ? "cache_import_failed" : "cache_rejected")
                               : (streq(what, "failed") ? "artifact_import_failed" : "artifact_rejected");
}

/* The importer's codes are the artifacts'; the cache's stream has its own words. */
static const char *cache_code(const OutputSink *s, const char *code) {
        if (!s->limits.cache || !code)
                return code;
        if (streq(code, "artifact_rejected"))
                return "cache_rejected";
        if (streq(code, "artifact_too_large"))
                return "cache_too_large";
        if (streq(code, "artifact_import_failed"))
                return "cache_import_failed";
        return code;
}

void outputs_init(Outputs *o, const uint8_t token[static CAPSULE_TOKEN_SIZE], const ArtifactLimits *art, int art_fd,
                  const ArtifactLimits *cache, int cache_fd) {
        *o = (Outputs) {
                .art = { .limits = *art, .staging_fd = art_fd, .w = -EBADF },
                .cache = { .staging_fd = cache_fd, .w = -EBADF },
                .cache_on = cache_fd >= 0,
        };
        if (cache)
                o->cache.limits = *cache;
        token_scanner_init(&o->scanner, token);
}

static void sink_start(OutputSink *s) {
        int pfd[2];
        TfwError e = {};

        if (s->staging_fd < 0)
                return;
        if (pipe2(pfd, O_CLOEXEC) < 0) {
                sink_error(s, sink_code(s, "failed"), "pipe: %s", strerror(errno));
                return;
        }
        int r = artifacts_import_start(pfd[0], s->staging_fd, &s->limits, &s->import, &e);
        safe_close(pfd[0]);
        if (r < 0) {
                safe_close(pfd[1]);
                sink_error(s, cache_code(s, e.code) ?: sink_code(s, "failed"), "%s", e.message);
                return;
        }
        s->started = true;
        (void) fcntl(pfd[1], F_SETFL, O_NONBLOCK);
        s->w = pfd[1];
}

/* The importer takes no more (it stopped reading: a rule was broken; its verdict comes from
 * artifacts_import_finish), or the stream is over for it. */
static void sink_close(OutputSink *s) {
        s->w = safe_close(s->w);
}

static void framing_error(Outputs *o, const char *what) {
        sink_error(&o->art, "artifact_rejected", "the capsule broke the channel's framing: %s", what);
        if (o->cache_on)
                sink_error(&o->cache, "cache_rejected", "the capsule broke the channel's framing: %s", what);
        sink_close(&o->art);
        sink_close(&o->cache);
        o->broken = true; /* and everything after is dropped */
}

/* A chunk's header is complete: where its bytes go. */
static void chunk_begin(Outputs *o) {
        o->hdr_n = 0;
        o->kind = o->hdr[0];
        o->left = (uint32_t) o->hdr[1] | (uint32_t) o->hdr[2] << 8 | (uint32_t) o->hdr[3] << 16 |
                  (uint32_t) o->hdr[4] << 24;
        if (o->left > CAPSULE_CHUNK_MAX)
                return framing_error(o, "an oversized chunk");
        switch (o->kind) {
        case CAPSULE_CHUNK_ARTIFACTS:
                /* The artifacts come first: a chunk of them after the cache's is not init's. */
                if (o->cache.started || o->cache_refused)
                        return framing_error(o, "artifacts after the cache");
                return;
        case CAPSULE_CHUNK_CACHE:
        case CAPSULE_CHUNK_CACHE_REFUSED:
                if (!o->cache_on)
                        return framing_error(o, "a cache stream nobody asked for");
                if (o->art.w >= 0)
                        sink_close(&o->art); /* its stream is over: let it see the end */
                /* After a refusal nothing more of the cache is init's to send. */
                if (o->cache_refused)
                        return framing_error(o, "the cache after its refusal");
                if (o->kind == CAPSULE_CHUNK_CACHE && !o->cache.started)
                        sink_start(&o->cache);
                if (o->kind == CAPSULE_CHUNK_CACHE_REFUSED) {
                        o->cache_refused = true;
                        sink_error(&o->cache, "cache_refused", "the capsule could not send the whole cache");
                        sink_close(&o->cache);
                }
                return;
        default:
                return framing_error(o, "an unknown chunk");
        }
}

/* 'X': the message, printable, into the cache's error. */
static void refusal_text(Outputs *o, const uint8_t *p, size_t n) {
        OutputSink *s = &o->cache;
        /* The generic words of chunk_begin() give way to init's own, once, as they come. */
        if (s->error_code && streq(s->error_code, "cache_refused") && !o->refusal_text) {
                s->error[0] = 0;
                o->refusal_text = true;
        }
        size_t have = strlen(s->error);
        for (size_t i = 0; i < n && have + 1 < sizeof(s->error) && o->refusal_text; i++)
                s->error[have++] = p[i] >= 0x20 && p[i] < 0x7f ? (char) p[i] : '?';
        s->error[have] = 0;
}

/* Part the pending bytes; stops where an importer cannot take more now. */
static void demux(Outputs *o) {
        while (o->pending_len > 0) {
                if (o->broken) {
                        o->pending_len = 0;
                        break;
                }
                if (o->left == 0 && o->kind != 0 && o->hdr_n == 0)
                        o->kind = 0;
                if (o->kind == 0) {
                        size_t m = MIN(o->pending_len, CAPSULE_CHUNK_HEADER - o->hdr_n);
                        memcpy(o->hdr + o->hdr_n, o->pending, m);
                        o->hdr_n += m;
                        o->pending += m;
                        o->pending_len -= m;
                        if (o->hdr_n == CAPSULE_CHUNK_HEADER)
                                chunk_begin(o);
                        continue;
                }
                size_t m = MIN(o->pending_len, (size_t) o->left);
                OutputSink *s = o->kind == CAPSULE_CHUNK_ARTIFACTS ? &o->art
                                : o->kind == CAPSULE_CHUNK_CACHE  ? &o->cache
                                                                  : NULL;
                if (!s)
                        refusal_text(o, o->pending, m);
                else if (s->w >= 0) {
                        ssize_t k = write(s->w, o->pending, m);
                        if (k < 0 && errno == EINTR)
                                continue;
                        if (k < 0 && errno == EAGAIN) {
                                o->blocked = s;
                                return;
                        }
                        if (k < 0)
                                sink_close(s);
                        else
                                m = (size_t) k;
                }
                o->pending += m;
                o->pending_len -= m;
                o->left -= (uint32_t) m;
        }
        o->blocked = NULL;
}

void outputs_feed(Outputs *o, const uint8_t *buf, size_t len) {
        if (o->broken)
                return;
        if (!o->found) {
                ptrdiff_t off = token_scanner_feed(&o->scanner, buf, len);
                if (off < 0)
                        return;
                o->found = true;
                sink_start(&o->art);
                buf += off;
                len -= (size_t) off;
        }
        o->pending = buf;
        o->pending_len = len;
        demux(o);
}

int outputs_blocked_fd(const Outputs *o) {
        return o->pending_len > 0 && o->blocked ? o->blocked->w : -1;
}

void outputs_writable(Outputs *o, bool hup) {
        if (hup && o->blocked)
                sink_close(o->blocked);
        demux(o);
}

void outputs_end(Outputs *o) {
        o->pending_len = 0;
        o->blocked = NULL;
        if (o->found && !o->broken && (o->left > 0 || o->hdr_n > 0))
                framing_error(o, "the channel ended inside a chunk");
        sink_close(&o->art);
        sink_close(&o->cache);
}

uint64_t outputs_junk_bytes(const Outputs *o) {
        return o->scanner.found ? o->scanner.discarded : o->scanner.discarded + o->scanner.n_carry;
}

static void sink_finish(OutputSink *s, ArtifactSummary *ret) {
        sink_close(s);
        if (!s->started)
                return;
        TfwError e = {};
        int r = artifacts_import_finish(s->import, ret, &e);
        s->started = false;
        if (r < 0)
                sink_error(s, cache_code(s, e.code) ?: sink_code(s, "rejected"), "%s", e.message);
}

bool outputs_finish(Outputs *o, ArtifactSummary *ret_art, ArtifactSummary *ret_cache) {
        bool cache_seen = o->cache.started;
        sink_finish(&o->art, ret_art);
        sink_finish(&o->cache, ret_cache);
        if (o->cache_on && !cache_seen && !o->cache.error_code)
                sink_error(&o->cache, "no_cache_stream", "the capsule ended before it sent the cache");
        return o->cache_on && cache_seen && !o->cache_refused && !o->cache.error_code;
}
