/* SPDX-License-Identifier: MIT */
/* Where tentaflake-capsule-init is. It is bind-mounted into every capsule as its pid 1, so
 * it must be a regular file owned by root and writable by nobody else. */
#pragma once

#include <stddef.h>

#include "common/error.h"

/* Beside the running executable (a build tree), else TFW_LIBEXECDIR. */
int capsule_find_init(char *buf, size_t size, TfwError *e);
