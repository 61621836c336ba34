/* SPDX-License-Identifier: MIT */
/* Telling the operator a request waits for them (config notify.*, docs/operator.md).
 *
 * notify_pending() contract:
 *  - without notify.command it does nothing; the journal line and `list` tell the operator;
 *  - otherwise it returns at once: a child of the daemon (every other descriptor closed, so it
 *    holds none of the daemon's locks) runs the hook and waits for it, never longer than
 *    notify.timeout_seconds, then SIGKILLs it and its session;
 *  - the hook's file passes notify_command_check() first, or it is not run (logged);
 *  - the hook runs as notify.uid:notify.gid with no supplementary groups (never root, never the
 *    controller: the config parser refuses both), with no_new_privs, dying with its supervisor,
 *    in "/", with /dev/null as stdin, stdout and
 *    stderr, and only this environment: TENTAFLAKE_EVENT=pending, TENTAFLAKE_WORKER,
 *    TENTAFLAKE_ID, TENTAFLAKE_CLASS, TENTAFLAKE_REASON (the agent's words: data, never to be
 *    evaluated), TENTAFLAKE_SHA256, TENTAFLAKE_APPROVE (the command to run), PATH=/usr/bin:/bin;
 *  - a hook that cannot start, fails, or runs out of time is logged (worker_say) naming the
 *    request and why; the request stays pending either way;
 *  - at most NOTIFY_RUNNING_MAX hooks run at once: the agent decides how many requests wait, so
 *    a flood of them must not become a flood of processes; beyond it the hook is not run for
 *    that request, which is logged (the journal line and `list` still tell). */
#pragma once

#include "orchestrator/worker.h"

#define NOTIFY_RUNNING_MAX ELEMENTSOF(((Worker *) 0)->notify_pids)

void notify_pending(Worker *w, const char *id, const char *action_class, const char *reason,
                    const char *sha256);

/* Is the hook's file one only root can change: command[0] a regular file owned by root and
 * writable by nobody else, in a directory chain with the same rule (common/root-dir.h), no
 * symlink followed? Otherwise the hook would run whatever someone else put there (a hook in the
 * agent's workspace would be the agent's code outside the capsule). 0, or a negative errno with
 * why (may be NULL) saying what is wrong. Checked before every run, and by doctor. */
int notify_command_check(const char *path, char *why, size_t size);

/* The daemon reaped pid: true when it was a hook's supervisor (its slot is free again). */
bool notify_reaped(Worker *w, pid_t pid);
