/* SPDX-License-Identifier: MIT */
/* The controller's cancel (issue 35 item 3, docs/controller.md "Stopping a job", threat 20):
 * an entry "<id>.cancel" in the inbox, written by the controller like a request.
 *
 * cancel_take() security contract, for one inbox entry name:
 *  - only a name "<id>.cancel" whose id is a valid request id is taken here; the id is the
 *    name, never a path, and only this worker's store (this workspace's requests) is looked
 *    at, under the store lock;
 *  - the entry must be an empty regular file with one link, looked at through an O_PATH fd
 *    that never crosses a mount or follows a symlink; it is never opened for reading;
 *  - a request of that id still in the inbox is captured first (a cancel cannot overtake the
 *    request it names); then a pending or queued request ends at once, status "cancelled",
 *    error "cancelled_by_controller", audited "cancelled"; a running one is audited
 *    "cancel-requested" and left to the caller to end (CANCEL_RUNNING); an unknown id or a
 *    request that already ended is refused (a .rejected/ record, audited "cancel-refused"),
 *    and nothing else changes;
 *  - the entry is removed once acted on, only if it is still the object looked at: every
 *    cancel acts once, and one that comes again finds the request final and is refused. */
#pragma once

#include "orchestrator/worker.h"

#define CANCEL_SUFFIX ".cancel"
#define CANCEL_ERROR "cancelled_by_controller"

typedef enum CancelOutcome {
        CANCEL_IGNORED,   /* not a cancel entry, or gone */
        CANCEL_REFUSED,   /* recorded in .rejected/ */
        CANCEL_ENDED,     /* a pending or queued request ended cancelled */
        CANCEL_RUNNING,   /* a running request: the caller ends its job */
} CancelOutcome;

/* Is name "<id>.cancel" with a valid id? ret_id may be NULL. */
bool cancel_name_to_id(const char *name, char *ret_id, size_t size);

/* ret_id: the request's id (CANCEL_ENDED, CANCEL_RUNNING). */
int cancel_take(Worker *w, const char *name, CancelOutcome *ret, char ret_id[static REQUEST_ID_MAX + 1],
                TfwError *e);
