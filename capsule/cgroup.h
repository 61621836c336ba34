/* SPDX-License-Identifier: MIT */
/* One cgroup per capsule, created and limited by the worker before runsc starts, and named
 * to runsc as the spec's linux.cgroupsPath. runsc 20221219 joins a cgroup that already exists
 * without touching its limits or removing it (checked), and reads its memory limit for the
 * sandbox's MemTotal. Owning it lets the driver (1) choose what the host pids limit means
 * (runsc would apply the guest's process count to the sentry's host threads, which crashes
 * the sentry far below the guest limit), (2) read the kernel's own record of a memory or pids
 * kill after the sandbox is gone, and (3) SIGKILL everything the sandbox started.
 *
 * Layout, the same path in every hierarchy (cgroupsPath is one path for all controllers):
 *   <hierarchy root>/<group>/<name>     group "tentaflake-worker-<worker name>", name the
 *                                       container id
 * cgroup v1 (a hierarchy per controller, as on this project's Debian 12 test host) and v2
 * (unified; the root's controllers are delegated to the group) are both handled. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct CgroupLimits {
        uint64_t memory;       /* bytes */
        uint64_t memory_swap;  /* bytes of memory+swap (OCI meaning), >= memory */
        uint64_t pids;         /* host tasks (threads) */
        uint64_t cpu_quota_us; /* per period; 0 = no quota */
        uint64_t cpu_period_us;
} CgroupLimits;

typedef struct CgroupEvents {
        uint64_t oom_kills;  /* processes the kernel killed for the memory limit */
        uint64_t pids_max;   /* forks refused at the pids limit */
} CgroupEvents;

typedef struct CgroupJob CgroupJob;

/* The group of a worker's capsules: "tentaflake-worker-<worker name>". Caller frees. */
int cgroup_group_name(const char *worker_name, char **ret);

/* Create <group>/<name> (both valid file names) with the limits, the group if missing.
 * Refuses an existing cgroup of that name (EEXIST, code "cgroup_exists": a predecessor's
 * leftover is the caller's to remove first). On failure nothing of the job is left. */
int cgroup_job_create(const char *group, const char *name, const CgroupLimits *limits,
                      CgroupJob **ret, TfwError *e);

/* The job's share of a busy CPU against its siblings: low (a capsule booting ahead of its
 * job yields to the jobs that run) or the default. cpu.shares (v1) / cpu.weight (v2). */
int cgroup_job_set_cpu_weight(const CgroupJob *j, bool low);

/* "/<group>/<name>": the spec's linux.cgroupsPath. */
const char *cgroup_job_path(const CgroupJob *j);

/* Move the calling process into the job cgroup. Only raw syscalls on fds opened by
 * cgroup_job_create: safe between fork and exec. */
int cgroup_job_enter(const CgroupJob *j);

/* SIGKILL every process in the cgroup except `except` (0: none). Returns how many were
 * signalled, or a negative errno. */
int cgroup_job_kill(const CgroupJob *j, pid_t except);

/* Is any process left in it? */
int cgroup_job_populated(const CgroupJob *j);

int cgroup_job_events(const CgroupJob *j, CgroupEvents *ret);

/* The most memory the cgroup ever held, in bytes (the kernel's high-water mark). */
int cgroup_job_peak_memory(const CgroupJob *j, uint64_t *ret_bytes);

/* CPU time (user + system, µs) used so far by everything in the job's cgroup: the job, and
 * the sandbox kernel working for it. Kernel accounting: nothing inside can hide from it. */
int cgroup_job_cpu_usage(const CgroupJob *j, uint64_t *ret_usec);

/* The same for the cgroup a host process is in (the engine drivers' containers, whose
 * cgroup the engine made): from /proc/PID/cgroup, the cpuacct (v1) or unified (v2) line.
 * Only a cgroup whose last path component contains owner_id (the container's full id) is
 * read; another one (a reused pid, a shared cgroup) is -ESTALE. */
int cgroup_cpu_usage_of_pid(pid_t pid, const char *owner_id, uint64_t *ret_usec);

/* Kill what is left, wait (bounded) until empty and remove the cgroup. Frees j. */
int cgroup_job_destroy(CgroupJob *j);

/* Remove <group>/<name> left by a predecessor, killing what is in it. Missing: success. */
int cgroup_job_remove_stale(const char *group, const char *name);

/* SIGKILL every process in <group>/<name> and leave the cgroup to its owner (a job still
 * running in this process removes it when it ends). Missing: 0. Returns how many were
 * signalled. */
int cgroup_job_kill_by_name(const char *group, const char *name);

/* Start-up cleanup: remove every job cgroup in the group (all of them belong to this worker
 * and none runs yet). */
int cgroup_group_remove_stale(const char *group, unsigned *ret_removed);

/* At a clean stop: remove the worker's group from every hierarchy where it is empty (v1: each
 * mounted hierarchy, also those runsc alone uses). *ret_busy (may be NULL): how many still hold
 * a cgroup or a process and were left. */
int cgroup_group_remove_empty(const char *group, unsigned *ret_busy);

/* "v1" or "v2", or NULL when no usable hierarchy was found. */
const char *cgroup_mode_string(void);
