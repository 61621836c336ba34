/* SPDX-License-Identifier: MIT */
/* Root's own directories (state_dir, results_dir, serve's --state-dir, the runtime directory),
 * reached and made by descriptor only (threat 1's rules applied to the worker's own paths).
 *
 * root_dir_open() accepts an absolute, normalised path and walks it from "/" one component at a
 * time with openat_child() (O_NOFOLLOW; RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS where openat2 is
 * usable): a symlink in any component is -ELOOP, something that is not a directory -ENOTDIR.
 *
 * Every ancestor ("/" and each directory above the last component) must be owned by root,
 * not on a FUSE file system (whose owners are what its server says; the last component neither),
 * and writable by nobody else: a group or other write bit is refused (-EPERM), the sticky bit does
 * not save it (a world-writable /tmp is refused as well: anyone can create the name the worker
 * is about to make there). In a chain that only root can write, nobody else can rename, replace
 * or create an entry, so what the walk checked is what the caller gets, and the caller's
 * fchown/fchmod act on that directory and nothing else.
 *
 * With create, a missing ancestor is made root:root 0755 (exactly, whatever the umask: the
 * controller must be able to pass through to results_dir) and a missing last component is made
 * and then given uid:gid and mode on its own descriptor (owner first: chown clears setgid);
 * *ret_created (may be NULL) says whether the last component was made. Without create a missing
 * component is -ENOENT and nothing is made. An existing last component is returned as it is:
 * its owner and mode are the caller's to check (an ancestor's rule does not fit every leaf).
 *
 * Errors go to e with code "bad_directory": "<what>: <the reason>", naming the path and the
 * component at fault; what names the setting ("key 'state_dir'", "--state-dir"). Returns the
 * directory's fd (O_CLOEXEC). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"

int root_dir_open(const char *what, const char *path, bool create, uid_t uid, gid_t gid, mode_t mode,
                  bool *ret_created, TfwError *e);

/* Is a directory with this stat one that only root can change (the ancestors' rule above)? */
static inline bool root_dir_is_private(uid_t uid, mode_t mode) {
        return uid == 0 && !(mode & 022);
}
