/* SPDX-License-Identifier: MIT */
/* The worker's own directories: the private state directory and the published results
 * directory (contract sections 2 and 3).
 *
 * worker_dirs_open() reaches each one by descriptor from "/" (common/root-dir.h: no symlink in
 * any component, and every existing ancestor root's and writable by root only, a sticky /tmp
 * refused too, so nobody can swap what root makes for a symlink before its fchown/fchmod),
 * creates each one that is missing (parents 0755 root) with the right owner and mode, and
 * refuses to start when an existing one is not a directory or has the wrong owner, group or
 * mode, naming the config key and the directory at fault:
 *   state_dir    root:root 0700
 *   results_dir  root:container_gid 02750 (the setgid bit makes published entries inherit the
 *                controller's group)
 * Below state_dir it makes requests/ and scratch/ (0700), below results_dir the
 * staging area .staging/ (0700, so the controller cannot look into a result being built) and
 * .rejected/ (02750). Each is opened without following a symlink. The daemon (runsc driver)
 * then puts a tmpfs of its own mount namespace over scratch/ (orchestrator/scratch.h). */
#pragma once

#include <stdbool.h>

#include "common/error.h"
#include "parser/config.h"

typedef struct WorkerDirs {
        int state_fd;
        int requests_fd;
        int scratch_fd;
        int results_fd;
        int staging_fd;
        int rejected_fd;
        /* The generation store (orchestrator/store-tmpfs.h), -EBADF without one: a tmpfs of
         * its own at <state_dir>/store, mounted in the host's namespace (it outlives the
         * daemon), checked by the daemon before use. */
        int store_fd;
} WorkerDirs;

#define WORKER_DIRS_NULL                                                                          \
        { .state_fd = -EBADF, .requests_fd = -EBADF, .scratch_fd = -EBADF, .results_fd = -EBADF, \
          .staging_fd = -EBADF, .rejected_fd = -EBADF, .store_fd = -EBADF }

#define STATE_DIR_MODE 0700
#define RESULTS_DIR_MODE 02750

int worker_dirs_open(const Config *c, WorkerDirs *ret, TfwError *e);

/* runsc's own record of the worker's containers (its --root): /run/tentaflake-worker-<name>/runsc,
 * root 0700, below the directory the default results_dir is in (root 0755; the unit's
 * RuntimeDirectory=). /run is a tmpfs, where runsc keeps its root by default: a request
 * writes none of it to the disk, a worker that starts after a crash still finds its
 * predecessor's containers there (and the operator's verbs from outside the unit), and it is
 * cleared at a reboot together with the containers it describes. config_runsc_root()
 * (parser/config.h) names it; worker_runsc_root_open() also makes it (and its parent) when
 * missing and refuses one that is not root's alone. */
int worker_runsc_root_open(const Config *c, char *buf, size_t size, TfwError *e);
/* For doctor: check state_dir (results false) or results_dir against the rules above, without
 * creating or repairing anything. Missing or wrong: a negative errno and code "bad_directory". */
int worker_dir_check(const Config *c, bool results, TfwError *e);
void worker_dirs_close(WorkerDirs *d);
