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
        if (s->changes)
                return streq(what, "failed") ? "changes_import_failed" : "changes_rejected";
        return s->limits.cache ? (streq(what, "failed") ? "cache_import_failed" : "cache_rejected")
                               : (streq(what, "failed") ? "artifact_import_failed" : "artifact_rejected");
}

/* The importer's codes are the artifacts'; the cache's and the changes' streams have their own
 * words. */
static const char *cache_code(const OutputSink *s, const char *code) {
        bool cache = !s->changes;
        if ((!s->limits.cache && !s->changes) || !code)
                return code;
        if (streq(code, "artifact_rejected"))
                return cache ? "cache_rejected" : "changes_rejected";
        if (streq(code, "artifact_too_large"))
                return cache ? "cache_too_large" : "changes_too_large";
        if (streq(code, "artifact_import_failed"))
                return cache ? "cache_import_failed" : "changes_import_failed";
        return code;
}

void outputs_init(Outputs *o, const uint8_t token[static CAPSULE_TOKEN_SIZE], const ArtifactLimits *art, int art_fd,
                  const ArtifactLimits *cache, int cache_fd, const ArtifactLimits *changes, int changes_fd) {
        *o = (Outputs) {
                .art = { .limits = *art, .staging_fd = art_fd, .w = -EBADF },
                .cache = { .staging_fd = cache_fd, .w = -EBADF },
                .changes = { .staging_fd = changes_fd, .w = -EBADF, .changes = true },
                .cache_on = cache_fd >= 0,
                .changes_on = changes_fd >= 0,
                .ctl_fd = -EBADF,
        };
        atomic_store(&o->ctl_handoff, -EBADF);
        if (cache)
                o->cache.limits = *cache;
        if (changes)
                o->changes.limits = *changes;
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

/* The stop records init is owed: one for each stream the host dropped, once there is a channel
 * (capsule/protocol.h). A write never waits: init emptied the channel before its token, and at
 * most two records follow it. One that cannot be written (init already gone) leaves init
 * sending as before, its bytes dropped here. */
static void send_stops(Outputs *o) {
        if (o->ctl_fd < 0) {
                int fd = atomic_exchange(&o->ctl_handoff, -EBADF);
                if (fd < 0)
                        return;
                outputs_set_control(o, fd);
                return; /* it sent them */
        }
        OutputSink *sinks[] = { &o->art, &o->cache, &o->changes };
        const uint8_t kinds[] = { CAPSULE_CHUNK_ARTIFACTS, CAPSULE_CHUNK_CACHE, CAPSULE_CHUNK_CHANGES };
        for (size_t i = 0; i < ELEMENTSOF(sinks); i++) {
                uint8_t rec[CAPSULE_STOP_RECORD_SIZE];
                if (!sinks[i]->dropped || sinks[i]->stop_sent)
                        continue;
                sinks[i]->stop_sent = true;
                capsule_stop_record(kinds[i], o->scanner.token, rec);
                ssize_t k;
                do
                        k = write(o->ctl_fd, rec, sizeof(rec));
                while (k < 0 && errno == EINTR);
        }
}

void outputs_set_control(Outputs *o, int fd) {
        safe_close(o->ctl_fd);
        o->ctl_fd = fd;
        int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
                o->ctl_fd = safe_close(o->ctl_fd); /* a write that could wait: none at all */
                return;
        }
        send_stops(o);
}

void outputs_control_handoff(Outputs *o, int fd) {
        safe_close(atomic_exchange(&o->ctl_handoff, fd));
}

/* The host takes no more of s's stream (its importer stopped reading, or there is none): init
 * is told, so it neither sends nor reads the rest. */
static void stop_stream(Outputs *o, OutputSink *s) {
        if (s->dropped)
                return;
        s->dropped = true;
        send_stops(o);
}

/* Init ended a stream itself ('X', 'a', 'c'): its reason, in its words as they come (the
 * generic ones until then), unless a reason was given already or the host had refused the
 * stream first (then its importer's verdict is the reason). Nothing of the stream is kept: the
 * import ends now. */
static void init_ended(Outputs *o, OutputSink *s, const char *code, const char *generic) {
        if (!s->dropped && !s->error_code) {
                sink_error(s, code, "%s", generic);
                o->text = s;
                o->text_begun = false;
                if (s->started)
                        artifacts_import_abort(s->import);
        }
        sink_close(s);
}

static void framing_error(Outputs *o, const char *what) {
        sink_error(&o->art, "artifact_rejected", "the capsule broke the channel's framing: %s", what);
        if (o->cache_on)
                sink_error(&o->cache, "cache_rejected", "the capsule broke the channel's framing: %s", what);
        if (o->changes_on)
                sink_error(&o->changes, "changes_rejected", "the capsule broke the channel's framing: %s", what);
        sink_close(&o->art);
        sink_close(&o->cache);
        sink_close(&o->changes);
        stop_stream(o, &o->art);
        if (o->cache_on)
                stop_stream(o, &o->cache);
        if (o->changes_on)
                stop_stream(o, &o->changes);
        o->broken = true; /* and everything after is dropped */
}

