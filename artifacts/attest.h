/* SPDX-License-Identifier: MIT */
/* The in-toto v1 Statements the worker signs (contract sections 7 and 8), wrapped in DSSE
 * envelopes by artifacts/signing.h.
 *
 * Validation plane: subject = the candidate tree ({"name": "<repo>", "digest": {"gitTree":
 * "<hex>"}}), predicateType ATTEST_PREDICATE_VALIDATION, predicate = check, repo, proposal,
 * policy_version, result ("pass" only on exit 0, else "fail"), status (the capsule's word),
 * exit_code, environment_digest, issuer (the key's identity), worker (the lane label), job,
 * attempt, started_at, finished_at.
 *
 * Inbox plane: subject = the snapshot tree (or, when nothing was snapshotted, the request
 * as {"name": "request", "digest": {"sha256": …}}), predicateType ATTEST_PREDICATE_INBOX,
 * predicate = id, request_sha256, approval, environment_digest, status, exit_code, signal,
 * artifacts ([{"path","sha256"}]), issuer, worker, finished_at.
 *
 * The statement is serialised canonically (sorted keys, no spaces) before signing, so the same
 * facts always give the same bytes. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/time-util.h"
#include "artifacts/signing.h"

#define INTOTO_STATEMENT_TYPE "https://in-toto.io/Statement/v1"
#define ATTEST_PREDICATE_VALIDATION "https://tentaflake.dev/attestation/validation/v1"
#define ATTEST_PREDICATE_INBOX "https://tentaflake.dev/attestation/inbox-result/v1"

typedef struct ValidationFacts {
        const char *job_id;
        const char *repo;
        const char *proposal;
        const char *check;
        const char *tree;              /* 64 hex */
        int64_t policy_version;
        int64_t attempt;
        bool pass;                     /* exit 0 */
        const char *status;            /* succeeded, failed, timed_out, killed */
        int exit_code;                 /* -1: none */
        int signal;                    /* 0: none */
        const char *environment_digest;
        const char *worker;            /* lane label */
        usec_t started_at, finished_at;
} ValidationFacts;

/* Build the Statement (caller owns). */
json_t *attest_validation_statement(const ValidationFacts *f, const char *issuer);

/* Sign any statement object: canonical JSON, DSSE with the in-toto payload type. */
int attest_sign_statement(const SigningKey *k, json_t *statement, json_t **ret_envelope, TfwError *e);
