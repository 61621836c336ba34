/* SPDX-License-Identifier: MIT */
/* Waiting for helper processes (runtime subcommands) without ever waiting forever. */
#pragma once

#include <sys/types.h>

#include "time-util.h"

/* Wait for pid for at most timeout; then SIGKILL it and reap it. *ret_status is its wait
 * status either way. Returns 0, or -ETIMEDOUT when it had to be killed. Polls every 2 ms:
 * meant for short runtime subcommands, not for jobs. */
int waitpid_bounded(pid_t pid, usec_t timeout, int *ret_status);
