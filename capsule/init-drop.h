/* SPDX-License-Identifier: MIT */
/* The capsule's init started as the sandbox's root to mount the job's layer
 * (capsule/protocol.h, CAPSULE_LAYER_PATH; capsule-init/layer.c) gives it all up here before
 * anything of the job exists. In libtfw so that tests/unit/test-init-drop.c proves each on the
 * host. */
#pragma once

#include <sys/types.h>

/* CAPSULE_LAYER_ARG "UID:GID" (decimal, neither 0): the ids init drops to. -EINVAL else. */
int capsule_init_parse_layer_arg(const char *arg, uid_t *ret_uid, gid_t *ret_gid);

/* A seccomp filter that answers mount(2) EPERM, to this process and everything it starts (a
 * filter stays across fork and exec; filters only add up). Needs no_new_privs or
 * CAP_SYS_ADMIN. 0 or a negative errno. */
int capsule_init_refuse_mount(void);
/* The same filter built now and kept for capsule_init_refuse_mount, which then only loads it: a
 * capsule started ahead builds it while it waits (libseccomp asks the kernel, here gVisor, what
 * it supports with about ten system calls). Nothing is refused until it is loaded. 0 or a
 * negative errno (capsule_init_refuse_mount builds it again then, and fails closed). */
int capsule_init_prepare_refuse_mount(void);

/* Every capability out of this process's bounding set and its ambient set cleared, then both
 * checked empty (-EPERM when one is left). Leaves the permitted and effective sets alone: a
 * capsule's init calls it while it waits for its job (capsule-init.c), still root for the
 * layer's mounts, so that the job's request does not wait for its ~120 system calls (each one
 * gVisor's). 0 or a negative errno. */
int capsule_init_drop_ahead(void);

/* Become uid:gid for good: the bounding and ambient sets emptied and checked
 * (capsule_init_drop_ahead, unless it was already done in this process), no supplementary
 * group, real, effective and saved ids set, permitted, effective and inheritable sets emptied,
 * not dumpable. Then each of those is checked (and that root cannot be had back): -EPERM when
 * one does not hold. uid and gid are not 0. */
int capsule_init_drop(uid_t uid, gid_t gid);
