/* SPDX-License-Identifier: MIT */
/* result.json (contract section 7): every key is always present, null when it does not
 * apply, so a controller can read results without guessing. */
#pragma once

#include <jansson.h>

#include "orchestrator/store.h"
#include "parser/config.h"
#include "parser/request.h"

/* What happened when the job ran (all zero/NULL for a request that never ran). */
typedef struct ResultRun {
        bool ran;
        int exit_code;              /* valid when has_exit_code */
        bool has_exit_code;
        int signal;                 /* 0: none */
        usec_t started_at, finished_at;
        json_t *snapshot;           /* {"bytes","entries","tree"} or NULL; borrowed */
        json_t *cache;              /* the build cache (docs/cache.md) or NULL: none configured; borrowed */
        json_t *network;            /* the job's egress (docs/egress.md) or NULL: none configured or it
                                     * never ran; borrowed */
        json_t *log;                /* {"bytes","truncated"} or NULL; borrowed */
        json_t *artifacts;          /* {"files","bytes","truncated","error"} or NULL; borrowed */
        json_t *changes;            /* the changeset's counts (docs/controller.md) or NULL: none was
                                     * asked for or could be made; borrowed */
        const char *environment_digest;
        json_t *runtime;            /* {"driver","version","platform"} or NULL; borrowed */
        json_t *walls;              /* the walls the job met (capsule/walls.h: walls_json) or NULL:
                                     * none ([] in the result); borrowed */
        json_t *isolation;          /* {"engine","kernel","walls"} (capsule_driver_isolation) or NULL;
                                     * borrowed */
        bool attestation;
} ResultRun;

/* Build the result of a request. req may be NULL (a rejection before it parsed): action_class
 * and argv are then null. status is one of contract section 7's; error/message may be NULL. */
json_t *result_build(const Config *c, const RequestRecord *rec, const Request *req,
                     const char *status, const char *error, const char *message,
                     const ResultRun *run);
