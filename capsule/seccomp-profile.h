/* SPDX-License-Identifier: MIT */
/* The seccomp profile of a runsc capsule (the spec's linux.seccomp), loaded by runsc inside
 * the sandbox (`runsc --oci-seccomp`) on the capsule's first process, so init and every job
 * process run under it. It refuses to the job what Docker's default profile refuses to an
 * unprivileged container: new namespaces, mount, keyrings, bpf, ptrace, module, swap, reboot
 * and clock calls, and the rest (docs/capsule.md lists it). The engine drivers keep their
 * engine's own default profile and never use this one. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/* The clone flags that make a namespace: CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
 * NEWPID and NEWNET (Docker's mask, 0x7E020000). */
#define CAPSULE_CLONE_NS_MASK 0x7E020000ULL

/* The linux.seccomp object. Guarantees: EPERM (SCMP_ACT_ERRNO: gVisor's OCI seccomp has EPERM
 * as its only errno) for every syscall Docker's default profile refuses to an unprivileged
 * container and this gVisor implements, ptrace and process_vm_* included, and for io_uring and
 * name_to_handle_at; clone only without a namespace flag, socket never AF_VSOCK, personality
 * only with Docker's values, mknod and mknodat never a character or block device, each else
 * EPERM; clone3 ENOSYS (SCMP_ACT_TRACE with no tracer, and
 * ptrace is refused, so no process of the capsule can become one), on which libc falls back to
 * clone, whose flags the filter sees; everything else allowed (the default action). NULL on
 * ENOMEM.
 * layer: the capsule's init mounts the job's layer (capsule/protocol.h, CAPSULE_LAYER_PATH),
 * and detaches the cache's versions, so CAPSULE_SECCOMP_LAYER_CALLS are left out here, and init
 * itself refuses them again with a filter of its own (capsule-init/layer.c) before it drops to
 * the job's ids: every job process runs under both, with the same refusals as without the
 * layer. */
#define CAPSULE_SECCOMP_LAYER_CALLS { "mount", "umount2" }
json_t *capsule_seccomp_json(bool layer);
