/* SPDX-License-Identifier: MIT */
/* What the controller can reach, checked as the controller (doctor, and the daemon at start).
 *
 * A worker whose directories are right for root can still lock its agent out: an ancestor of
 * results_dir made 0750 (a umask, a unit's RuntimeDirectoryMode=) leaves `submit` with
 * "Permission denied". controller_view_check() therefore runs its checks in a child that has
 * become container_uid:container_gid (no other group: results carry that group, so it is all the
 * controller needs) and reports, through report, one line each:
 *   "workspace"    it exists, is a directory reached without a symlink, owned by container_uid
 *                  (checked as root; nothing else is checked when it fails);
 *   "inbox"        <workspace>/.tentaflake-worker/inbox can be written and searched; ✓ too when
 *                  it is not made yet (the worker makes it, the controller's own);
 *   "results_view" every existing directory on the way to results_dir can be searched, and
 *                  results_dir itself read; ✓ too when it is not made yet and its existing
 *                  ancestors can be searched; no line when something on the way is not a
 *                  directory (results_dir's own check says so).
 * Nothing is created or changed. */
#pragma once

#include <stdbool.h>

#include "common/time-util.h"
#include "parser/config.h"

typedef void (*ControllerViewReport)(void *userdata, const char *check, bool ok, const char *detail);

void controller_view_check(const Config *c, bool use_openat2, ControllerViewReport report, void *userdata);

/* For tests only: how long the look may take (default 10 s), and a child that stops itself
 * once it is the controller, as the agent can make it do (tests/unit/test-controller-view.c). */
extern usec_t controller_view_test_timeout_usec;
extern bool controller_view_test_stop_child;
