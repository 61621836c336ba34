/* SPDX-License-Identifier: MIT */
/* The walls a job met (capsule/walls.h, issue 49), one function a source, each a source of the
 * worker's own: the cgroup's events (or the engine's record of the kernel's kill), the worker's
 * timer, init's trailer (authenticated by the log token: the job cannot write it), the log's
 * cap, the importer's verdict, the proxy's checked records. Nothing the job printed is read.
 *
 * Walls an engine alone can tell (a system call its filter refused, a write into a read-only
 * path) come from that engine's driver: under runc the seccomp listener's notifications
 * (capsule/seccomp-listen.h); runsc reports neither (docs/controller.md, "Walls in the
 * result"). */
#define _GNU_SOURCE
#include <string.h>

#include "capsule/job.h"
#include "common/macro.h"
#include "common/size.h"

#define ARTIFACT_TOO_LARGE "artifact_too_large" /* artifacts/import.h's code for a bound */

/* memory: processes the kernel killed at limits.memory (the cgroup's memory events, or the
 * engine's report for a driver without a cgroup of ours). */
static void walls_of_memory(const Config *c, const CapsuleResult *r, Walls *w) {
        char sz[24];
        walls_add(w, WALL_MEMORY, r->events.oom_kills, "killed at the memory limit (limits.memory, %s)",
                  format_size(c->limits.memory, sz, sizeof(sz)));
}

/* pids: forks or clones the cgroup refused at limits.pids. */
static void walls_of_pids(const Config *c, const CapsuleResult *r, Walls *w) {
        walls_add(w, WALL_PIDS, r->events.pids_max, "a fork refused at the process limit (limits.pids, %llu)",
                  (unsigned long long) c->limits.pids);
}

/* time: the worker's own timer, and its own CPU-time check. */
static void walls_of_time(const CapsuleEnding *end, Walls *w) {
        if (end->timed_out)
                walls_add(w, WALL_TIME, 1, "stopped at the timeout (%llu s)", (unsigned long long) end->timeout_seconds);
        if (end->cpu_exceeded)
                walls_add(w, WALL_TIME, 1, "stopped at the CPU-time limit (%llu s)", (unsigned long long) end->cpu_seconds);
}

/* disk: /work's layer or /tmp left full, as init found them once the job had ended (its
 * trailer's full= field; the sandbox's own tmpfs, which the host cannot see under runsc). */
static void walls_of_disk(const Config *c, const CapsuleEnding *end, Walls *w) {
        char sz[24];
        if (!end->have_trailer)
                return;
        if (end->trailer.work_full)
                walls_add(w, WALL_DISK, 1, "/work is full (limits.workspace_tmpfs, %s)",
                          format_size(c->limits.workspace_tmpfs, sz, sizeof(sz)));
        if (end->trailer.tmp_full)
                walls_add(w, WALL_DISK, 1, "/tmp is full (limits.tmp_tmpfs, %s)", format_size(c->limits.tmp_tmpfs, sz, sizeof(sz)));
}

/* Which bound an importer's "too large" message names: it is the worker's own text,
 * "<stream>: more than N entries (at '<name>')" or "... N bytes (at ...)": only what comes
 * before the job's name is looked at. */
static bool too_many_entries(const char *message) {
        const char *at = strstr(message, " (at '");
        size_t n = at ? (size_t) (at - message) : strlen(message);
        return n >= 8 && memcmp(message + n - 8, " entries", 8) == 0;
}

/* output: job.log cut at limits.max_log_bytes, the artifacts refused at their bounds. (The
 * changeset's bounds are exec/'s: exec/exec.c adds them.) */
static void walls_of_output(const Config *c, const CapsuleResult *r, Walls *w) {
        const ConfigLimits *l = &c->limits;
        char sz[24];
        if (r->log_truncated || (r->reason && streq(r->reason, "output_limit")))
                walls_add(w, WALL_OUTPUT, 1, "job.log cut at limits.max_log_bytes (%s)", format_size(l->max_log_bytes, sz, sizeof(sz)));
        if (r->artifacts_error_code && streq(r->artifacts_error_code, ARTIFACT_TOO_LARGE)) {
                if (too_many_entries(r->artifacts_error))
                        walls_add(w, WALL_OUTPUT, 1, "artifacts refused: more than limits.max_artifact_entries (%llu)",
                                  (unsigned long long) l->max_artifact_entries);
                else
                        walls_add(w, WALL_OUTPUT, 1, "artifacts refused: more than limits.max_artifact_bytes (%s)",
                                  format_size(l->max_artifact_bytes, sz, sizeof(sz)));
        }
}

void capsule_walls_collect(const CapsuleJobParams *p, const CapsuleEnding *end, CapsuleResult *r) {
        const Config *c = p->config;
        Walls *w = &r->walls;

        w->n = 0;
        if (!end || !end->started)
                return;
        walls_of_memory(c, r, w);
        walls_of_pids(c, r, w);
        walls_of_time(end, w);
        walls_of_disk(c, end, w);
        walls_of_output(c, r, w);
        /* network: the proxy's records (capsule/egress.c, record_wall). */
        walls_merge(w, &r->egress.walls);
        /* syscall, and network's direct connections: the seccomp listener's (runc). */
        walls_merge(w, &r->seccomp_walls);
}
