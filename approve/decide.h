/* SPDX-License-Identifier: MIT */
/* The operator's decisions on pending requests (contract section 5; threat 9).
 *
 * Security contract:
 *  - a decision acts only on the worker's captured private copy, never on the inbox;
 *  - with expect_sha256, approval is refused unless the captured bytes, hashed again now,
 *    have exactly that sha256;
 *  - the pending -> queued/denied transition happens under the store lock, so when approve and
 *    deny race, exactly one wins and the other is told what happened;
 *  - nothing here runs anything: approval only queues the request; the capsule is the same for
 *    every class. */
#pragma once

#include "orchestrator/worker.h"

/* Who is deciding: SUDO_USER, else the name of the login uid, else "uid N". */
void decide_operator_identity(char *buf, size_t size);

int decide_approve(Worker *w, const char *id, const char *expect_sha256, const char *approver,
                   TfwError *e);
int decide_deny(Worker *w, const char *id, const char *reason, const char *approver, TfwError *e);

/* Wake a running daemon or, in path mode, start drain: creates WORKER_WAKE_FILE. */
void decide_wake_daemon(Worker *w);
