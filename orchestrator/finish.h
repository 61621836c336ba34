/* SPDX-License-Identifier: MIT */
/* The one way a request ends (contract section 7): its result is published and its record
 * marked final, in that order, so a crash in between leaves a published result that recovery
 * adopts, never a final record without a result or an ending missing from the audit log. */
#pragma once

#include "orchestrator/result.h"
#include "orchestrator/worker.h"

/* How a request's ending is audited: the event ("finished", "interrupted", "error",
 * "rejected", "expired") and its fields (borrowed; NULL: finish_audit()'s). */
typedef struct FinishAudit {
        const char *event;
        json_t *fields;
} FinishAudit;

/* Publish rec's result, write its ending's audit line (audit; NULL: the caller wrote it
 * before), and mark the record final, in that order. What a job already wrote into its
 * staging directory (job.log, artifacts/) is kept. A result that is already published is not
 * replaced: the record then takes its status, and the ending is audited only if no ending of
 * rec is in the log yet (a predecessor died between its publish and its record: start-up
 * recovery and a reaped job's process come here), so every ending is in the log exactly once.
 * req may be NULL: the captured copy is then read from the store, if it parses. status may
 * point into rec. */
int finish_request(Worker *w, RequestRecord *rec, const Request *req, const char *status,
                   const char *error, const char *message, const ResultRun *run, const FinishAudit *audit,
                   TfwError *e);

/* The audit line of an ending: event ("finished", "interrupted", "error"), outcome, error,
 * message and, when the job ran, its exit code, signal and duration. */
void finish_audit(Worker *w, const char *event, const RequestRecord *rec, const char *error,
                  const char *message, const ResultRun *run);

/* The audit fields of a decision on a request (approve, deny, expiry): id, request_sha256,
 * action_class, approver, reason (NULL: none). Caller owns. */
json_t *finish_decision_fields(const RequestRecord *rec, const char *reason);
