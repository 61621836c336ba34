/* SPDX-License-Identifier: MIT */
/* What the capsule's init does as the sandbox's root before the job (capsule/init-drop.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "capsule/init-drop.h"
#include "capsule/protocol.h"

int capsule_init_parse_layer_arg(const char *arg, uid_t *ret_uid, gid_t *ret_gid) {
        const char *s = arg + strlen(CAPSULE_LAYER_ARG);
        char *end;
        unsigned long long u, g;

        if (strncmp(arg, CAPSULE_LAYER_ARG, strlen(CAPSULE_LAYER_ARG)) != 0 || *s < '0' || *s > '9')
                return -EINVAL;
        errno = 0;
        u = strtoull(s, &end, 10);
        if (errno || *end != ':' || end[1] < '0' || end[1] > '9')
                return -EINVAL;
        g = strtoull(end + 1, &end, 10);
        if (errno || *end || u == 0 || g == 0 || u >= UINT32_MAX || g >= UINT32_MAX)
                return -EINVAL;
        *ret_uid = (uid_t) u;
        *ret_gid = (gid_t) g;
        return 0;
}

/* The filter capsule_init_refuse_mount loads, built by capsule_init_prepare_refuse_mount. */
static scmp_filter_ctx mount_filter;

int capsule_init_prepare_refuse_mount(void) {
        if (mount_filter)
                return 0;
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (!ctx)
                return -ENOMEM;
        int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mount), 0);
        if (r == 0)
                r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(umount2), 0);
        if (r < 0) {
                seccomp_release(ctx);
                return r;
        }
        mount_filter = ctx;
        return 0;
}

/* The spec's profile leaves CAPSULE_SECCOMP_LAYER_CALLS (mount, umount2) to init for the
 * overlays: refused again from here on, EPERM as the profile answers, to init and everything it
 * starts (a filter stays across exec and fork, and filters only add up). */
int capsule_init_refuse_mount(void) {
        int r = capsule_init_prepare_refuse_mount();
        if (r < 0)
                return r;
        r = seccomp_load(mount_filter);
        seccomp_release(mount_filter);
        mount_filter = NULL;
        return r < 0 ? r : 0;
}

static int capget_all(struct __user_cap_data_struct d[2]) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        return syscall(SYS_capget, &h, d) < 0 ? -errno : 0;
}

static int capset_none(void) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct d[2] = { { 0 } };
        return syscall(SYS_capset, &h, d) < 0 ? -errno : 0;
}

/* The highest capability the kernel (here: the sandbox) knows, or CAP_LAST_CAP. */
static unsigned long last_cap(void) {
        unsigned long c = CAP_LAST_CAP;
        while (c < 63 && prctl(PR_CAPBSET_READ, c + 1, 0, 0, 0) >= 0)
                c++;
        return c;
}

/* Set once this process's bounding and ambient sets were seen empty. Nothing can put a
 * capability back into the bounding set (there is no call that adds one). Only the process
 * itself can raise an ambient one (PR_CAP_AMBIENT_RAISE, which init never calls), and only one
 * that is both permitted and inheritable: after capsule_init_drop, which checks those two sets
 * empty, none can be raised at all (and on Linux one raised in between is cleared by the kernel
 * there, which keeps the ambient set within those two; runsc 20240729 answers PR_CAP_AMBIENT
 * EINVAL: it has none). So capsule_init_drop need not drop or read either again. */
static bool ahead_done;

int capsule_init_drop_ahead(void) {
        unsigned long last = last_cap();
        for (unsigned long c = 0; c <= last; c++)
                if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno != EINVAL)
                        return -errno;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -errno;
        /* Fail closed: the bounding set is what every exec of this process and its children is
         * limited to, and the ambient set what an exec of an unprivileged file keeps. */
        for (unsigned long c = 0; c <= last; c++)
                if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) > 0 || prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) > 0)
                        return -EPERM;
        ahead_done = true;
        return 0;
}

int capsule_init_drop(uid_t uid, gid_t gid) {
        uid_t ru, eu, su;
        gid_t rg, eg, sg;
        struct __user_cap_data_struct d[2];
        int r;

        if (uid == 0 || gid == 0)
                return -EINVAL;
        if (!ahead_done && (r = capsule_init_drop_ahead()) < 0)
                return r;
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return -errno;
        /* A uid change from 0 clears the permitted and effective sets; clear them anyway. */
        r = capset_none();
        if (r < 0)
                return r;
        /* The uid change made us dumpable again: a job process of the same uid could then read
         * init's memory and open its descriptors through /proc/1. */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return -errno;

        /* Fail closed: each of these is what the job inherits. */
        if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
                return -errno;
        if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid ||
            getgroups(0, NULL) != 0 || setresuid(0, 0, 0) == 0 || prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0)
                return -EPERM;
        if ((r = capget_all(d)) < 0)
                return r;
        for (int i = 0; i < 2; i++)
                if (d[i].effective || d[i].permitted || d[i].inheritable)
                        return -EPERM;
        /* The bounding and ambient sets were checked empty by capsule_init_drop_ahead, and
         * neither can have grown since (ahead_done). */
        return 0;
}
