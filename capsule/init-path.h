/* SPDX-License-Identifier: MIT */
/* Where tentaflake-capsule-init is, and the worker's other program, tentaflake-egress-proxy. The
 * init is bind-mounted into every capsule as its pid 1 and the proxy is started as root, so each
 * must be a regular file owned by root and writable by nobody else. */
#pragma once

#include <stddef.h>

#include "common/error.h"

/* Beside the running executable (a build tree), else TFW_LIBEXECDIR. */
int capsule_find_init(char *buf, size_t size, TfwError *e);
/* The same for another program of the worker's (name: its file name; what: how messages call it,
 * "egress proxy"): the worker runs it as root, so the same rule holds. */
int capsule_find_helper(const char *name, const char *what, char *buf, size_t size, TfwError *e);
