/* SPDX-License-Identifier: MIT */
/* The generation store's tmpfs (snapshot/gen-store.h, build-cache.h; docs/snapshot.md, "After a
 * restart"; threat 22): state_dir/store, a tmpfs of its own (size limits.max_store_bytes and
 * the build cache's share, mode 0700, nosuid, nodev, root's) mounted in the host's mount
 * namespace, so that it outlives the worker's process (a restart, a config change) but not a
 * reboot; nothing of it is on the disk.
 *
 * Who mounts it: under systemd, tentaflake-worker-store@NAME.service (`store mount`), before the
 * worker's unit, whose PrivateMounts= namespace cannot reach the host's; in the foreground, the
 * worker itself, before it enters a mount namespace of its own (daemon.c). Either way the
 * daemon then opens it in its namespace (store_tmpfs_open) and checks it before any job uses
 * it: a store made for another configuration is emptied whole (and resized), each lane and the
 * build cache's current version are checked (gen_store_check, build_cache_check), and every
 * drop is said naming the object and the reason. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "orchestrator/scratch.h"
#include "orchestrator/worker.h"
#include "parser/config.h"

#define STORE_TMPFS_DIR SCRATCH_STORE_NAME
#define STORE_TMPFS_SOURCE "tentaflake-store"
/* What the store was made for (a JSON object, root's): a store whose stamp differs is emptied. */
#define STORE_TMPFS_STAMP "config.json"

/* Its size and inodes for c. */
void store_tmpfs_size(const Config *c, uint64_t *ret_bytes, uint64_t *ret_inodes);
/* state_dir/store (state_fd) a tmpfs, mounted now in the calling process's namespace unless one
 * is there (*ret_made says which). Something else mounted there: -EEXIST. */
int store_tmpfs_mount(int state_fd, const Config *c, bool *ret_made, TfwError *e);
/* Unmount it (lazily: a process still using it keeps it until it ends) and remove the
 * directory; nothing there is success. */
int store_tmpfs_unmount(int state_fd, TfwError *e);
/* The daemon's start, in its own namespace: w->dirs.store_fd opened on state_dir/store (which
 * must be a tmpfs already), its stamp checked (another configuration: emptied, resized,
 * stamped), its lanes and cache checked. Each drop is said with worker_say(). A negative errno
 * with *e when there is no usable store (jobs are then streamed). */
int store_tmpfs_open(Worker *w, TfwError *e);
