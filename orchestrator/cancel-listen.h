/* SPDX-License-Identifier: MIT */
/* A running job's end of its cancel channel (orchestrator/cancel.h): the daemon sends one byte
 * 'C' on it when the controller cancels the job; a thread of the job's process then calls
 * exec_cancel(), which ends the capsule at once, or keeps it from starting. Anything else on
 * the channel, or its end (the daemon gone), is no cancel. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "exec/exec.h"

#define CANCEL_BYTE 'C'

typedef struct CancelListener {
        pthread_t thread;
        int fd;          /* the channel, not owned */
        int stop[2];     /* the listener's own stop pipe */
        ExecCancel *cancel;
        bool started;
} CancelListener;

#define CANCEL_LISTENER_NULL { .fd = -EBADF, .stop = { -EBADF, -EBADF } }

/* Listen on fd (>= 0) for as long as the job runs; a negative errno when no thread could be
 * started (the job then runs without being cancellable). */
int cancel_listen_start(CancelListener *l, int fd, ExecCancel *c);
/* Stop listening; a cancel that comes later changes nothing. Idempotent. */
void cancel_listen_stop(CancelListener *l);
