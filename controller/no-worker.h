/* SPDX-License-Identifier: MIT */
/* Saying when nothing answers (issue 35, item 4; contract section 9): a request that no worker
 * has taken from the inbox within CONTROLLER_NO_WORKER_SECONDS is not left to silence. `submit`
 * says so once on stderr and keeps waiting (up to --wait-timeout); the MCP server's `run`
 * answers with the same words instead of waiting on.
 *
 * "Taken" is what the results directory and the inbox show: the request has a state file or a
 * result (the worker writes the state before it unlinks the inbox entry), or its inbox entry is
 * gone. A worker that runs takes a request within milliseconds, also while its jobs are busy
 * (it captures on inotify and queues), so after these seconds it is stopped, failed or stuck.
 *
 * The words name the worker as worker.json names it (its name, config and last start; a
 * forged worker.json misleads only this client) and the systemd unit that runs it: the units
 * of systemd/ run the config WORKER_CONFIG_DIR/NAME.json as tentaflake-worker@NAME.service or
 * tentaflake-worker-queue@NAME.path; a config elsewhere is run by no unit of the package. */
#pragma once

#include <stdbool.h>

#include "controller/site.h"
#include "controller/status.h"

#define CONTROLLER_NO_WORKER_SECONDS 5

/* Has a worker taken id, whose state (controller_status) is st? */
bool controller_request_taken(const ControllerSite *s, const char *id, ControllerState st);

/* How long <id>.json has been in the inbox (from its mtime: the client writes and renames it
 * at once), into *ret_age: 0, or -ENOENT when it is not there (taken, or never written). */
int controller_inbox_age(const ControllerSite *s, const char *id, usec_t *ret_age);

/* What is said when it has not, one line without a trailing newline: that the request is still
 * in the inbox, which worker should take it, which unit runs it and how an operator looks at
 * it. Caller frees; NULL when out of memory. */
char *controller_no_worker_words(const ControllerSite *s, const char *id);
