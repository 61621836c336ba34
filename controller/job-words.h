/* SPDX-License-Identifier: MIT */
/* True words (issue 35, item 5; contract section 9): what the MCP server tells a model about
 * the commands it runs, built from worker.json's "job" (parser/worker-info.h) rather than
 * written once for every worker: where a command starts (the request's cwd, by default the
 * directory the server was started in), its network (none, or exactly the allowlist, through
 * the worker's proxy, with its bounds), its limits, the build cache's paths, and what becomes of
 * the files it changes (a changeset applied only by the apply tool or run's apply: true, or
 * lost when the driver returns none).
 *
 * A worker.json without "job" (an older worker), or none at all, gives words that say what is
 * not known instead of guessing. worker.json is the controller's to forge (threat 14): a forged
 * one misleads only the model this client talks to, never what the worker gives a job. */
#pragma once

#include "controller/site.h"

typedef enum JobWordsFor {
        JOB_WORDS_INSTRUCTIONS,    /* initialize's instructions */
        JOB_WORDS_RUN,             /* the run tool's description */
} JobWordsFor;

/* The text, without a trailing newline. Caller frees; NULL when out of memory. */
char *controller_job_words(const ControllerSite *s, JobWordsFor what);
