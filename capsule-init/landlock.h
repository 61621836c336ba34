/* SPDX-License-Identifier: MIT */
/* Landlock for the job of a runc capsule (capsule/protocol.h, CAPSULE_LANDLOCK_ARG;
 * docs/capsule.md, "The runc engine's walls"). Raw syscalls and <linux/landlock.h> only: init is
 * static and takes no library for it. Outside init only for tests/unit/test-capsule-landlock.c,
 * which proves it on the host. */
#pragma once

#include <stddef.h>

/* Restrict the calling thread, and every process it starts from now on, with a Landlock ruleset
 * that handles every filesystem right of the best ABI the kernel offers (1: the thirteen of
 * Linux 5.13; 2: REFER; 3: TRUNCATE; 5: IOCTL_DEV) and grants:
 *   - beneath "/": read files, list directories, execute;
 *   - beneath each of writable[0..n_writable) (directories; init gives /work and /tmp): every
 *     handled right;
 *   - on /dev/null, /dev/zero, /dev/full, /dev/random and /dev/urandom: read, write, truncate
 *     and ioctl; on /dev/tty the same but ioctl; one the root does not hold is left out;
 *   - beneath each directory of readable_fds[0..n_readable) (descriptors; -1 skipped): read and
 *     list. For directories the caller keeps open that no path from "/" reaches any more (init's
 *     cache versions, their mount detached once the overlays hold them): Landlock grants by the
 *     path walked up from a file, and a detached mount's files never reach "/"; without it init
 *     could not read them after the job. The job has neither those descriptors nor a path to them.
 * So a write, a new name, a removal, a rename or link, a truncation or a device ioctl anywhere
 * else is refused EACCES (EXDEV for a rename between two places of different rights), whatever
 * the file's owner and mode; reads are not narrowed (beneath the root and those directories). Threads other than the caller's are not
 * touched (Landlock restricts the calling thread): call it from the thread that starts the job.
 * Fails closed: 0 or more (the ABI in force) when the ruleset is in force; a negative errno when
 * Landlock is missing (-ENOSYS, -EOPNOTSUPP) or any step failed, with err (err_size bytes) naming
 * the step and its path. The caller must then not start the job: a failure after the ruleset
 * was made but before it was enforced leaves the thread unrestricted. */
int capsule_landlock_apply(const char *const *writable, size_t n_writable, const int *readable_fds, size_t n_readable,
                           char *err, size_t err_size);
