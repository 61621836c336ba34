/* SPDX-License-Identifier: MIT */
/* One cgroup per capsule, owned by the worker (not by runsc, which runs with
 * --ignore-cgroups). Owning it lets the driver (1) choose what the host pids limit means, (2)
 * read the kernel's own record of a memory or pids kill after the sandbox is gone, and (3)
 * SIGKILL everything the sandbox started, whatever runsc does.
 *
 * cgroup v1 (each controller its own hierarchy, as on this project's Debian 12 test host)
 * and v2 (unified) are both handled. The job cgroup lives below the worker's own cgroup of
 * each controller, so limits given to the worker's service bound its capsules too. Under v2
 * the worker needs a delegated subtree (systemd Delegate=yes); when its own cgroup holds
 * processes, it moves itself into a "supervisor" child first (the no-internal-process rule). */
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

/* Create the cgroup `name` (a valid file name) with the limits. Refuses an existing cgroup
 * of that name (EEXIST: a predecessor's leftover is the caller's to remove first). On
 * failure nothing is left behind. */
int cgroup_job_create(const char *name, const CgroupLimits *limits, CgroupJob **ret,
                      TfwError *e);

/* Move the calling process into the job cgroup. Only raw syscalls on fds opened by
 * cgroup_job_create: safe between fork and exec. */
int cgroup_job_enter(const CgroupJob *j);

/* SIGKILL every process in the cgroup except `except` (0: none). Returns how many were
 * signalled, or a negative errno. */
int cgroup_job_kill(const CgroupJob *j, pid_t except);

/* Is any process left in it? */
int cgroup_job_populated(const CgroupJob *j);

int cgroup_job_events(const CgroupJob *j, CgroupEvents *ret);

/* Kill what is left, wait (bounded) until empty and remove the cgroup. Frees j. */
int cgroup_job_destroy(CgroupJob *j);
static inline void cgroup_job_destroyp(CgroupJob **j) {
        if (*j)
                (void) cgroup_job_destroy(*j);
}

/* Remove a leftover cgroup of that name (start-up cleanup), killing what is in it. A missing
 * cgroup is success. */
int cgroup_job_remove_stale(const char *name);

/* Remove every cgroup below the worker's own whose name is prefix + a string `valid`
 * accepts (start-up cleanup of a predecessor killed between creating a cgroup and
 * starting its container). */
int cgroup_remove_stale_prefix(const char *prefix, bool (*valid)(const char *rest),
                               unsigned *ret_removed);

/* "v1" or "v2", or NULL when no usable hierarchy was found. */
const char *cgroup_mode_string(void);
