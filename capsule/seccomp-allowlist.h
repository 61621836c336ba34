/* SPDX-License-Identifier: MIT */
/* The seccomp filter of a runc capsule (the spec's linux.seccomp; the runc driver,
 * capsule/runc.h): the host's kernel is the job's, so the filter is an allowlist, generated with
 * libseccomp, and everything it does not name is refused (docs/capsule-engines.md, threat 23). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/* The complete linux.seccomp object: defaultAction SCMP_ACT_ERRNO (EPERM), the system calls a
 * job needs allowed, the families of threat 23 (new namespaces, setns, the mount API, bpf,
 * perf_event_open, keyrings, io_uring, userfaultfd, ptrace, modules, chroot, sethostname, raw
 * and packet sockets) never. layer: init's privileged window mounts the job's layer (mount,
 * umount2, … allowed), and init refuses them again with its own filter before the job
 * (capsule/init-drop.h). NULL on ENOMEM. */
json_t *capsule_seccomp_allowlist_json(bool layer);
