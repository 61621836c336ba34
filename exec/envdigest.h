/* SPDX-License-Identifier: MIT */
/* The environment digest of contract section 8: "sha256:" + hex of the canonical JSON
 * (sorted keys, no spaces) describing the sandbox a check really ran in: driver, runtime
 * version and platform, the isolation in force, the limits, the mounts' identities (the host
 * path when a mount has none) and the environment variables. Never the tree, the job or
 * anything else that changes from one job to the next, so one worker configuration gives one
 * digest per check (checks with other limits or env differ). */
#pragma once

#include <jansson.h>
#include <stdint.h>

#include "parser/config.h"

#define ENV_DIGEST_SIZE (7 + 64 + 1)

/* The description (caller owns). cfg is the job's effective config (limits already set to the
 * job's; for docker/podman its image is the one the job runs), timeout_secs the wall clock,
 * output_bytes the output cap, cpu_secs the CPU-time limit (0: none, recorded as null), env
 * the NULL-terminated variables as the job gets them beyond the constant ones (may be NULL),
 * runtime_version the first line of `runsc --version` or the engine's server version,
 * cgroup_description the driver's (capsule/driver.h). exec_plan_digest() is the one caller. */
json_t *env_description(const Config *cfg, uint64_t timeout_secs, uint64_t output_bytes, uint64_t cpu_secs,
                        char *const *env, const char *runtime_version, const char *cgroup_description);

/* "sha256:<hex>" of the canonical form of desc into out. */
int env_digest(const json_t *desc, char out[static ENV_DIGEST_SIZE]);
