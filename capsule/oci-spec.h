/* SPDX-License-Identifier: MIT */
/* The OCI runtime config.json of one job's capsule (contract section 6 step 2), built with
 * jansson from the worker's configuration. Every wall is spelled out here, and
 * tests/unit/test-oci-spec.c asserts each one on the generated JSON. */
#pragma once

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "capsule/protocol.h"
#include "common/error.h"
#include "parser/config.h"

/* The constant environment of the job (contract section 6); TENTAFLAKE_JOB is added per job. */
#define CAPSULE_ENV_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define CAPSULE_ENV_HOME "HOME=/work"
#define CAPSULE_ENV_TMPDIR "TMPDIR=/tmp"
#define CAPSULE_ENV_LANG "LANG=C.UTF-8"
/* The validation plane adds these two (contract section 6). */
#define CAPSULE_ENV_CI "CI=true"
/* With egress (network.allow; docs/egress.md), after the constant environment: every proxy
 * variable common tools read names init's relay, and only localhost goes direct. Without it
 * none of them is set. */
#define CAPSULE_EGRESS_ENV_INIT                                                                  \
        { "http_proxy=" CAPSULE_EGRESS_PROXY_URL, "https_proxy=" CAPSULE_EGRESS_PROXY_URL,       \
          "HTTP_PROXY=" CAPSULE_EGRESS_PROXY_URL, "HTTPS_PROXY=" CAPSULE_EGRESS_PROXY_URL,       \
          "ALL_PROXY=" CAPSULE_EGRESS_PROXY_URL,  "NO_PROXY=localhost", "no_proxy=localhost",    \
          NULL }
/* Does this config give its capsules egress? */
static inline bool capsule_config_egress(const Config *c) {
        return c->network.allow != NULL;
}
extern const char *const capsule_egress_env[];

#define CAPSULE_HOSTNAME "capsule"
#define CAPSULE_NOFILE 1024
#define CAPSULE_CPU_PERIOD_US 100000
#define CAPSULE_DEV_TMPFS_SIZE "size=65536k"
/* Devices of gVisor's /dev that the spec covers with an empty, closed tmpfs (oci-spec.c). */
#define CAPSULE_DEV_FUSE_PATH "/dev/fuse"
#define CAPSULE_DEV_NET_PATH "/dev/net"
/* The annotations naming the owner of a container: start-up cleanup removes only containers
 * whose CAPSULE_ANNOTATION_WORKER equals this worker's name. */
#define CAPSULE_ANNOTATION_WORKER "org.tentaflake.worker"
#define CAPSULE_ANNOTATION_JOB "org.tentaflake.job"
/* Name of the job user and group in the synthetic /etc/passwd and /etc/group. */
#define CAPSULE_USER_NAME "tentaflake"

/* The host kernel's walls of a runc capsule (capsule/runc.h; docs/capsule-engines.md): the
 * spec then has a user namespace, the cgroup namespace, masked and read-only /proc and /sys
 * paths, the seccomp allowlist (capsule/seccomp-allowlist.h), and its root is root_dir (which
 * the driver fills with a copy of the bundle's etc: capsule/runc.h). */
typedef struct CapsuleKernelWalls {
        char root_dir[PATH_MAX]; /* an empty directory owned by CONFIG_CAPSULE_ROOT_ID, on a path
                                  * that id can traverse (runc mounts it from inside the user
                                  * namespace) */
        bool landlock;           /* init confines the job's writes (CAPSULE_LANDLOCK_ARG first) */
        /* The seccomp listener's socket (capsule/seccomp-listen.h), the spec's
         * linux.seccomp.listenerPath with the notifying profile; empty: none, the profile
         * without notifications. */
        char listener_path[108];
} CapsuleKernelWalls;

typedef struct CapsuleSpecParams {
        const Config *config;     /* uid/gid, limits, rootfs, system mounts, name */
        const char *job_id;       /* a valid request id */
        char *const *argv;        /* the job's argv, NULL-terminated, at least one element */
        uint64_t timeout_seconds; /* recorded as an annotation; the driver enforces it */
        /* Host paths (absolute). */
        const char *root_dir;     /* empty private directory, used as root when rootfs is NULL */
        const char *snapshot_dir; /* mounted read-only at /snapshot; NULL: none (the workspace
                                   * is streamed over stdin) */
        const char *work_dir;     /* a generation (a host read-only bind mount) bound at /work,
                                   * made writable inside only by the overlay init mounts over it
                                   * (the job's writes stay on the layer's tmpfs); NULL: /work
                                   * is a tmpfs */
        /* With work_dir: the build cache's paths (relative to /work, NULL-terminated), under
         * overlays of their own whose lower layers come from cache_dir (the store's versions, a
         * host read-only bind mount), bound at CAPSULE_CACHE_LOWER_PATH. */
        char *const *cache_paths;
        const char *cache_dir;
        const char *init_path;    /* tentaflake-capsule-init, mounted read-only */
        const char *passwd_path;  /* synthetic files mounted read-only over the image's /etc */
        const char *group_path;   /* (only with rootfs; the empty root holds them itself) */
        char *const *extra_env;   /* NAME=VALUE after the constant environment (capsule/env.h);
                                   * NULL: none */
        const char *check;        /* the validation plane's check name: adds CI=true and
                                   * TENTAFLAKE_CHECK=<check>; NULL: the inbox plane */
        const char *cgroups_path; /* linux.cgroupsPath: the job cgroup the driver made; NULL:
                                   * none (the runtime then makes its own) */
        const CapsuleKernelWalls *kernel; /* NULL: runsc's spec (gVisor is the kernel) */
        bool warm;                /* started ahead of its job: process.args is init --warm and
                                   * the environment only PATH; the job's argv and environment
                                   * come over the channel (capsule/protocol.h) */
} CapsuleSpecParams;

/* Build the spec. Accepts: params whose host paths are absolute and normalised, a valid job
 * id, a non-empty argv. Refuses (EINVAL, code "bad_capsule_spec") anything else. Guarantees:
 * the spec runs argv under CAPSULE_INIT_PATH as container_uid:container_gid with no
 * supplementary group, empty capability sets, no_new_privileges, a read-only root, read-only
 * bind mounts (snapshot, init, system mounts or passwd/group over an image), bounded
 * nosuid/nodev tmpfs on
 * /work and /tmp, /dev/fuse and /dev/net covered, fresh pid/ipc/uts/mount/network
 * namespaces, the resource limits, the seccomp profile of capsule/seccomp-profile.h and the
 * constant environment (with capsule_egress_env after it when the config has network, and init
 * started with CAPSULE_EGRESS_ARG). No host path is mounted writable. */
int capsule_spec_build(const CapsuleSpecParams *p, json_t **ret, TfwError *e);

/* The synthetic /etc/passwd and /etc/group: root, the job user (HOME=/work) and nobody /
 * nogroup when their ids differ from the job's. Caller frees. */
int capsule_passwd_text(const Config *c, char **ret);
int capsule_group_text(const Config *c, char **ret);

/* The host pids-cgroup ceiling for a guest limit of `pids` processes. Under the ptrace
 * platform every guest process costs the sandbox several host threads, so the host cgroup
 * cannot carry the guest number itself (it would crash the sentry long before the guest
 * reaches its limit); the guest limit is RLIMIT_NPROC, this is a backstop for the host. */
uint64_t capsule_host_pids_limit(uint64_t pids);
