/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sys/prctl.h>

#include "fd-util.h"
#include "macro.h"
#include "process.h"

int safe_fork(ForkFlags flags, pid_t *ret_pid) {
        pid_t parent = getpid();
        pid_t pid = fork();

        if (pid < 0)
                return -errno;
        if (pid == 0 && (flags & FORK_DEATHSIG)) {
                /* Set before anything else runs; a parent that died in between has reparented
                 * us already, and the signal would never come. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
                        _exit(EXIT_FAILURE);
        }
        if (ret_pid)
                *ret_pid = pid;
        return pid;
}

int child_setup_fds(const int *fds, size_t n) {
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        sigset_t none;
        int moved[CHILD_FDS_MAX];

        if (n > CHILD_FDS_MAX)
                return -E2BIG;
        /* Move every source above the targets first, so a dup2 never clobbers a later source. */
        for (size_t i = 0; i < n; i++) {
                moved[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, (int) n);
                if (moved[i] < 0)
                        return -errno;
        }
        for (size_t i = 0; i < n; i++)
                if (dup2(moved[i], (int) i) < 0) /* dup2 clears O_CLOEXEC on the target */
                        return -errno;
        int r = close_all_fds_except((int) n, NULL, 0);
        if (r < 0)
                return r;
        for (int s = 1; s < NSIG; s++)
                if (s != SIGKILL && s != SIGSTOP)
                        (void) sigaction(s, &dfl, NULL);
        /* glibc's sigaction() refuses its two internal real-time signals (32 and 33), so an
         * ignore inherited from whoever started the worker would reach the child: reset them
         * with the raw system call. */
        for (int s = 32; s < SIGRTMIN; s++) {
                struct {
                        void *handler;
                        unsigned long flags;
                        void *restorer;
                        uint64_t mask;
                } k = {.handler = SIG_DFL};
                (void) syscall(SYS_rt_sigaction, s, &k, NULL, sizeof(k.mask));
        }
        sigemptyset(&none);
        (void) sigprocmask(SIG_SETMASK, &none, NULL);
        (void) setsid();
        return 0;
}

int child_setup_stdio(int in_fd, int out_fd, int err_fd) {
        int fds[3] = { in_fd, out_fd, err_fd };
        return child_setup_fds(fds, 3);
}

int pidfd_open_pid(pid_t pid) {
        int fd = (int) syscall(SYS_pidfd_open, pid, 0);
        return fd < 0 ? -errno : fd;
}

int pidfd_signal(int pidfd, int sig) {
        return syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0 ? -errno : 0;
}

int process_wait(pid_t pid, int pidfd, usec_t timeout, int *ret_status) {
        usec_t deadline = now_monotonic() + timeout;

        for (;;) {
                int st = 0;
                pid_t w = waitpid(pid, &st, WNOHANG);
                if (w == pid) {
                        if (ret_status)
                                *ret_status = st;
                        return 0;
                }
                if (w < 0 && errno != EINTR)
                        return -errno;
                usec_t now = now_monotonic();
                if (now >= deadline)
                        return -ETIMEDOUT;
                if (pidfd >= 0) {
                        /* Readable once the child has ended; EINTR or a spurious wake-up only
                         * brings the next look sooner. */
                        usec_t ms = (deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
                        struct pollfd p = {.fd = pidfd, .events = POLLIN};
                        (void) poll(&p, 1, (int) MIN(ms, (usec_t) INT_MAX));
                } else
                        nanosleep(&(struct timespec) {.tv_nsec = 2 * 1000 * 1000}, NULL);
        }
}

int process_kill_and_reap(pid_t pid, int pidfd, int *ret_status) {
        if (pidfd < 0 || pidfd_signal(pidfd, SIGKILL) == -ENOSYS)
                (void) kill(pid, SIGKILL);
        int r = process_wait(pid, pidfd, PROCESS_REAP_AFTER_KILL_USEC, ret_status);
        return r == -ETIMEDOUT ? -EBUSY : r;
}

int waitpid_bounded(pid_t pid, usec_t timeout, int *ret_status) {
        _cleanup_close_ int pidfd = pidfd_open_pid(pid);
        int r = process_wait(pid, pidfd, timeout, ret_status);
        if (r != -ETIMEDOUT)
                return r;
        r = process_kill_and_reap(pid, pidfd, ret_status);
        return r < 0 ? r : -ETIMEDOUT;
}
