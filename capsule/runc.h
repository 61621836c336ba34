/* SPDX-License-Identifier: MIT */
/* The runc driver's processes (capsule/driver-runc.c): `runc run` of the OCI bundle with the
 * host kernel's walls in its spec (capsule/oci-spec.h, CapsuleKernelWalls), started with exactly
 * the intended descriptors as runsc is (capsule/runsc.h: the same Runsc holds the binary, the
 * private --root, the worker's name and the hold), and the capsules' root directories.
 * Flags are those of runc 1.1.5 (Debian 12): --root, --log, --log-format, run --bundle
 * --preserve-fds, delete --force, list --format; crun 1.8 takes the same. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "capsule/runsc.h"
#include "common/error.h"
#include "parser/config.h"

typedef struct Runc {
        Runsc rt;    /* binary (runc, or crun: runtime.runc), --root, worker name, hold */
        /* The capsules' roots: <parent of --root>/runc-roots, root's, 0711; each capsule's an
         * empty directory <cid> there, owned by CONFIG_CAPSULE_ROOT_ID (runc makes the mount
         * points in it from inside the user namespace). */
        char *roots;
        int landlock_abi; /* the kernel's Landlock ABI version, 0: none */
        /* The seccomp listeners' sockets: <parent of --root>/seccomp-listeners, root's, 0700. */
        char *listeners;
} Runc;

/* Resolve the binary (runtime.runc, else "runc" on PATH), make root (0700), the roots
 * directory beside it (0711) and the listeners' (0700). */
int runc_init(Runc *rc, const Config *c, const char *root, TfwError *e);
void runc_done(Runc *rc);

/* The root directory of container cid: its path (runc_root_path), made afresh, owned by
 * CONFIG_CAPSULE_ROOT_ID with mode 0755, empty but for etc/, a copy of the regular files of
 * etc_src (the bundle's root/etc: root's, 0444) in a directory of the root id's
 * (runc_root_make), removed with what runc made in it (runc_root_remove; one that does not exist
 * is success). */
int runc_root_path(const Runc *rc, const char *cid, char *buf, size_t size);
int runc_root_make(const Runc *rc, const char *cid, const char *etc_src);
int runc_root_remove(const Runc *rc, const char *cid);

/* A new path for a capsule's seccomp listener (capsule/seccomp-listen.h): a random name in the
 * listeners' directory, short enough for a unix socket's address (the container id is not:
 * up to 117 bytes). runc_listeners_clear removes every socket there (a start's cleanup: what a
 * worker killed mid-job left). */
int runc_listener_path(const Runc *rc, char *buf, size_t size);
void runc_listeners_clear(const Runc *rc);

/* `runc run --bundle B ID` with runsc_spawn_run's contract. pass_fds[0..n_pass): the egress
 * streams, which the capsule gets at CAPSULE_EGRESS_FD_BASE.. (--preserve-fds: fds 3 up to the
 * base are /dev/null). */
int runc_spawn_run(const Runc *rc, const char *bundle, const char *id, const char *log_path, int in_fd, int out_fd,
                   int err_fd, const int *pass_fds, size_t n_pass, pid_t *ret_pid);

/* Every container of rc's worker in the runc root `root` (NULL: rc's), from runc's state files
 * (<root>/<id>/state.json: the owner annotation among its labels) without any runc command:
 * "running" when its init process lives, else "stopped"; "creating" for a directory of a
 * container id of this worker with no state file. As runsc_list_own. */
int runc_list_own(const Runc *rc, const char *root, RunscOwnContainer **ret, size_t *ret_n);
