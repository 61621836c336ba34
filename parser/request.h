/* SPDX-License-Identifier: MIT */
/* The version 1 inbox request (contract section 4), parsed strictly.
 *
 * Accepts: one JSON object with exactly the fields version, id, action_class, argv and the
 * optional timeout_seconds, reason, cwd and changes, each of the right JSON type and range.
 * Refuses, each with a stable code in TfwError.code and a message naming the field:
 *   too_large            more than policy->max_request_bytes (never reads more than that + 1)
 *   nul_byte             a raw NUL byte or a \u0000 escape anywhere
 *   invalid_utf8         bytes that are not UTF-8
 *   bad_json             not JSON, or trailing data
 *   duplicate_key        the same key twice in an object
 *   bad_type             a field of the wrong JSON type (300.0 and "300" are not integers)
 *   missing_field        a required field is absent
 *   unknown_field        a field the version does not define
 *   unsupported_version  version is an integer other than 1
 *   bad_id               id does not match ^[a-z0-9][a-z0-9_-]{0,63}$
 *   id_mismatch          id differs from the file name it arrived in
 *   bad_action_class     not one of the classes of contract section 5
 *   empty_argv           argv is [] or argv[0] is ""
 *   argv_too_large       more than max_argv strings or more than max_argv_bytes in total
 *   out_of_range         a number below its minimum (timeout_seconds 0) or beyond 64 bits
 *   timeout_above_policy timeout_seconds above policy->max_timeout_seconds
 *   reason_too_large     reason longer than 1024 bytes
 *   bad_cwd              cwd is not a relative path of 1..REQUEST_CWD_MAX bytes whose every
 *                        component is a name (not empty, ".", ".."), or it is in the control
 *                        directory (REQUEST_CONTROL_DIR); "." alone is the workspace's root
 * Guarantees: on success every string is valid UTF-8 without NUL, and the sha256 of the exact
 * bytes parsed is recorded. Duplicate ids and the forbidden class are policy decisions made by
 * the orchestrator, not here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/sha256.h"

#define REQUEST_ID_MAX 64
#define REQUEST_REASON_MAX 1024
#define REQUEST_CWD_MAX 1024
/* Never part of a snapshot (contract section 3): no job starts there. */
#define REQUEST_CONTROL_DIR ".tentaflake-worker"

typedef enum ActionClass {
        ACTION_LOCAL_REVERSIBLE,
        ACTION_EXTERNAL_REVERSIBLE,
        ACTION_IRREVERSIBLE,
        ACTION_FINANCIAL,
        ACTION_PRODUCTION,
        ACTION_COMMUNICATIVE,
        ACTION_PRIVILEGED,
        ACTION_FORBIDDEN,
        _ACTION_CLASS_MAX,
} ActionClass;

typedef enum ActionPolicy {
        ACTION_POLICY_RUN,      /* queued and run automatically */
        ACTION_POLICY_APPROVAL, /* pending until approve/deny/expiry */
        ACTION_POLICY_REJECT,   /* always rejected */
} ActionPolicy;

typedef struct RequestPolicy {
        uint64_t max_request_bytes;
        uint64_t max_argv;
        uint64_t max_argv_bytes;
        uint64_t default_timeout_seconds;
        uint64_t max_timeout_seconds;
} RequestPolicy;

/* The contract's defaults (64k, 256, 64k, 300, 900). */
extern const RequestPolicy request_policy_default;

typedef struct Request {
        int version;
        char *id;
        ActionClass action_class;
        char **argv;            /* NULL-terminated */
        size_t argc;
        uint64_t timeout_seconds;  /* the request's, or the policy default */
        bool timeout_explicit;
        char *reason;           /* NULL when absent */
        char *cwd;              /* relative to /work, normalised ("a/b"); NULL: /work itself */
        bool changes;           /* return the job's changes as a changeset (default true) */
        char sha256[SHA256_HEX_SIZE];  /* of the exact bytes parsed */
} Request;

/* Parse from an fd, reading at most max_request_bytes + 1 bytes. expected_id is the file name
 * without ".json" (NULL to skip that check, for example when fuzzing). */
int request_parse_fd(int fd, const char *expected_id, const RequestPolicy *policy,
                     Request **ret, TfwError *e);
int request_parse_buffer(const char *buf, size_t len, const char *expected_id,
                         const RequestPolicy *policy, Request **ret, TfwError *e);

Request *request_free(Request *r);
static inline void request_freep(Request **r) {
        request_free(*r);
}
#define _cleanup_request_ _cleanup_(request_freep)

bool request_id_is_valid(const char *id);
/* The request's cwd rule (bad_cwd above), for the controller's side too. */
bool request_cwd_is_valid(const char *cwd);

const char *action_class_to_string(ActionClass c);
int action_class_from_string(const char *s);  /* ActionClass, or -EINVAL */
ActionPolicy action_class_policy(ActionClass c);
