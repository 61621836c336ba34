/* SPDX-License-Identifier: MIT */
/* The host's side of the artifact channel (capsule/protocol.h): everything before init's token
 * is dropped, then the chunks are parted between three bounded importers (artifacts/import.h):
 * the artifacts' stream into their staging directory, the build cache's (docs/cache.md) into
 * the cache's take-in with the cache profile, and the job's changes (a changeset, docs/capsule.md
 * "Changes") into theirs. An importer that stopped reading (a rule broken,
 * a limit met) has the rest of its chunks dropped, so init is never left blocked by it, and
 * init is told on the control channel to send no more of that stream (CAPSULE_STOP_RECORD), so
 * it is not drained to its end; one that is slow holds the channel (back-pressure) and counts
 * against the job's timeout. A stream init itself ended over the bounds ('a', 'c') has its
 * import ended too: nothing of it is kept. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "artifacts/import.h"
#include "capsule/channel.h"

typedef struct OutputSink {
        ArtifactLimits limits;
        int staging_fd;          /* -1: not wanted (its chunks are dropped) */
        int w;                   /* the importer's stream, while it takes bytes */
        ArtifactImport *import;
        bool started;
        bool changes;            /* the changes' sink (its own error codes) */
        bool dropped;            /* the host takes no more of its stream (init is told) */
        bool stop_sent;          /* ... and init was told */
        const char *error_code;  /* the first reason nothing (or not all) was kept */
        char error[1024];
} OutputSink;

typedef struct Outputs {
        TokenScanner scanner;
        bool found;              /* the token was seen: chunks follow */
        bool broken;             /* the framing was broken: the rest is dropped */
        bool cache_on;           /* a cache stream may come */
        bool changes_on;         /* a changes stream may come (CAPSULE_CHUNK_CHANGES) */
        OutputSink art, cache, changes;
        uint8_t hdr[CAPSULE_CHUNK_HEADER];
        size_t hdr_n;
        uint8_t kind;            /* of the chunk being read */
        uint32_t left;           /* its bytes still to come */
        bool cache_refused;      /* init sent 'X' or 'c': no more of the cache */
        bool art_over;           /* init sent 'a': no more of the artifacts */
        OutputSink *text;        /* whose error init's words ('X', 'a', 'c') are collected into */
        bool text_begun;         /* they replaced the generic words */
        int ctl_fd;              /* the control channel to init (outputs_set_control), or < 0 */
        atomic_int ctl_handoff;  /* or one handed over by another thread, not taken yet */
        const uint8_t *pending;  /* bytes read and not taken yet */
        size_t pending_len;
        OutputSink *blocked;     /* the importer that did not take them */
} Outputs;

/* art / cache / changes: the importers' limits and staging directories (cache_fd -1: no cache;
 * changes_fd -1: no changes). */
void outputs_init(Outputs *o, const uint8_t token[static CAPSULE_TOKEN_SIZE], const ArtifactLimits *art, int art_fd,
                  const ArtifactLimits *cache, int cache_fd, const ArtifactLimits *changes, int changes_fd);

/* The channel to init for stop records: the capsule's input channel once its input was
 * written whole, taken over (closed by outputs_finish). Its writes never wait: it is made
 * O_NONBLOCK. A stop the host wanted before it came is sent then. */
void outputs_set_control(Outputs *o, int fd);
/* The same from another thread (the one that wrote the input, when it went out whole): taken
 * by the next outputs_feed or outputs_writable, or closed by outputs_finish. */
void outputs_control_handoff(Outputs *o, int fd);

/* Give it the bytes just read from the channel (only when outputs_blocked_fd() is -1). Bytes an
 * importer cannot take now stay pending: the buffer must stay valid until then. */
void outputs_feed(Outputs *o, const uint8_t *buf, size_t len);
/* The importer the pending bytes wait for (poll it for POLLOUT), or -1. */
int outputs_blocked_fd(const Outputs *o);
/* It became writable (or hung up: hup). */
void outputs_writable(Outputs *o, bool hup);
/* The channel ended: the importers see the end of their streams. */
void outputs_end(Outputs *o);
/* What the job wrote before the token (junk). */
uint64_t outputs_junk_bytes(const Outputs *o);

/* The importers' verdicts (waits for them). ret_art / ret_cache: their summaries. Returns
 * whether the cache was imported whole (false without one). The sinks' error fields say why not;
 * the changes were imported whole when changes_on, o->changes.started was seen (ret_changes
 * filled) and o->changes.error_code is NULL. Closes the control channel. */
bool outputs_finish(Outputs *o, ArtifactSummary *ret_art, ArtifactSummary *ret_cache, ArtifactSummary *ret_changes);
