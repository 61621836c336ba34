/* SPDX-License-Identifier: MIT */
/* What a controller's client makes of a final result (contract sections 7 and 9).
 *
 * controller_exit_status(): the exit status `submit` takes as its own, as timeout(1) and
 * shells do: succeeded 0; failed the job's exit code (1..255; 1 when the result has none);
 * timed_out 124; killed 128+N for signal N (137, SIGKILL, when the limit that ended it left no
 * signal); CONTROLLER_EXIT_NOT_RUN_STATUSES and anything unknown 125.
 *
 * The log and the artifacts are read from <results>/<id>/ without following a symlink in the
 * last component of any path; the artifact walk is bounded in depth and in entries. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONTROLLER_EXIT_TIMED_OUT 124
#define CONTROLLER_EXIT_NOT_RUN 125
#define CONTROLLER_EXIT_SIGNAL_BASE 128

/* submit's 125s, one list for the code, its --help and the man page: the result statuses
 * (contract section 7) other than succeeded, failed, timed_out and killed, and the ways submit
 * itself ends without the job's status. cli/verbs.c prints both in submit --help;
 * tests/unit/test-controller.c holds controller_exit_status() to the first, and
 * tests/unit/test-cli-docs.sh holds tentaflake-worker(8)'s EXIT STATUS to both. */
#define CONTROLLER_EXIT_NOT_RUN_STATUSES "rejected, denied, expired, error, interrupted, cancelled"
#define CONTROLLER_EXIT_NOT_RUN_SUBMIT "submit itself failed, --wait-timeout passed, --apply could not apply"

int controller_exit_status(const json_t *result);

/* Copy <id>/job.log from byte offset on (what was not printed live, controller/live.h) to
 * out, flushed (out may escape it for a terminal: controller/terminal.h). A missing log is
 * success (a request that never ran has none), and so is an offset past its end. */
int controller_log_copy(int results_fd, const char *id, uint64_t offset, FILE *out);

/* The last max bytes of <id>/job.log (cut at a line start when one is near); *ret_cut when
 * bytes before them were left out. A missing log gives "". */
int controller_log_tail(int results_fd, const char *id, size_t max, char **ret, bool *ret_cut);

/* The artifacts' paths relative to <id>/artifacts/ (regular files only, sorted), at most max;
 * *ret_truncated when there were more. A missing directory gives []. */
int controller_artifacts(int results_fd, const char *id, size_t max, json_t **ret, bool *ret_truncated);
