/* SPDX-License-Identifier: MIT */
/* Where a controller's client (`submit`, `mcp`; contract section 9) finds the worker: run as
 * the controller's own unprivileged user, with no configuration file.
 *
 * The workspace is the one given, else the current directory or its nearest parent holding
 * .tentaflake-worker/. The inbox is <workspace>/.tentaflake-worker/inbox/ (made by the worker).
 * The results directory and the request limits come from worker.json there (--results
 * overrides the directory); without a usable worker.json the limits are the contract's
 * defaults and only a request that is not waited for can be submitted. worker.json is read as
 * the controller, bounded, and believed only by this client (threat 14): the worker applies its
 * own configuration whatever the file says. */
#pragma once

#include <stdbool.h>

#include "common/error.h"
#include "parser/request.h"
#include "parser/worker-info.h"

#define CONTROL_DIR_NAME ".tentaflake-worker"

typedef struct ControllerSite {
        char *workspace;      /* absolute */
        char *cwd;            /* the caller's directory relative to the workspace (the request's
                               * cwd when it names none); NULL: the workspace's root, or outside */
        int inbox_fd;
        char *results_dir;    /* NULL when unknown */
        int results_fd;       /* -EBADF when unknown or not (yet) there */
        json_t *info_json;    /* worker.json as read, owning info's strings; NULL without one */
        WorkerInfo info;      /* worker.json: the worker's name, config (for the operator's
                               * commands), when it started and what a job gets; all zero and
                               * NULL when there is no usable worker.json */
        RequestPolicy policy; /* worker.json's limits, else the contract's defaults */
        char results_error[1400]; /* why results_fd is -EBADF */
} ControllerSite;

#define CONTROLLER_SITE_NULL { .inbox_fd = -EBADF, .results_fd = -EBADF }

int controller_site_open(const char *workspace, const char *results_dir, ControllerSite *ret, TfwError *e);
void controller_site_close(ControllerSite *s);

/* Fails (code "no_results", the message says why) when the results directory is unknown or
 * cannot be opened. */
int controller_site_need_results(const ControllerSite *s, TfwError *e);

/* The operator's command that approves id, binding the approval to the submitted bytes:
 * "tentaflake-worker --config CONFIG approve ID --expect-sha256 HEX" (CONFIG is a placeholder
 * when worker.json did not name it). Caller frees; NULL on out of memory. */
/* Does the workspace's inbox hold id's request, not taken by a worker yet? */
bool controller_inbox_holds(const ControllerSite *s, const char *id);

char *controller_approve_command(const ControllerSite *s, const char *id, const char *sha256);
