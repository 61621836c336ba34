/* SPDX-License-Identifier: MIT */
/* `shell` (contract section 9; docs/controller.md, "Make the worker the agent's only shell"):
 * `submit` shaped as a shell, what a harness's shell prefix points at.
 *
 * `shell -c STRING` runs STRING in a capsule (`sh -c`; Claude Code's Bash-tool string, which is
 * bash's syntax, `bash -c`), `shell -- ARGV...` runs ARGV, from the caller's directory, the
 * job's output live on out, its exit status as the caller's. Changes: applied when the job ended
 * by itself (auto; a changeset that cannot be applied makes the status 125), or left in the
 * result and said in one line (review).
 *
 * Claude Code's Bash-tool string (controller/shell-string.h): its last step, `pwd -P` into its
 * cwd file under /tmp, is replaced by one that leaves the directory the job ended in as an
 * artifact; once the job ended, that directory, taken as a path below the workspace and opened
 * there one component at a time without following a link, is written into the cwd file as the
 * host's path: only a directory the host's workspace holds, only into a file of Claude's exact
 * name, opened without following a link and only when it is this user's regular file (or new).
 * The job picks nothing but a directory of the workspace, which is the agent's.
 *
 * A harness that gives up on a command signals its process (Claude Code: SIGTERM, SIGKILL 1.5 s
 * later): with stop_fd, the job is then cancelled rather than left to run to its timeout. */
#pragma once

#include <stdbool.h>
#include <stdio.h>

#include "common/error.h"

typedef struct ShellOptions {
        const char *workspace;  /* NULL: as submit finds it */
        const char *results;    /* NULL: from worker.json */
        const char *string;     /* -c STRING, or NULL */
        char *const *argv;      /* -- ARGV..., when string is NULL */
        size_t argc;
        bool review;            /* leave the changes for review instead of applying them */
        const char *timeout;    /* --timeout S as given, or NULL */
        const int *stop_fd;     /* a signalfd: once readable, the job is cancelled (controller/
                                 * cancel.h) and the status is 128 + the signal; NULL: never */
} ShellOptions;

/* 0 with *ret_status the status to exit with, or a negative errno with e set (nothing ran). */
int controller_shell(const ShellOptions *o, FILE *out, FILE *err, int *ret_status, TfwError *e);
