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
 * (a newer worker may say more).
 *
 * "job" says what a job gets (issue 35, item 5): its limits, its network (the allowlist, or
 * null for none), the build cache's paths (null for none) and whether what it changes comes
 * back as a changeset. The MCP server builds the words it shows a model from it, so a document
 * without "job" (an older worker) leaves those words saying they do not know; one with it must
 * have every key, each allowlist entry one network.allow takes, each cache path relative and
 * normalised, and nothing with a control character. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/time-util.h"
#include "parser/request.h"

#define WORKER_INFO_FILE "worker.json"
#define WORKER_INFO_MAX_BYTES (64 * 1024)

/* What a job gets: "job" of worker.json. */
typedef struct WorkerJobInfo {
        uint64_t memory_bytes;
        uint64_t cpus_milli;          /* 2000 for 2 CPUs */
        uint64_t pids;
        uint64_t max_log_bytes;
        uint64_t max_artifact_bytes;
        uint64_t max_artifact_entries;
        json_t *network_allow;        /* array of network.allow entries; NULL: no network */
        uint64_t max_upload_bytes;    /* with network_allow: per job */
        uint64_t max_download_bytes;
        uint64_t max_connections;
        json_t *cache_paths;          /* array of workspace-relative paths; NULL: no build cache */
        bool changes;                 /* what a job changes under /work comes back as a changeset */
        /* "isolation": the engine ("runsc", "runc", "docker", "podman") and the kernel the job
         * sees ("gvisor", "host"); parse: NULL when the document has none (an older worker). */
        const char *engine;
        const char *kernel;
} WorkerJobInfo;

typedef struct WorkerInfo {
        const char *name;         /* the controller name of the worker's config */
        const char *workspace;
        const char *results_dir;
        const char *config;       /* the worker's config file (for the operator's commands); may be NULL */
        RequestPolicy limits;
        bool has_job;             /* parse: false when the document has no "job" */
        WorkerJobInfo job;        /* build: always written; its arrays are borrowed */
        const char *started_at;   /* parse only: as written, NULL when absent */
} WorkerInfo;

/* The document for info: also the inbox path, the action classes with what each one does,
 * the worker's version and started_at. NULL on out of memory. */
json_t *worker_info_build(const WorkerInfo *info, usec_t started_at);

/* Parse a worker.json. The strings in *ret point into *ret_json, which the caller keeps (and
 * json_decref()s) as long as it uses them. */
int worker_info_parse(const char *buf, size_t len, WorkerInfo *ret, json_t **ret_json, TfwError *e);
