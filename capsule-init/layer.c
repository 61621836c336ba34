/* SPDX-License-Identifier: MIT */
/* The job's writes as a layer of their own (capsule/protocol.h, CAPSULE_LAYER_PATH;
 * docs/capsule.md, "The job's writes as a layer").
 *
 * With a generation at /work, init starts as the sandbox's root holding CAPSULE_LAYER_CAPS and
 * nothing else, and before it reads anything of the input beyond its kind:
 *   1. makes, on the tmpfs the spec mounted at CAPSULE_LAYER_PATH (limits.workspace_tmpfs), an
 *      upper and a work directory for /work and for each cache path, each upper owned and
 *      moded as its lower's root (the overlay's root takes its upper's attributes);
 *   2. mounts an overlay on /work whose lower is the generation bound there (read-only), and
 *      one on /work/<cache path> whose lower is the cache's version the host handed out,
 *      CAPSULE_CACHE_LOWER_PATH/<version>/data/<i>, then detaches CAPSULE_CACHE_LOWER_PATH;
 *   3. refuses mount(2) to itself and every process it starts, with a seccomp filter of its
 *      own: the spec's profile lets it through for this step only (capsule/seccomp-profile.h);
 *   4. drops to the job's uid and gid: no group, every capability out of every set, the
 *      bounding set emptied, and checks that each of those holds (fails closed).
 * Every write of the job under /work then lands in those upper directories (new files, copies
 * of changed ones, whiteouts for what it deleted: character devices 0:0), within the tmpfs'
 * size; nothing reaches the generation, a read-only mount on the host as well. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/init-drop.h"
#include "capsule-init/init-internal.h"

/* name (an upper directory) on the layer's tmpfs, with the mode, owner and times of lower's
 * root (the overlay's root shows its upper's): mode first, while root still owns it. */
