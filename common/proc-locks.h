/* SPDX-License-Identifier: MIT */
/* Whether a process holds a lock, read from /proc/locks without taking it (taking it, even for
 * a moment, could make the worker that starts at that moment refuse to run). */
#pragma once

#include <sys/types.h>

/* Does a process hold an flock on inode ino? 1 yes, 0 no, negative errno when /proc/locks
 * cannot be read. Lines look like "3: FLOCK  ADVISORY  WRITE 1234 08:02:56789 0 EOF"; waiters
 * ("3: -> FLOCK ...") hold nothing. Only the inode number is compared: on overlayfs the device
 * printed there is not the one stat() gives, so a false match is possible; callers treat a
 * match as "a worker may run" and only ever lose an answer by it, never act wrongly. */
int flock_held(ino_t ino);
/* The same for the inode ino of the filesystem dev (st_dev): for a filesystem whose device
 * /proc/locks prints as stat() gives it (tmpfs, ext4; not overlayfs). */
int flock_held_on(dev_t dev, ino_t ino);
