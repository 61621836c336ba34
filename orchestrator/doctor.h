/* SPDX-License-Identifier: MIT */
/* `tentaflake-worker --config F doctor [--json]` (issue 6; contract sections 2 and 6): prove
 * on the real machine, live, that the configured walls are in force.
 *
 * Static checks first: the runtime binary and its version (for docker/podman: the engine
 * answering, runsc registered as its runtime, the pinned image present locally, never
 * pulled), openat2 or its fallback, the cgroup controllers for memory and pids, state_dir and
 * results_dir against the rules of orchestrator/dirs.h (reported, never created or
 * repaired), a group entry for container_gid. Then probe jobs in real capsules through the
 * configured driver: a trivial job with a bounded wait (a platform that hangs is reported, not
 * waited on), a walls job that reports uid/gid, capabilities, NoNewPrivs, interfaces and
 * writes to / and /snapshot from inside, a limits job (small pids and /work overrides) and a
 * memory job (a small memory override) that must be killed. Each check is one line, "✓ name:
 * detail" or "✗ name: reason"; with json an array of {"check","ok","detail"}. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "parser/config.h"

/* The probes' overrides: small enough to hit quickly, large enough for a shell to start. */
#define DOCTOR_MEMORY_LIMIT (64ULL << 20)
#define DOCTOR_MEMORY_ALLOC_SHIFT 28 /* awk doubles a string to 2^28 bytes: 256 MiB */
#define DOCTOR_PIDS_LIMIT 16
#define DOCTOR_TMPFS_LIMIT (8ULL << 20)
/* The bounded wait for the first sandbox: a platform that hangs fails after this. */
#define DOCTOR_START_TIMEOUT_SECONDS 30
#define DOCTOR_PROBE_TIMEOUT_SECONDS 60
/* The other runsc platforms, tried for information: a hang is ended after this. */
#define DOCTOR_OTHER_PLATFORM_SECONDS 10

/* Run every check, print to out (text lines as they complete, or the JSON array at the end).
 * Returns 0 when all passed, 1 when any failed, a negative errno when doctor itself could not
 * run (out of memory, no temporary directory). Never creates, repairs or removes anything of
 * the worker's; its own probe directory and containers are removed before it returns. */
int doctor_run(const Config *c, bool json, FILE *out);

/* A finding the caller made itself (serve --check: the key, the token, the mounts). */
typedef struct DoctorLine {
        const char *check;
        bool ok;
        char detail[1024];
} DoctorLine;

typedef struct DoctorOptions {
        bool json;
        bool inbox_dirs;              /* state_dir, results_dir and container_gid's group entry
                                       * (the inbox plane; serve has neither directory) */
        const char *engine_runtime;   /* serve --engine-runtime; NULL: the default */
        const DoctorLine *lines;      /* reported first, in this order */
        size_t n_lines;
} DoctorOptions;

/* doctor_run with options: what `serve --check` runs on serve's walls. */
int doctor_run_with(const Config *c, const DoctorOptions *o, FILE *out);
