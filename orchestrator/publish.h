/* SPDX-License-Identifier: MIT */
/* Publishing into results_dir (contract sections 3 and 7).
 *
 * Guarantees:
 *  - <id>/ appears by one rename from the staging area (.staging/, mode 0700, which the
 *    controller cannot enter), complete: result.json, job.log and artifacts/ are in it before
 *    it becomes visible, and an existing <id>/ is never replaced (RENAME_NOREPLACE);
 *  - every published entry is root-owned with group container_gid: directories 02750,
 *    files 0640, so the controller reads and cannot change;
 *  - <id>.state.json exists only while the request is not final and goes when it is;
 *  - <id>.live.log exists only while the job runs (created by publish_live_open, dropped by
 *    publish_commit once <id>/job.log is in place), 0640 root:container_gid, only ever
 *    written through its descriptor: created O_EXCL | O_NOFOLLOW in the results directory,
 *    where the controller cannot create or rename anything;
 *  - a name the controller chose is never used as a path: .rejected/ records use a sanitised
 *    copy and keep the original only as JSON text. */
#pragma once

#include <jansson.h>

#include "common/error.h"
#include "common/time-util.h"
#include "orchestrator/dirs.h"
#include "orchestrator/store.h"

/* Write <id>.state.json {"id","state","since","action_class","argv"} for the record's state
 * (argv from the captured request, left out when it cannot be read). */
int publish_state(const WorkerDirs *d, gid_t gid, const RequestRecord *rec, usec_t since, TfwError *e);

/* Create <id>.live.log afresh (removing one a crash left) and return its fd, open for
 * appending (capsule/log-live.h). */
int publish_live_open(const WorkerDirs *d, gid_t gid, const char *id, TfwError *e);
/* Remove <id>.live.log if there is one. */
void publish_live_drop(const WorkerDirs *d, const char *id);

/* Create a fresh .staging/<id>/ (removing a stale one a crash left) and return its fd. */
int publish_stage_begin(const WorkerDirs *d, const char *id, TfwError *e);

/* Write result.json into the staging directory, normalise the staging directory's owner and
 * mode, rename it into place, fsync, and drop <id>.state.json and <id>.live.log. */
int publish_commit(const WorkerDirs *d, gid_t gid, const char *id, json_t *result, TfwError *e);

/* A rejection that cannot own an id: .rejected/<sanitised name>-<utc stamp>.json. */
int publish_rejected_record(const WorkerDirs *d, gid_t gid, const char *name, const char *code,
                            const char *message, usec_t now, TfwError *e);

/* Load results/<id>/result.json; NULL when there is none (or it is not valid JSON). */
json_t *publish_load_result(const WorkerDirs *d, const char *id);

/* Does results_dir/<id>/ exist? */
bool publish_exists(const WorkerDirs *d, const char *id);
