/* SPDX-License-Identifier: MIT */
/* The one way a request ends (contract section 7): its result is published and its record
 * marked final, in that order, so a crash in between leaves a published result that recovery
 * adopts, never a final record without a result. */
#pragma once

#include "orchestrator/result.h"
#include "orchestrator/worker.h"

/* Publish rec's result and mark it final. What a job already wrote into its staging directory
 * (job.log, artifacts/) is kept; a result that is already published is not replaced. req may
 * be NULL: the captured copy is then read from the store, if it parses. status may point into
 * rec. */
int finish_request(Worker *w, RequestRecord *rec, const Request *req, const char *status,
                   const char *error, const char *message, const ResultRun *run, TfwError *e);

/* The audit line of an ending: event ("finished", "interrupted", "error"), outcome, error,
 * message and, when the job ran, its exit code, signal and duration. */
void finish_audit(Worker *w, const char *event, const RequestRecord *rec, const char *error,
                  const char *message, const ResultRun *run);

/* The audit fields of a decision on a request (approve, deny, expiry): id, request_sha256,
 * action_class, approver, reason (NULL: none). Caller owns. */
json_t *finish_decision_fields(const RequestRecord *rec, const char *reason);
