/* SPDX-License-Identifier: MIT */
/* Resolving paths that an untrusted party can change: no symlink is ever followed.
 *
 * open_dir_path_nofollow(): accepts only an absolute, normalised path; opens it with openat2
 * RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS (no symlink in any component, the last included)
 * or, when openat2 is missing or filtered, one component at a time from "/" with
 * O_NOFOLLOW|O_DIRECTORY, refusing "." and ".." components; a symlink anywhere is -ELOOP. The
 * result is a directory fd.
 * openat_child(): opens one name (no '/') relative to dfd with RESOLVE_BENEATH as well, or
 * openat O_NOFOLLOW in the fallback, so nothing can leave dfd. */
#pragma once

#include <stdbool.h>

bool openat2_usable(void);
int open_dir_path_nofollow(const char *path, bool use_openat2);
int openat_child(int dfd, const char *name, int flags, bool use_openat2);
/* openat_child that also never crosses into a mount (RESOLVE_NO_XDEV, atomically): a name with
 * something mounted on it is -EXDEV, and nothing of the mounted file system is reached (a FUSE
 * server is never called). Without openat2 the check is mount_root_at() just before the open.
 * flags may include O_PATH. */
int openat_child_same_mount(int dfd, const char *name, int flags);
