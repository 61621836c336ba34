/* SPDX-License-Identifier: MIT */
/* The inbox plane's end of a job whose process is gone (threat 13): the daemon's second signal,
 * its grace timeout, a job process that died, the daemon leaving on an error. The job process
 * was SIGKILLed or died; what it started (`runsc run` in a session of its own, the gofer, the
 * sandbox, the job cgroup; or the engine's container) is ended from the daemon, bounded in time
 * (capsule/teardown.h). */
#pragma once

#include "orchestrator/worker.h"

/* End the capsule of job `id` with this worker's driver: every process of it killed, its
 * cgroup and its container removed. Returns 0 when nothing of it is left; a negative errno with
 * the reason in e otherwise (after the bound). *ret_killed: how many processes were killed;
 * *ret_found: whether anything of it was there (CapsuleTeardown.found). */
int job_teardown(Worker *w, const char *id, unsigned *ret_killed, bool *ret_found, TfwError *e);
