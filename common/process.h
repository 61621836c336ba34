/* SPDX-License-Identifier: MIT */
/* Waiting for helper processes (runtime subcommands) without ever waiting forever. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "time-util.h"

typedef enum ForkFlags {
        /* The child is SIGKILLed when the parent dies (PR_SET_PDEATHSIG), and exits at once
         * when the parent is already gone by the time it is set. */
        FORK_DEATHSIG = 1 << 0,
} ForkFlags;

/* The one fork of the worker (systemd's safe_fork_full is the model): every child it starts
 * (a job process, the artifact writer and parser, the runtime and engine CLIs) comes from here.
 * Returns the child's pid in the parent and 0 in the child, or a negative errno (no child). */
int safe_fork(ForkFlags flags, pid_t *ret_pid);

/* Wait for pid for at most timeout; then SIGKILL it and reap it. *ret_status is its wait
 * status either way. Returns 0, or -ETIMEDOUT when it had to be killed. Polls every 2 ms:
 * meant for short runtime subcommands, not for jobs. */
int waitpid_bounded(pid_t pid, usec_t timeout, int *ret_status);

/* Between fork and exec, for the runtime and engine CLIs: in_fd, out_fd and err_fd become 0, 1
 * and 2 even when they overlap or already sit there, every other fd is closed, every signal is
 * back to its default disposition (glibc's internal 32 and 33 too, through the raw system call)
 * and unblocked, and the process leads a new session. Raw system calls only. */
int child_setup_stdio(int in_fd, int out_fd, int err_fd);
/* The same for any number of fds: fds[i] becomes fd i (0, 1, 2 and then the rest in order), every
 * other fd is closed. At most CHILD_FDS_MAX. */
#define CHILD_FDS_MAX 256
int child_setup_fds(const int *fds, size_t n);
