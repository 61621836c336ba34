/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Replace dir_fd/name atomically (a temporary file renamed over it; readers see the old or
 * the new content, never a mix) WITHOUT fsync: after a power loss the file may be missing,
 * old or empty. Only for files the worker rebuilds from its durable store at start-up (the
 * <id>.state.json hints); anything a guarantee rests on uses write_file_atomic_at(). */
int write_file_replace_at(int dir_fd, const char *name, const void *data, size_t len, mode_t mode,
                          uid_t uid, gid_t gid);
