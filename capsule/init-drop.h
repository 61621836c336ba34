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

/* Every capability out of this process's bounding set, then the set checked empty (-EPERM when
 * one is left). Leaves the permitted and effective sets alone: a capsule's init calls it while it
 * waits for its job (capsule-init.c), still root for the layer's mounts, so that the job's
 * request does not wait for its ~80 system calls (each one gVisor's). 0 or a negative errno. */
int capsule_init_drop_bounding(void);

/* Become uid:gid for good: every capability out of the bounding set (unless
 * capsule_init_drop_bounding already emptied it in this process), the ambient set cleared,
 * no supplementary group, real, effective and saved ids set, permitted, effective and
 * inheritable sets emptied, not dumpable. Then each of those is checked (and that root cannot
 * be had back): -EPERM when one does not hold. uid and gid are not 0. */
int capsule_init_drop(uid_t uid, gid_t gid);
