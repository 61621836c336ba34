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

/* Expire pending requests older than pending_ttl_hours; returns how many. */
int decide_expire_pending(Worker *w, usec_t now, TfwError *e);

/* Wake a running daemon: it watches <state_dir> for this name, and in path mode
 * tentaflake-worker-queue@NAME.path starts `drain` while it exists (PathExists=). The daemon
 * or drain that reloads its queue removes it first, so it is never left behind work taken. */
#define DECIDE_WAKE_FILE ".wake"
void decide_wake_daemon(Worker *w);
