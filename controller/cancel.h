/* SPDX-License-Identifier: MIT */
/* The controller's cancel (issue 35 item 3; docs/controller.md, "Stopping a job"): `submit
 * --cancel ID` and MCP's `cancel` tool. An empty file "<id>.cancel" is written into the inbox
 * atomically (a dot-file renamed without replacing anything), which the worker takes
 * (orchestrator/cancel.h). Before writing, the id is looked up on this side: an id of no
 * request of this workspace (no state file, no result, nothing in the inbox: another
 * workspace's requests are not in this results directory) and a request that already ended are
 * refused here, and nothing is written. Then the result is waited for with inotify: status
 * "cancelled" when the cancel took, another status when the job ended first; the worker's
 * refusal (its .rejected/ record for "<id>.cancel") is an error naming its reason. */
#pragma once

#include <jansson.h>
#include <stdio.h>

#include "common/error.h"
#include "common/time-util.h"
#include "controller/site.h"
#include "controller/status.h"

#define CONTROLLER_CANCEL_WAIT_DEFAULT 120U

/* Look id up and write its cancel; *ret_sent_at: when, for the wait. Errors: EINVAL bad_id,
 * ENOENT not_found, EALREADY already_ended, EEXIST cancel_waiting (a cancel of id is already in
 * the inbox). */
int controller_cancel_send(const ControllerSite *s, const char *id, usec_t *ret_sent_at, TfwError *e);

/* The names of the worker's refusals of id's cancels so far, taken before the send. */
json_t *controller_cancel_refusals(const ControllerSite *s, const char *id);
/* The worker's refusal of id's cancel made since before was taken (its .rejected/ record), or
 * NULL. */
json_t *controller_cancel_refusal(const ControllerSite *s, const char *id, const json_t *before);

/* Wait (the watch opened before the send) until id's result is final (1, *ret its result) or
 * timeout_s passed (0); the worker's refusal (a record not in before) is -EPERM with e naming it. */
int controller_cancel_wait(const ControllerSite *s, ControllerWatch *w, const char *id, const json_t *before,
                           unsigned timeout_s, json_t **ret, TfwError *e);

/* `submit --cancel ID`: *ret_status 0 when the request ended cancelled, 1 when it ended
 * otherwise first or no result came within timeout_s (0: CONTROLLER_CANCEL_WAIT_DEFAULT); the
 * result on out with json. */
int controller_cancel(const char *workspace, const char *results, const char *id, unsigned timeout_s, bool json,
                      FILE *out, FILE *err, int *ret_status, TfwError *e);
