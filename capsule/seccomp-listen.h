/* SPDX-License-Identifier: MIT */
/* The worker's seccomp listener of one runc capsule (issue 49; docs/threats.md, row 25): the
 * unix socket at the spec's linux.seccomp.listenerPath, to which `runc run` sends the
 * capsule's notification descriptor (SCM_RIGHTS, with the container's state), and the thread
 * that answers the notifications as capsule/seccomp-notify.h says and counts the walls.
 *
 * Contract. The socket is made at a path in a directory only root may enter (the runc driver's
 * listeners directory, 0700), mode 0600; the one connection it takes is from the runtime's
 * process (SO_PEERCRED: that pid, uid 0), at most SECCOMP_LISTEN_TRIES connections are looked
 * at, and the descriptor taken must be a seccomp notification descriptor (anything else, or
 * more than one descriptor, is closed). The socket is removed once the descriptor is taken.
 * Each notification is answered: continued or refused with the verdict's errno; a call's
 * destination is read from the job's memory (/proc/<pid>/mem, at most CAPSULE_NOTIFY_ADDR_MAX
 * bytes, after SECCOMP_IOCTL_NOTIF_ID_VALID so the pid is still the caller) and is only ever
 * reported, never trusted for a refusal the kernel would not make. The walls it counts are
 * bounded by capsule/walls.h (WALLS_MAX entries); the notifications themselves by the job's own
 * CPU (each blocks its caller until answered).
 *
 * Fails closed: the spec names the listener, so runc refuses to start the container when it
 * cannot hand the descriptor over; once the listener is gone (its thread ended, the descriptor
 * closed) the kernel answers every notifying call ENOSYS, still a refusal. */
#pragma once

#include <sys/types.h>

#include "capsule/walls.h"

#define SECCOMP_LISTEN_TRIES 4

typedef struct SeccompListener SeccompListener;

/* A listening socket at path (absolute, shorter than sun_path; a leftover socket there is
 * replaced). 0 or a negative errno. */
int seccomp_listen_open(const char *path, SeccompListener **ret);

/* The thread started: it takes the descriptor from runtime_pid's connection, then answers
 * notifications until every process of the filter has ended or seccomp_listen_finish. Every
 * signal blocked on it. 0 or a negative errno. */
int seccomp_listen_start(SeccompListener *l, pid_t runtime_pid);

/* Stop the thread (it ends at once: it waits on nothing else), join it, close and remove
 * everything; the walls it counted added to ret (NULL: dropped); l freed. NULL is a no-op. */
void seccomp_listen_finish(SeccompListener *l, Walls *ret);
