/* SPDX-License-Identifier: MIT */
/* The status of contract section 7 from how a capsule ended (capsule/job.h). */
#define _GNU_SOURCE
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "capsule/job.h"
#include "common/macro.h"

static const char *const status_names[_CAPSULE_STATUS_MAX] = {
        [CAPSULE_SUCCEEDED] = "succeeded", [CAPSULE_FAILED] = "failed",
        [CAPSULE_TIMED_OUT] = "timed_out", [CAPSULE_KILLED] = "killed",
        [CAPSULE_ERROR] = "error",
};

const char *capsule_status_to_string(CapsuleStatus s) {
        return s >= 0 && s < _CAPSULE_STATUS_MAX ? status_names[s] : NULL;
}

static void set_msg(CapsuleResult *r, const char *fmt, ...) _printf_(2, 3);
static void set_msg(CapsuleResult *r, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->message, sizeof(r->message), fmt, ap);
        va_end(ap);
}

/* A capsule whose init reported (its trailer, with the secret token): the runtime's word
 * checked against it, then init's own failure, the job's signal, or the job's exit. */
static void classify_trailer(const CapsuleEnding *end, CapsuleResult *r) {
        const CapsuleTrailer *t = &end->trailer;

        if (!WIFEXITED(end->runsc_status) ||
            WEXITSTATUS(end->runsc_status) != t->exit_code) {
                r->status = CAPSULE_ERROR;
                r->reason = "runtime_failed";
                set_msg(r, "runsc ended with wait status 0x%x although the capsule "
                           "reported exit %d",
                        (unsigned) end->runsc_status, t->exit_code);
                return;
        }
        if (streq(t->init_error, CAPSULE_INIT_ERROR_SNAPSHOT)) {
                r->status = CAPSULE_ERROR;
                r->reason = "snapshot_copy";
                if (t->error == ENOSPC)
                        set_msg(r, "the snapshot does not fit in /work "
                                   "(limits.workspace_tmpfs)");
                else
                        set_msg(r, "cannot copy the snapshot into /work: %s",
                                strerror(t->error));
                return;
        }
        if (streq(t->init_error, CAPSULE_INIT_ERROR_CWD)) {
                /* The request named a directory its snapshot does not hold: never
                 * runnable as given (exec/exec.c: refused). */
                r->status = CAPSULE_ERROR;
                r->reason = "cwd_not_found";
                set_msg(r, "cwd '%s' is not a directory of the workspace's snapshot (%s)",
                        end->cwd ?: "?", t->error == ENOTDIR || t->error == ELOOP
                                                 ? "a file or a symbolic link is in its way"
                                                 : strerror(t->error));
                return;
        }
        if (!streq(t->init_error, CAPSULE_INIT_ERROR_NONE) &&
            !streq(t->init_error, CAPSULE_INIT_ERROR_EXEC)) {
                r->status = CAPSULE_ERROR;
                r->reason = "init_failed";
                set_msg(r, "the capsule's init failed (%s): %s", t->init_error,
                        strerror(t->error));
                return;
        }
        if (t->signal != 0) {
                r->status = CAPSULE_KILLED;
                r->reason = "signal";
                r->signal = t->signal;
                set_msg(r, "killed by signal %d (%s)", t->signal, strsignal(t->signal));
                return;
        }
        r->exit_code = t->exit_code;
        r->status = t->exit_code == 0 ? CAPSULE_SUCCEEDED : CAPSULE_FAILED;
        if (streq(t->init_error, CAPSULE_INIT_ERROR_EXEC)) {
                /* argv[0] is not there or cannot run in this capsule: the toolchain,
                 * not the job, is what failed (exec/exec.h classifies it). */
                r->reason = "exec_failed";
                set_msg(r, "cannot execute '%s': %s", end->argv0 ?: "?",
                        strerror(t->error));
        }
        else if (end->events.oom_kills > 0)
                set_msg(r, "the memory limit killed %llu process(es) of the job",
                        (unsigned long long) end->events.oom_kills);
}

void capsule_classify(const CapsuleEnding *end, CapsuleResult *r) {
        const CapsuleTrailer *t = &end->trailer;
        bool died = !end->have_trailer || t->signal != 0;

        r->exit_code = -1;
        r->signal = 0;
        r->reason = NULL;
        r->message[0] = 0;

        if (end->timed_out) {
                r->status = CAPSULE_TIMED_OUT;
                r->reason = "timeout";
                set_msg(r, "timed out after %llu s; the capsule was killed",
                        (unsigned long long) end->timeout_seconds);
                return;
        }
        /* The worker's own kills, then the kernel's record, when the job did not finish by
         * itself. */
        if (end->output_exceeded) {
                r->status = CAPSULE_KILLED;
                r->reason = "output_limit";
                r->signal = SIGKILL;
                set_msg(r, "ended: the job wrote more than %llu bytes of output",
                        (unsigned long long) end->output_bytes);
                return;
        }
        if (end->cpu_unreadable) {
                r->status = CAPSULE_ERROR;
                r->reason = "runtime_failed";
                set_msg(r, "the capsule's CPU time could not be read for %llu s (%s); it was "
                           "ended rather than run without its CPU-time limit",
                        (unsigned long long) (CAPSULE_CPU_UNREADABLE_USEC / USEC_PER_SEC),
                        strerror(end->cpu_error));
                return;
        }
        if (end->cpu_exceeded) {
                r->status = CAPSULE_KILLED;
                r->reason = "cpu_limit";
                r->signal = SIGKILL;
                set_msg(r, "ended: the capsule used more than %llu s of CPU time",
                        (unsigned long long) end->cpu_seconds);
                return;
        }
        if (end->events.oom_kills > 0 && died) {
                r->status = CAPSULE_KILLED;
                r->reason = "memory_limit";
                r->signal = SIGKILL;
                set_msg(r, "killed by the memory limit (%llu bytes)",
                        (unsigned long long) end->memory);
                return;
        }
        if (end->events.pids_max > 0 && !end->have_trailer) {
                r->status = CAPSULE_KILLED;
                r->reason = "pids_limit";
                r->signal = SIGKILL;
                set_msg(r, "killed at the process limit (%llu)", (unsigned long long) end->pids);
                return;
        }
        if (end->have_trailer) {
                classify_trailer(end, r);
                return;
        }
        /* No word from init: it was killed (by a job process of the same uid, or with the
         * whole sandbox), or the runtime failed. */
        if (WIFEXITED(end->runsc_status) && WEXITSTATUS(end->runsc_status) > 128 &&
            WEXITSTATUS(end->runsc_status) <= 128 + 64) {
                r->status = CAPSULE_KILLED;
                r->reason = "signal";
                r->signal = WEXITSTATUS(end->runsc_status) - 128;
                set_msg(r, "the capsule ended by signal %d before its init reported",
                        r->signal);
                return;
        }
        r->status = CAPSULE_ERROR;
        r->reason = "runtime_failed";
        const char *rt = end->runtime ? end->runtime : "runsc";
        if (WIFSIGNALED(end->runsc_status))
                set_msg(r, "%s was killed by signal %d", rt, WTERMSIG(end->runsc_status));
        else
                set_msg(r, "%s exited with status %d before the capsule reported%s%s", rt,
                        WIFEXITED(end->runsc_status) ? WEXITSTATUS(end->runsc_status) : -1,
                        end->runsc_error && *end->runsc_error ? ": " : "",
                        end->runsc_error ?: "");
}

