/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "process.h"

int waitpid_bounded(pid_t pid, usec_t timeout, int *ret_status) {
        usec_t deadline = now_monotonic() + timeout;
        int st = 0;

        for (;;) {
                pid_t w = waitpid(pid, &st, WNOHANG);
                if (w == pid)
                        break;
                if (w < 0 && errno != EINTR)
                        return -errno;
                if (now_monotonic() >= deadline) {
                        (void) kill(pid, SIGKILL);
                        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                                ;
                        *ret_status = st;
                        return -ETIMEDOUT;
                }
                nanosleep(&(struct timespec) {.tv_nsec = 2 * 1000 * 1000}, NULL);
        }
        *ret_status = st;
        return 0;
}
