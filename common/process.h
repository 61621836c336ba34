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

/* How long a child SIGKILLed here may take to be reaped. SIGKILL ends a process at once unless
 * the kernel holds it (an uninterruptible wait on a hung file system or device); past this it is
 * left unreaped and the caller says so, rather than waiting for it forever (threat 13). */
#define PROCESS_REAP_AFTER_KILL_USEC (5 * USEC_PER_SEC)

/* A pidfd for pid (pidfd_open(2)), or a negative errno. Opened on a child not yet reaped, it can
 * only ever name that child: a signal sent through it never reaches a process that got its
 * number later. */
int pidfd_open_pid(pid_t pid);
/* Send sig through pidfd (pidfd_send_signal(2)); 0 or a negative errno. */
int pidfd_signal(int pidfd, int sig);

/* Reap child pid if it ends within timeout (0: only look). With its pidfd (>= 0) the wait sleeps
 * until the child ends; without, it looks every 2 ms. Nothing is sent to it. Returns 0 with
 * *ret_status (may be NULL), -ETIMEDOUT when it still runs, or another negative errno (-ECHILD:
 * not our child, or already reaped). */
int process_wait(pid_t pid, int pidfd, usec_t timeout, int *ret_status);

/* SIGKILL child pid (through pidfd when >= 0, else by its pid: a child not yet reaped keeps its
 * number) and reap it within PROCESS_REAP_AFTER_KILL_USEC. Returns 0 with *ret_status, or -EBUSY
 * when it was not reaped in time (left: still a child of ours) or another negative errno. */
int process_kill_and_reap(pid_t pid, int pidfd, int *ret_status);

/* Wait for child pid for at most timeout; then SIGKILL it and reap it, bounded
 * (process_kill_and_reap). Returns 0 with *ret_status, -ETIMEDOUT when it had to be killed
 * (*ret_status: its wait status), or -EBUSY when even the kill did not end it in time (no
 * status). Meant for short runtime subcommands, not for jobs. */
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