static int make_upper(int layer, const char *name, const char *lower) {
        struct stat st;
        if (stat(lower, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        struct timespec ts[2] = { st.st_atim, st.st_mtim };
        if (mkdirat(layer, name, 0700) < 0 || fchmodat(layer, name, st.st_mode & 07777, 0) < 0 ||
            fchownat(layer, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0 ||
            utimensat(layer, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        return 0;
}

int layer_upper_fd = -1, layer_lower_fd = -1;
/* -1 until layer_mount opens them (Landlock's rules take the lower ones: capsule-init.c). */
int cache_upper_fd[CAPSULE_CACHE_PATHS_MAX] = { [0 ... CAPSULE_CACHE_PATHS_MAX - 1] = -1 },
    cache_lower_fd[CAPSULE_CACHE_PATHS_MAX] = { [0 ... CAPSULE_CACHE_PATHS_MAX - 1] = -1 };

static int mount_one(int layer, const char *lower, const char *target, const char *tag) {
        char up[32], wk[32], opts[sizeof(CAPSULE_CACHE_LOWER_PATH) + 3 * 64 + 128];
        int r;

        snprintf(up, sizeof(up), "%s.upper", tag);
        snprintf(wk, sizeof(wk), "%s.work", tag);
        if ((r = make_upper(layer, up, lower)) < 0) {
                say("layer: cannot make the upper directory of %s: %s", target, strerror(-r));
                return r;
        }
        if (mkdirat(layer, wk, 0700) < 0) {
                r = -errno;
                say("layer: cannot make the work directory of %s: %s", target, strerror(-r));
                return r;
        }
        snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=" CAPSULE_LAYER_PATH "/%s,workdir=" CAPSULE_LAYER_PATH "/%s",
                 lower, up, wk);
        /* On the host's kernel (the runc driver) the overlay is mounted inside a user namespace,
         * where the trusted.overlay.* attributes cannot be set: without userxattr deleting a
         * directory of the generation fails (EIO) for want of its opaque mark. gVisor knows no
         * such option (EINVAL): its overlay keeps them itself. */
        size_t len = strlen(opts);
        snprintf(opts + len, sizeof(opts) - len, ",userxattr");
        if (mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts) == 0)
                return 0;
        opts[len] = 0;
        if (mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts) < 0) {
                r = -errno;
                say("layer: cannot mount the overlay on %s: %s", target, strerror(-r));
                return r;
        }
        return 0;
}

/* Cache path i's overlay (lower: its version's data/<i>), and the descriptors its changes are
 * read from once the job is dead (out-channel.c). */
static int mount_cache(int layer, size_t i) {
        char lower[sizeof(CAPSULE_CACHE_LOWER_PATH) + 64], target[sizeof(CAPSULE_WORK_PATH) + CAPSULE_CACHE_PATH_MAX + 1],
                tag[16], up[32];
        snprintf(lower, sizeof(lower), CAPSULE_CACHE_LOWER_PATH "/%llu/data/%zu", (unsigned long long) cache_version, i);
        snprintf(target, sizeof(target), CAPSULE_WORK_PATH "/%s", cache_paths[i]);
        snprintf(tag, sizeof(tag), "cache%zu", i);
        snprintf(up, sizeof(up), "%s.upper", tag);
        /* Each component a directory, no link: nothing but init runs yet, and the host made
         * them (snapshot/build-cache.c), but a mount must never follow a name elsewhere. */
        int point = open_work_dir(cache_paths[i]);
        if (point < 0) {
                say("layer: the cache's mount point %s is not a directory: %s", target, strerror(-point));
                return point;
        }
        close(point);
        cache_lower_fd[i] = open(lower, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (cache_lower_fd[i] < 0) {
                int r = -errno;
                say("layer: cannot open the cache's version at %s: %s", lower, strerror(-r));
                return r;
        }
        int r = mount_one(layer, lower, target, tag);
        if (r >= 0 && (cache_upper_fd[i] = openat(layer, up, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                r = -errno;
                say("layer: cannot open the upper directory of %s: %s", target, strerror(-r));
        }
        return r;
}

int layer_mount(void) {
        int r = 0;
        int layer = open(CAPSULE_LAYER_PATH, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (layer < 0) {
                r = -errno;
                say("layer: cannot open " CAPSULE_LAYER_PATH ": %s", strerror(-r));
        } else if ((layer_lower_fd = open(CAPSULE_WORK_PATH, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                /* The generation itself, before the overlay covers it. */
                r = -errno;
                say("layer: cannot open the generation at " CAPSULE_WORK_PATH ": %s", strerror(-r));
        } else
                r = mount_one(layer, CAPSULE_WORK_PATH, CAPSULE_WORK_PATH, "work");
        /* What the job changes is read from these two once it is dead (out-channel.c); root's
         * upper directory and the generation stay reachable through them after the drop. */
        if (r >= 0 && (layer_upper_fd = openat(layer, "work.upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
                r = -errno;
                say("layer: cannot open the upper directory of " CAPSULE_WORK_PATH ": %s", strerror(-r));
        }
        for (size_t i = 0; i < CAPSULE_CACHE_PATHS_MAX; i++)
                cache_upper_fd[i] = cache_lower_fd[i] = -1;
        for (size_t i = 0; r >= 0 && i < n_cache_paths; i++)
                r = mount_cache(layer, i);
        /* The overlays hold their versions: the job sees none of the others (an older cache,
         * one an operator cleared). */
        if (r >= 0 && n_cache_paths > 0 && umount2(CAPSULE_CACHE_LOWER_PATH, MNT_DETACH) < 0) {
                r = -errno;
                say("layer: cannot detach " CAPSULE_CACHE_LOWER_PATH ": %s", strerror(-r));
        }
        if (layer >= 0)
                close(layer);
        /* The spec's cwd was /work before the overlay covered it: a job started there would
         * resolve relative names in the read-only generation beneath. */
        if (r >= 0 && chdir(CAPSULE_WORK_PATH) < 0) {
                r = -errno;
                say("layer: cannot enter " CAPSULE_WORK_PATH ": %s", strerror(-r));
        }
        /* Whether the mounts worked or not, none is made after this. */
        int f = capsule_init_refuse_mount();
        if (f < 0)
                say("layer: cannot load the filter that refuses mount: %s", strerror(-f));
        return r < 0 ? r : f;
}
