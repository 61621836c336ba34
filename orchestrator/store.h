/* SPDX-License-Identifier: MIT */
/* The private request store below <state_dir>/requests/: one directory per id ever accepted
 * (until retention removes it), holding the exact bytes the controller wrote (request.json)
 * and the request's state (state.json).
 *
 * Guarantees:
 *  - capture is atomic: the id directory appears by one rename, complete, or not at all; an id
 *    that exists is never overwritten (-EEXIST), so an id runs at most once per retention;
 *  - every state change rewrites state.json atomically under the store lock (flock on the
 *    requests directory), so the daemon and the operator's CLI never lose an update and a
 *    transition is decided by exactly one of them;
 *  - nothing here follows a symlink or trusts a name: ids are validated before use. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/time-util.h"
#include "parser/request.h"

typedef enum RequestState {
        STATE_PENDING,  /* waiting for approve/deny/expiry */
        STATE_QUEUED,   /* will run in arrival order */
        STATE_RUNNING,  /* a capsule may exist; never restarted */
        STATE_FINAL,    /* has a published result */
        _STATE_MAX,
} RequestState;

typedef struct RequestRecord {
        char id[REQUEST_ID_MAX + 1];
        RequestState state;
        char status[16];              /* the final status (contract section 7) once final */
        uint64_t seq;                 /* arrival order */
        char sha256[SHA256_HEX_SIZE]; /* of request.json */
        int action_class;             /* ActionClass, or -1 for a rejected request without one */
        usec_t submitted_at;
        usec_t updated_at;
        char approver[128];           /* who approved or denied; "" when nobody */
        char decision[16];            /* "approved", "denied", "expired" or "" */
        usec_t decided_at;
        char reason[REQUEST_REASON_MAX + 1]; /* the operator's deny reason */
        bool ending_unrecorded;       /* captured final (a rejection): its result and its audit
                                       * line may still be missing; finish_request clears it */
} RequestRecord;

const char *request_state_to_string(RequestState s);

/* Exclusive lock over every record: flock on a new open file description of the requests
 * directory, returned as a lock fd (>= 0) that store_unlock() closes. */
int store_lock(int requests_fd);
void store_unlock(int lock_fd);

/* Capture the bytes a controller wrote under id: write request.json (exactly those bytes)
 * and state.json (from *rec: id, sha256, action_class, state, status) into a hidden
 * directory, fsync, rename it to <id>, fsync the store. Assigns rec->seq and the times.
 * Returns -EEXIST, with the existing record in *ret_existing when not NULL, if the id is
 * taken. Call with the store locked. */
int store_capture(int requests_fd, RequestRecord *rec, const char *bytes, size_t len, usec_t now,
                  RequestRecord *ret_existing, TfwError *e);

int store_load(int requests_fd, const char *id, RequestRecord *ret, TfwError *e);
int store_save(int requests_fd, const RequestRecord *rec, TfwError *e);

/* The captured bytes and their parsed form, re-validated with policy. */
int store_read_request(int requests_fd, const char *id, const RequestPolicy *policy,
                       Request **ret, TfwError *e);

/* Every record, sorted by seq. Hidden directories (captures in progress) are skipped. */
int store_list(int requests_fd, RequestRecord **ret, size_t *ret_n, TfwError *e);

int store_remove(int requests_fd, const char *id);

/* Remove the hidden directories of captures that a crash interrupted before their rename.
 * Only with the store locked and no capture possibly in progress (start-up recovery). */
int store_remove_incomplete(int requests_fd);
