/* SPDX-License-Identifier: MIT */
/* Confinement of the tar parser: an unprivileged uid, no capabilities, no_new_privs and a
 * seccomp allow-list that leaves it reading one fd, writing another, and managing memory. */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "artifacts/import-internal.h"
#include "common/macro.h"

void (*artifacts_test_parser_hook)(void) = NULL;

#if defined(__SANITIZE_ADDRESS__)
#define TFW_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TFW_SANITIZED 1
#endif
#endif

static int fail(char *err, size_t size, int r, const char *what) {
        (void) snprintf(err, size, "%s: %s", what, strerror(-r));
        return r;
}

static int set_limit(int resource, rlim_t v) {
        struct rlimit rl = { v, v };
        return setrlimit(resource, &rl) < 0 ? -errno : 0;
}

static void scmp_releasep(scmp_filter_ctx *ctx) {
        if (*ctx)
                seccomp_release(*ctx);
}

/* Spelled out rather than with SCMP_A*: every field initialised. An fd is compared on all 64
 * bits, so a call with garbage in the upper half is refused (killed), never let through. */
#define ARG_EQ(n, v)                                                                             \
        ((struct scmp_arg_cmp) {                                                                 \
                .arg = (n), .op = SCMP_CMP_EQ, .datum_a = (scmp_datum_t) (v), .datum_b = 0 })
#define ARG_HAS_NOT(n, bits)                                                                     \
        ((struct scmp_arg_cmp) {                                                                 \
                .arg = (n), .op = SCMP_CMP_MASKED_EQ, .datum_a = (bits), .datum_b = 0 })

#define NO_ARG ARG_EQ(0, 0) /* unused: the rule has no argument condition */

static int load_filter(int stream_fd, int chan_fd) {
        _cleanup_(scmp_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
        int r;

        if (!ctx)
                return -ENOMEM;
        /* Only the native architecture: any other ABI (x32, i386) is killed by default. */
        struct {
                int nr;
                unsigned n;
                struct scmp_arg_cmp arg;
        } rules[] = {
                /* The stream in, the frames out: nothing else can be read or written. */
                { SCMP_SYS(read), 1, ARG_EQ(0, stream_fd) },
                { SCMP_SYS(write), 1, ARG_EQ(0, chan_fd) },
                /* malloc; never executable memory. */
                { SCMP_SYS(brk), 0, NO_ARG },
                { SCMP_SYS(mmap), 1, ARG_HAS_NOT(2, PROT_EXEC) },
                { SCMP_SYS(mprotect), 1, ARG_HAS_NOT(2, PROT_EXEC) },
                { SCMP_SYS(munmap), 0, NO_ARG },
                { SCMP_SYS(mremap), 0, NO_ARG },
                { SCMP_SYS(madvise), 0, NO_ARG },
                { SCMP_SYS(exit_group), 0, NO_ARG },
                { SCMP_SYS(exit), 0, NO_ARG },
                { SCMP_SYS(rt_sigreturn), 0, NO_ARG },
#ifdef TFW_SANITIZED
                /* The sanitizer runtime tears down its signal stack at exit. */
                { SCMP_SYS(sigaltstack), 0, NO_ARG },
#endif
        };
        for (size_t i = 0; i < ELEMENTSOF(rules); i++) {
                r = rules[i].n ? seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, rules[i].nr, 1,
                                                        rules[i].arg)
                               : seccomp_rule_add_exact(ctx, SCMP_ACT_ALLOW, rules[i].nr, 0);
                if (r < 0)
                        return r;
        }
        return seccomp_load(ctx);
}

/* Contract: called in the parser child, as root, with every fd but stream_fd and chan_fd
 * closed. Refuses (returns an error, the caller exits) when any step fails or does not hold:
 * it never continues half-confined. Guarantees on success: real, effective and saved uid/gid
 * are the unprivileged ones, no supplementary groups, empty capability sets (bounding set
 * too), not dumpable, no_new_privs, and the allow-list above is loaded (kill on anything else).
 * Also bounds core size, CPU time and (when not under a sanitizer) address space. */
int artifact_parser_confine(const ArtifactLimits *limits, int stream_fd, int chan_fd,
                            pid_t parent, char *err, size_t err_size) {
        uid_t u = limits->unpriv_uid, ru, eu, su;
        gid_t g = limits->unpriv_gid, rg, eg, sg;
        int r;

        if (u == 0 || g == 0 || u == (uid_t) -1 || g == (gid_t) -1)
                return fail(err, err_size, -EINVAL, "refusing to parse as root");

        r = set_limit(RLIMIT_CORE, 0);
        if (r >= 0)
                r = set_limit(RLIMIT_CPU, ARTIFACT_PARSER_CPU_SECONDS);
#ifndef TFW_SANITIZED
        if (r >= 0)
                r = set_limit(RLIMIT_AS, ARTIFACT_PARSER_AS_MAX);
#endif
        if (r < 0)
                return fail(err, err_size, r, "setrlimit");

        /* Empty the bounding set while we may (CAP_SETPCAP); the uid change below clears the
         * other sets. */
        for (int cap = 0; cap < 64; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        return fail(err, err_size, -errno, "dropping the capability bounding set");

        if (setgroups(0, NULL) < 0)
                return fail(err, err_size, -errno, "setgroups");
        if (setresgid(g, g, g) < 0)
                return fail(err, err_size, -errno, "setresgid");
        if (setresuid(u, u, u) < 0)
                return fail(err, err_size, -errno, "setresuid");
        if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0 || ru != u || eu != u ||
            su != u || rg != g || eg != g || sg != g || getgroups(0, NULL) != 0)
                return fail(err, err_size, -EPERM, "credentials did not change");
        /* Paranoia (as systemd does): getting root back must be impossible now. */
        if (setresuid(0, 0, 0) >= 0 || setresgid(0, 0, 0) >= 0)
                return fail(err, err_size, -EPERM, "could regain root");

        /* Die with the writer. Set after the uid change, which clears it; then check the
         * writer did not die before. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
                return fail(err, err_size, -errno, "PR_SET_PDEATHSIG");
        if (getppid() != parent)
                return fail(err, err_size, -ESRCH, "the writer is gone");

        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return fail(err, err_size, -errno, "PR_SET_DUMPABLE");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return fail(err, err_size, -errno, "PR_SET_NO_NEW_PRIVS");
        r = load_filter(stream_fd, chan_fd);
        if (r < 0)
                return fail(err, err_size, r, "loading the seccomp filter");
        return 0;
}
