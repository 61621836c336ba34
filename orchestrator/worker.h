/* SPDX-License-Identifier: MIT */
/* The state one inbox worker (daemon, drain or operator verb) works with. */
#pragma once

#include <stdbool.h>

#include "orchestrator/audit.h"
#include "orchestrator/dirs.h"
#include "parser/config.h"
#include "parser/request.h"

typedef struct Worker {
        const Config *config;
        RequestPolicy policy;
        WorkerDirs dirs;
        Audit *audit;
        int inbox_fd;        /* <workspace>/.tentaflake-worker/inbox, or -EBADF */
        bool use_openat2;
        char runtime_version[256]; /* "" until job_cache_runtime_version() or a job asks */
} Worker;

/* Open the worker's directories and audit log (not the inbox). */
int worker_open(Worker *w, const Config *c, TfwError *e);
void worker_close(Worker *w);

/* Record an audit event. A failure is logged here and returned; callers decide whether it is
 * fatal (a job's result is published even when its audit line could not be written). */
int worker_audit(Worker *w, const char *event, json_t *fields, TfwError *e);
