/* SPDX-License-Identifier: MIT */
/* Finding an executable the worker runs (runsc, docker, podman) without trusting a relative
 * PATH entry. */
#pragma once

/* The first regular, executable "<dir>/<name>" over the absolute entries of $PATH (a default
 * PATH when unset), after the directories in `first` (a NULL-terminated list, may be NULL).
 * -ENOENT when there is none. Caller frees *ret. */
int find_executable(const char *name, const char *const *first, char **ret);
