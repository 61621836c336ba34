/* SPDX-License-Identifier: MIT */
/* Where a request is, seen from the controller's side of the results directory (contract
 * sections 3 and 7), and waiting for it to move with inotify: no polling loop.
 *
 * A request is final when <results>/<id>/result.json exists (its directory appears complete,
 * in one rename), or when the worker could not let it own its id and left a .rejected/ record
 * named "<id>.json-<stamp>.json" whose "name" is "<id>.json" and whose rejected_at is not
 * before the submission (an id already in use): a result {"id","status":"rejected","error",
 * "message"} is made from that record. Before that, <id>.state.json says pending, queued or
 * running. Everything is read without following a symlink in the last component and bounded
 * (a result.json of at most 1 MiB). */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "common/time-util.h"

typedef enum ControllerState {
        CONTROLLER_UNKNOWN,  /* nothing yet: still in the inbox (or no such request) */
        CONTROLLER_PENDING,
        CONTROLLER_QUEUED,
        CONTROLLER_RUNNING,
        CONTROLLER_FINAL,
} ControllerState;

typedef struct ControllerStatus {
        ControllerState state;
        json_t *result;      /* FINAL: owned by the caller */
        bool anonymous;      /* FINAL from a .rejected/ record: there is no <id>/ directory */
        char since[RFC3339_MAX]; /* PENDING, QUEUED, RUNNING: the state file's "since" ("" when
                                  * it has none) */
} ControllerStatus;

const char *controller_state_to_string(ControllerState s);

/* not_before: a .rejected/ record counts only from this time (seconds are compared, as the
 * record's stamp has no fraction); with scan_rejected false the .rejected/ records are not
 * looked at (nothing changed there since the last look). */
/* A state file's bound: it names the request's argv, bounded by the request's own size. */
#define CONTROLLER_STATE_MAX_BYTES (1 << 20)

/* dir_fd/path, a regular file (never through a link) of at most max bytes, as a JSON object. */
int controller_load_json_at(int dir_fd, const char *path, size_t max, json_t **ret);
int controller_status(int results_fd, const char *id, usec_t not_before, bool scan_rejected,
                      ControllerStatus *ret);
void controller_status_done(ControllerStatus *s);

typedef struct ControllerWatch {
        int fd;              /* inotify, non-blocking: poll it for POLLIN */
        int results_wd, rejected_wd;
} ControllerWatch;

#define CONTROLLER_WATCH_NULL { .fd = -EBADF, .results_wd = -1, .rejected_wd = -1 }

#define CONTROLLER_WATCH_CHANGED 1   /* something in the results directory changed */
#define CONTROLLER_WATCH_REJECTED 2  /* something appeared in .rejected/ */

/* Watch before looking: an event between the look and the wait is not lost. */
int controller_watch_open(int results_fd, ControllerWatch *ret, TfwError *e);
/* Read every queued event: a mask of CONTROLLER_WATCH_* (0 when none), or -ENOENT when the
 * results directory itself went away. An overflow counts as both. */
int controller_watch_read(ControllerWatch *w);
void controller_watch_close(ControllerWatch *w);
