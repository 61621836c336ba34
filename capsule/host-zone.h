/* SPDX-License-Identifier: MIT */
/* The host's time zone, as the capsule's /etc/localtime and /etc/timezone carry it (issue 36:
 * a lint plugin that found no zone fell back to a DNS lookup and crashed). Read by the worker
 * from the host's own /etc at capsule build time, never from anything the agent controls. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* A TZif file of tzdata is a few KiB (the largest, with every transition to 2037, under 4 KiB);
 * anything past this is not a zone. */
#define CAPSULE_ZONE_MAX_BYTES (64 * 1024)
/* A zone name: "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5". */
#define CAPSULE_ZONE_NAME_MAX 64
#define CAPSULE_ZONE_UTC_NAME "Etc/UTC"

typedef struct CapsuleZone {
        char name[CAPSULE_ZONE_NAME_MAX + 1]; /* "" when the host's zone has no name we trust */
        char *tzif;                           /* the TZif bytes of /etc/localtime */
        size_t size;
        bool from_host;                       /* false: the host has none we can use, UTC */
} CapsuleZone;

/* Is s a zone name: 1..CAPSULE_ZONE_NAME_MAX bytes of '/'-separated components of
 * A-Z a-z 0-9 . _ + -, none empty, "." or "..", and no leading '/'? */
bool capsule_zone_name_is_valid(const char *s);

/* The zone of the host whose root directory is root_fd ("/" in production; a test's
 * directory in tests/unit/test-capsule-etc.c).
 *
 * Accepts: root_fd/etc/localtime that is, or whose symlinks lead to, a regular file of at most
 * CAPSULE_ZONE_MAX_BYTES beginning with the TZif magic. Its name is the part of the link's
 * target after its last "zoneinfo/" (as systemd's timedatectl reads it); when /etc/localtime
 * is no such link, the first line of root_fd/etc/timezone (Debian's), a regular file of at
 * most 256 bytes. A name that is not capsule_zone_name_is_valid() is dropped ("").
 * Refuses: nothing; a missing, unreadable, oversized or non-TZif localtime gives UTC
 * (CAPSULE_ZONE_UTC_NAME and a built-in TZif of UTC, from_host false), as glibc would
 * without one.
 * Guarantees: at most CAPSULE_ZONE_MAX_BYTES + 1 bytes read, no descriptor left open,
 * nothing written. Returns 0, or -ENOMEM. */
int capsule_zone_read(int root_fd, CapsuleZone *ret);
void capsule_zone_done(CapsuleZone *z);
