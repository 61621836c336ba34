/* SPDX-License-Identifier: MIT */
/* Host side of the capsule channels (capsule/protocol.h): finding the artifact token in a
 * stream the job may have filled with junk, and separating init's status trailer from the
 * job's log. Pure functions over buffers, so every edge is unit-tested
 * (tests/unit/test-capsule-channel.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capsule/protocol.h"

/* ---- artifact channel: discard until the token --------------------------------------- */

typedef struct TokenScanner {
        uint8_t token[CAPSULE_TOKEN_SIZE];
        uint8_t carry[CAPSULE_TOKEN_SIZE]; /* last bytes seen, a possible token prefix */
        size_t n_carry;
        bool found;
        uint64_t discarded; /* bytes before the token (what the job wrote here) */
} TokenScanner;

void token_scanner_init(TokenScanner *s, const uint8_t token[static CAPSULE_TOKEN_SIZE]);

/* Feed a chunk. Returns the offset in buf just past the token when this chunk completes it
 * (the bytes from there on are init's tar stream), or -1 when the token is still not found
 * (everything fed so far is discarded). After a hit the scanner must not be fed again. */
ptrdiff_t token_scanner_feed(TokenScanner *s, const uint8_t *buf, size_t len);

/* ---- log channel: hold back a possible trailer ---------------------------------------- */

typedef void (*LogSinkFn)(void *userdata, const void *data, size_t len);

typedef struct TrailerSplitter {
        char tag[sizeof(CAPSULE_TRAILER_TAG) + 2 * CAPSULE_TOKEN_SIZE]; /* tag + hex token */
        size_t tag_len;
        uint8_t tail[CAPSULE_TRAILER_MAX];
        size_t n_tail;
        LogSinkFn sink;
        void *userdata;
} TrailerSplitter;

typedef struct CapsuleTrailer {
        int exit_code;
        int signal;
        char init_error[32];
        int error;
        uint64_t skipped;
        bool artifacts_ok;
        bool cache_ok;      /* init sent every cache path whole ("cache=ok") */
        bool work_full;     /* /work, then /tmp, left full by the job ("full=") */
        bool tmp_full;
} CapsuleTrailer;

void trailer_splitter_init(TrailerSplitter *t, const uint8_t log_token[static CAPSULE_TOKEN_SIZE],
                           LogSinkFn sink, void *userdata);

/* Pass a chunk of the log channel: everything but the last CAPSULE_TRAILER_MAX bytes goes to
 * the sink now. */
void trailer_splitter_feed(TrailerSplitter *t, const void *buf, size_t len);

/* At the end of the channel: when the held-back bytes end with a well-formed trailer carrying
 * the token, the bytes before it go to the sink, *ret is filled and true is returned.
 * Otherwise all held-back bytes go to the sink and false is returned. */
bool trailer_splitter_finish(TrailerSplitter *t, CapsuleTrailer *ret);

/* ---- log channel of a warm capsule: init's answer to the job record ---------------------- */

typedef struct JobAckScanner {
        char ack[sizeof(CAPSULE_JOB_ACK_TAG) + 2 * CAPSULE_TOKEN_SIZE + 1]; /* tag, hex, \n */
        size_t ack_len;
        char held[sizeof(CAPSULE_JOB_ACK_TAG) + 2 * CAPSULE_TOKEN_SIZE + 1]; /* a possible prefix */
        size_t n_held;
        bool found;
        LogSinkFn sink;
        void *userdata;
} JobAckScanner;

void job_ack_scanner_init(JobAckScanner *s, const uint8_t log_token[static CAPSULE_TOKEN_SIZE],
                          LogSinkFn sink, void *userdata);

/* Feed one byte read before the answer. Returns true when it completes the answer (the ack
 * itself goes nowhere; feed nothing more). Every byte that cannot be part of it (what runsc
 * wrote on the channel) goes to the sink. */
bool job_ack_scanner_feed(JobAckScanner *s, uint8_t c);

/* At the end of the channel without the answer: the held-back bytes go to the sink. */
void job_ack_scanner_flush(JobAckScanner *s);

/* Parse the fields after "<tag><hex token>": " exit=N signal=N init_error=W errno=N
 * skipped=N artifacts=ok|failed cache=ok|failed|none\n", exactly, up to the end. */
bool capsule_trailer_parse(const char *s, size_t len, CapsuleTrailer *ret);
