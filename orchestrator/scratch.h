/* SPDX-License-Identifier: MIT */
/* The capsules' scratch (bundles: config.json, passwd, group, the root directory; runsc's log
 * files) on a tmpfs private to the daemon (issue 12: nothing of a request's capsule is written
 * to the disk).
 *
 * scratch_private_tmpfs() moves the calling process into a mount namespace of its own (the
 * host's mounts still propagate into it, none of its own back out), mounts a size-bounded
 * tmpfs (mode 0700, nosuid, nodev) over <state_dir>/scratch there and reopens
 * dirs->scratch_fd on it. Everything the daemon starts (its warm children, runsc, the
 * sandbox) inherits the namespace, so the bundle paths resolve into the tmpfs for them; no
 * other process sees it, and it goes with the last process of the namespace: a crashed
 * daemon leaves no mount and no bundle behind (its containers are found through runsc's
 * root and the job cgroups, which stay on the host).
 *
 * Only for the runsc driver: an engine (docker, podman) resolves paths in its daemon's own
 * namespace. Returns 0 when the tmpfs is in place; a negative errno with *e naming the step
 * when it is not (the caller may go on with the scratch on disk, saying so). */
#pragma once

#include <stdbool.h>

#include "common/error.h"
#include "orchestrator/dirs.h"
#include "parser/config.h"

#define SCRATCH_TMPFS_SIZE "64m"
#define SCRATCH_TMPFS_INODES "16384"

int scratch_private_tmpfs(WorkerDirs *dirs, const char *state_dir, TfwError *e);

/* A tmpfs made but not attached anywhere yet (0700, nosuid, nodev): its mount fd. inode64:
 * inode numbers that are never handed out twice (the build cache knows its files' blob ids by
 * inode, snapshot/cache-tree.c); without it tmpfs's 32-bit numbers wrap. */
int scratch_tmpfs_detached(const char *source, const char *size, const char *inodes, bool inode64, const char *what,
                           TfwError *e);

/* The generation store (snapshot/gen-store.h; docs/snapshot.md, "Generations") is
 * state_dir/store, a tmpfs of its own that outlives the daemon (orchestrator/store-tmpfs.h). */
#define SCRATCH_STORE_NAME "store"
/* Lanes of the store: one per job that may run at once, and one for a capsule started ahead. */
unsigned scratch_store_lanes(const Config *c);
/* Its absolute path. */
int scratch_store_path(const Config *c, char *buf, size_t size);