/* A chunk's header is complete: where its bytes go. */
static void chunk_begin(Outputs *o) {
        o->hdr_n = 0;
        o->kind = o->hdr[0];
        o->text = NULL;
        o->left = (uint32_t) o->hdr[1] | (uint32_t) o->hdr[2] << 8 | (uint32_t) o->hdr[3] << 16 |
                  (uint32_t) o->hdr[4] << 24;
        if (o->left > CAPSULE_CHUNK_MAX)
                return framing_error(o, "an oversized chunk");
        switch (o->kind) {
        case CAPSULE_CHUNK_ARTIFACTS:
        case CAPSULE_CHUNK_ARTIFACTS_OVER:
                /* The artifacts come first: a chunk of them after the cache's is not init's. */
                if (o->cache.started || o->cache_refused || o->changes.started)
                        return framing_error(o, "artifacts after the cache");
                if (o->art_over)
                        return framing_error(o, "artifacts after their end");
                if (o->kind == CAPSULE_CHUNK_ARTIFACTS_OVER) {
                        o->art_over = true;
                        init_ended(o, &o->art, "artifact_too_large", "the capsule ended the artifacts: over max_artifact_bytes or max_artifact_entries");
                }
                return;
        case CAPSULE_CHUNK_CACHE:
        case CAPSULE_CHUNK_CACHE_REFUSED:
        case CAPSULE_CHUNK_CACHE_OVER:
                if (!o->cache_on)
                        return framing_error(o, "a cache stream nobody asked for");
                if (o->changes.started)
                        return framing_error(o, "the cache after the changes");
                if (o->art.w >= 0)
                        sink_close(&o->art); /* its stream is over: let it see the end */
                /* After a refusal nothing more of the cache is init's to send. */
                if (o->cache_refused)
                        return framing_error(o, "the cache after its refusal");
                if (o->kind == CAPSULE_CHUNK_CACHE && !o->cache.started)
                        sink_start(&o->cache);
                if (o->kind == CAPSULE_CHUNK_CACHE_REFUSED) {
                        o->cache_refused = true;
                        init_ended(o, &o->cache, "cache_refused", "the capsule could not send the whole cache");
                }
                if (o->kind == CAPSULE_CHUNK_CACHE_OVER) {
                        o->cache_refused = true;
                        init_ended(o, &o->cache, "cache_too_large", "the capsule ended the cache: over cache.max_bytes or cache.max_entries");
                }
                return;
        case CAPSULE_CHUNK_CHANGES:
                if (!o->changes_on)
                        return framing_error(o, "a changes stream nobody asked for");
                if (o->art.w >= 0)
                        sink_close(&o->art);
                if (o->cache.w >= 0)
                        sink_close(&o->cache); /* the cache's stream is over: let it see the end */
                if (!o->changes.started)
                        sink_start(&o->changes);
                return;
        default:
                return framing_error(o, "an unknown chunk");
        }
}

/* 'X', 'a', 'c': the message, printable, into the stream's error (init_ended). */
static void refusal_text(Outputs *o, const uint8_t *p, size_t n) {
        OutputSink *s = o->text;
        if (!s || n == 0)
                return;
        /* The generic words of init_ended() give way to init's own, once, as they come. */
        if (!o->text_begun) {
                s->error[0] = 0;
                o->text_begun = true;
        }
        size_t have = strlen(s->error);
        for (size_t i = 0; i < n && have + 1 < sizeof(s->error); i++)
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
                                : o->kind == CAPSULE_CHUNK_CHANGES ? &o->changes
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
                        if (k < 0) {
                                sink_close(s);
                                stop_stream(o, s);
                        } else
                                m = (size_t) k;
                } else
                        stop_stream(o, s); /* dropped: not worth sending */
                o->pending += m;
                o->pending_len -= m;
                o->left -= (uint32_t) m;
        }
        o->blocked = NULL;
}

void outputs_feed(Outputs *o, const uint8_t *buf, size_t len) {
        send_stops(o); /* owed from before the channel was handed over */
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
        if (hup && o->blocked) {
                sink_close(o->blocked);
                stop_stream(o, o->blocked);
        }
        demux(o);
}

void outputs_end(Outputs *o) {
        o->pending_len = 0;
        o->blocked = NULL;
        if (o->found && !o->broken && (o->left > 0 || o->hdr_n > 0))
                framing_error(o, "the channel ended inside a chunk");
        sink_close(&o->art);
        sink_close(&o->cache);
        sink_close(&o->changes);
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

bool outputs_finish(Outputs *o, ArtifactSummary *ret_art, ArtifactSummary *ret_cache, ArtifactSummary *ret_changes) {
        bool cache_seen = o->cache.started, changes_seen = o->changes.started;
        sink_finish(&o->art, ret_art);
        sink_finish(&o->cache, ret_cache);
        sink_finish(&o->changes, ret_changes);
        if (o->cache_on && !cache_seen && !o->cache.error_code)
                sink_error(&o->cache, "no_cache_stream", "the capsule ended before it sent the cache");
        if (o->changes_on && !changes_seen && !o->changes.error_code)
                sink_error(&o->changes, "no_changes_stream", "the capsule ended before it sent the job's changes");
        o->ctl_fd = safe_close(o->ctl_fd);
        safe_close(atomic_exchange(&o->ctl_handoff, -EBADF));
        return o->cache_on && cache_seen && !o->cache_refused && !o->cache.error_code;
}
