/* SPDX-License-Identifier: MIT */
/* <workspace>/.tentaflake-worker/worker.json (contract sections 3 and 9): what a controller's
 * client (`submit`, `mcp`) needs to find its results without a configuration file. One format,
 * built here for the daemon and parsed here for the client, so the two cannot drift.
 *
 * The document sits in a directory the controller can write (threat 14): it is informational.
 * The worker writes it at every start and never reads it back; a client that reads a forged
 * one misleads only itself (the worker still applies its own configuration to every request).
 * worker_info_parse() therefore refuses only what the client cannot use: a document that is not
 * a JSON object of at most WORKER_INFO_MAX_BYTES, a version other than 1, a field of the wrong
 * type, a path that is not absolute and normalised, or a limit of 0. Unknown keys are ignored
 * (a newer worker may say more). */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"
#include "common/time-util.h"
#include "parser/request.h"

#define WORKER_INFO_FILE "worker.json"
#define WORKER_INFO_MAX_BYTES (64 * 1024)

typedef struct WorkerInfo {
        const char *name;         /* the controller name of the worker's config */
        const char *workspace;
        const char *results_dir;
        const char *config;       /* the worker's config file (for the operator's commands); may be NULL */
        RequestPolicy limits;
} WorkerInfo;

/* The document for info: also the inbox path, the action classes with what each one does,
 * the worker's version and started_at. NULL on out of memory. */
json_t *worker_info_build(const WorkerInfo *info, usec_t started_at);

/* Parse a worker.json. The strings in *ret point into *ret_json, which the caller keeps (and
 * json_decref()s) as long as it uses them. */
int worker_info_parse(const char *buf, size_t len, WorkerInfo *ret, json_t **ret_json, TfwError *e);
