/* SPDX-License-Identifier: MIT */
/* The capsule's own name rule: what every caller's job id must be to name a container, a bundle
 * directory and a cgroup. It is what runsc (container ids `[\w+-.]+`) and the engines (names
 * `[a-zA-Z0-9][a-zA-Z0-9_.-]+`) accept, narrowed to lowercase so that the names fold to
 * nothing else: `^[a-z0-9][a-z0-9_.-]{0,63}$`. An inbox request id (parser/request.h) is one;
 * the validation plane makes its own (validation/serve.c). */
#pragma once

#include <stdbool.h>

#define CAPSULE_JOB_ID_MAX 64

bool capsule_job_id_is_valid(const char *id);

/* The container id of a job: "tfw-<worker name>-<job id>". Caller frees. -EINVAL for a job id
 * that is not valid. */
int capsule_container_id(const char *worker_name, const char *job_id, char **ret);

/* Is name a container id (or a bundle directory) capsule_container_id() makes for this worker:
 * "tfw-<worker name>-" and a valid job id? A prefix rule: it cannot tell worker "a"'s job
 * "b-x" from worker "a-b"'s job "x", which is why each worker has its own runsc root. */
bool capsule_container_id_is_workers(const char *worker_name, const char *name);
