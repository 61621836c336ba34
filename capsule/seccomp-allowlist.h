/* SPDX-License-Identifier: MIT */
/* The seccomp profile of a runc capsule (the spec's linux.seccomp), where the job shares the
 * host's kernel: an allow-list, loaded by runc on the capsule's first process (init) before it
 * execs, so init and every job process run under it (docs/capsule.md, "The runc engine's
 * walls"; docs/threats.md, row 23). The runsc profile (capsule/seccomp-profile.h) is a list of
 * refusals for gVisor's own kernel; this one is the reverse: what is not named is refused. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

/* The linux.seccomp object. Guarantees:
 *   - defaultAction SCMP_ACT_ERRNO with defaultErrnoRet EPERM: every syscall not named is
 *     refused, and every syscall a later kernel adds (runc answers those above the highest
 *     number it knows ENOSYS, on which callers fall back);
 *   - architectures: the build's own only (SCMP_ARCH_X86_64 or SCMP_ARCH_AARCH64): a syscall
 *     made through another ABI (i386's int 0x80, x32) never matches the filter's architecture
 *     and meets libseccomp's bad-architecture action (the process is killed);
 *   - allowed: what Docker's default profile allows a container without capabilities, less
 *     io_uring_*, userfaultfd, ptrace, process_vm_*, kcmp, name_to_handle_at, fanotify_mark,
 *     adjtimex and clock_adjtime, modify_ldt and the thread-area calls, and the 32-bit names;
 *   - with arguments: clone only without a flag of CAPSULE_CLONE_NS_MASK; clone3 ENOSYS (its
 *     flags are in memory the filter cannot read; libc falls back to clone); socket only for
 *     AF_UNIX, AF_INET and AF_INET6 stream (TCP) and datagram (UDP, ICMP) sockets, and
 *     AF_NETLINK's NETLINK_ROUTE; mknod and mknodat never of a device; personality only
 *     with Docker's values (0, 0x8, 0x20000, 0x20008, 0xffffffff);
 *   - refused (not named): namespaces (unshare, setns, clone's flags), the whole mount API,
 *     bpf, perf_event_open, the keyrings, io_uring, userfaultfd, ptrace, modules, kexec,
 *     file handles, syslog, acct, quotas, swap, reboot, chroot, host and domain names, the
 *     clocks.
 * layer: also mount and umount2 (CAPSULE_SECCOMP_LAYER_CALLS), for init's privileged window
 * that mounts the job's layer (capsule-init/layer.c), which refuses them again with a filter
 * of its own before anything of the job runs; nothing else more.
 * notify: the refusals capsule/seccomp-notify.h names are SCMP_ACT_NOTIFY instead, and so are
 * connect and sendto with an address; the caller adds the listenerPath (runc refuses a
 * notifying profile without one). Without a listener (it died, or closed the notification
 * descriptor) the kernel answers every notifying call ENOSYS: still a refusal, never the call.
 * NULL on ENOMEM. */
json_t *capsule_seccomp_allowlist_json(bool layer, bool notify);
