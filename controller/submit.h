/* SPDX-License-Identifier: MIT */
/* `submit` (contract section 9): one request written into the inbox, then, by default, its
 * result waited for with inotify, the job's log copied to out, the artifacts' paths written to
 * err, and the job's exit status mapped as controller_exit_status() says.
 *
 * A request waiting for an operator is reported once on err, with the command that approves
 * exactly these bytes, and waited for. One that no worker has taken within
 * CONTROLLER_NO_WORKER_SECONDS is reported once on err too (controller/no-worker.h), and waited
 * for. The wait is bounded by wait_timeout when given: then submit says on err where the request
 * is (it stays in the worker's hands) and takes CONTROLLER_EXIT_NOT_RUN. A fresh id is never one
 * already in use in the results directory or the inbox; a given one that is, is refused
 * (duplicate_id) before anything is written. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/error.h"
#include "common/time-util.h"
#include "controller/request.h"
#include "controller/site.h"

typedef struct SubmitOptions {
        const char *workspace;  /* NULL: the current directory or its nearest parent with the inbox */
        const char *results;    /* NULL: from worker.json */
        const json_t *fields;   /* controller_request_build()'s fields */
        bool wait;              /* false: print the id and return */
        bool json;              /* print result.json instead of the log and artifacts */
        bool apply;             /* apply the job's changeset (controller/apply.h) when the job
                                 * ended by itself; one that cannot be applied makes the exit
                                 * status 125 */
        unsigned wait_timeout;  /* seconds, at most SUBMIT_WAIT_TIMEOUT_MAX; 0: wait until final */
        const char *attach;     /* follow this request of the workspace (pending, queued, running
                                 * or ended) instead of submitting one; fields unused */
        bool raw;               /* the job's output as it is on a terminal too (controller/terminal.h) */
        const char *unlisted_artifact; /* an artifact not listed on err (shell's own record of
                                        * the directory the job ended in), or NULL */
        const int *stop_fd;     /* when *stop_fd is readable (shell's signalfd), stop waiting:
                                 * -EINTR, code "interrupted" (the request is left as it is);
                                 * NULL: never */
} SubmitOptions;

#define SUBMIT_WAIT_TIMEOUT_MAX (30U * 86400)

/* 0 with *ret_status the exit status to take (0 when not waiting), or a negative errno with
 * e set: nothing was submitted, or the wait failed (e->code says which; "refused" codes are the
 * worker's own rejection codes). */
int controller_submit(const SubmitOptions *o, FILE *out, FILE *err, int *ret_status, TfwError *e);

/* Build the request from fields and write it into site's inbox, with a fresh id when fields
 * give none (another one when that id turns out to be in use). *ret_submitted_at: when, for
 * controller_status()'s not_before. */
int controller_submit_request(const ControllerSite *site, const json_t *fields, const char *id_prefix,
                              ControllerRequest *ret, usec_t *ret_submitted_at, TfwError *e);
