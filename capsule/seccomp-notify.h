/* SPDX-License-Identifier: MIT */
/* Which refusals of the runc capsule's allow-list (capsule/seccomp-allowlist.h) reach the
 * worker's listener (capsule/seccomp-listen.h) as seccomp user notifications, and what the
 * listener answers each: the `syscall` and `network` walls of a runc job (issue 49; docs/
 * controller.md, "Walls in the result"; docs/threats.md, row 25).
 *
 * Notified (SCMP_ACT_NOTIFY; runc 1.1 takes the action on named calls only, never as the
 * default, so what the default refuses is refused unreported):
 *   - the families threat 23 names, one by one (capsule_seccomp_notified), and clone with a
 *     namespace flag: answered EPERM, what the filter answers them without a listener;
 *   - connect, and sendto with a destination address (its fifth argument not NULL): answered
 *     SECCOMP_USER_NOTIF_FLAG_CONTINUE, the kernel going on with the call, unless the
 *     destination is an IPv4 or IPv6 address other than loopback or the unspecified address
 *     (which Linux connects to loopback): then ENETUNREACH for connect, what the capsule's
 *     network namespace (loopback only) answers it, and a `network` wall naming it.
 * Not notified, on purpose: clone3 (ENOSYS, libc's probe for its fallback to clone), the NUMA
 * calls (mbind, get/set_mempolicy, migrate_pages, move_pages: probed by runtimes that place
 * memory), io_uring_setup (probed by libuv, so every node) and personality with another
 * persona; the layer's mount and umount2, which init's own filter refuses (an ERRNO filter
 * takes precedence over a notifying one, and a process's filters may hold one listener only).
 *
 * Why CONTINUE is safe for connect and sendto: both are allowed by the filter without the
 * listener as well; the wall is the network namespace, which holds only loopback, and the
 * kernel applies it to the arguments it reads itself after the answer. The listener only
 * reports (what it read may have changed meanwhile: the job names its own destination either
 * way), and refuses nothing the kernel would not refuse. */
#pragma once

#include <jansson.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capsule/walls.h"

/* Append the notifying rules to a profile's "syscalls" (layer: mount and umount2 are left to
 * the allow-list and init's filter). Names this architecture does not have are left out.
 * 0 or -ENOMEM. */
int capsule_seccomp_notify_rules(json_t *rules, bool layer);

/* What a notification's call reads as its destination: connect's and sendto's address (a
 * pointer into the job's memory and its length, at most CAPSULE_NOTIFY_ADDR_MAX bytes of it
 * read). false: nothing to read. */
#define CAPSULE_NOTIFY_ADDR_MAX 28 /* sizeof(struct sockaddr_in6) */
bool capsule_seccomp_notify_address(const struct seccomp_notif *req, uint64_t *ret_ptr, size_t *ret_len);

typedef struct SeccompVerdict {
        bool cont;  /* answer SECCOMP_USER_NOTIF_FLAG_CONTINUE */
        int error;  /* else this errno (positive) */
        const char *wall; /* WALL_SYSCALL, WALL_NETWORK or NULL: nothing to report */
        char detail[WALL_DETAIL_MAX + 1];
} SeccompVerdict;

/* The answer to req and the wall it reports. addr: what was read at the call's address
 * (addr_len bytes, fewer than the call gave when it could not be read), NULL when it has none
 * or it could not be read (then connect and sendto are continued unreported: the kernel
 * decides). A call that is none of the notified ones is answered EPERM and reported. */
void capsule_seccomp_notify_judge(const struct seccomp_notif *req, const void *addr, size_t addr_len,
                                  SeccompVerdict *ret);
