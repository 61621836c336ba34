/* SPDX-License-Identifier: MIT */
/* Variables a caller adds to a job's environment (the validation plane's policy env), after
 * the constant environment of capsule/oci-spec.h.
 *
 * Accepts: at most CAPSULE_EXTRA_ENV_MAX entries of at most CAPSULE_EXTRA_ENV_BYTES in all,
 * each "NAME=VALUE" with NAME matching [A-Za-z_][A-Za-z0-9_]{0,127} and not one the worker
 * sets itself. Guarantees: an accepted list can neither replace the constant environment nor
 * be read by an engine CLI as "copy my own variable NAME" (every entry has its '='). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define CAPSULE_EXTRA_ENV_MAX 64
#define CAPSULE_EXTRA_ENV_BYTES (32U * 1024)

bool capsule_env_name_is_valid(const char *s, size_t n);
/* PATH, HOME, TMPDIR, LANG, CI, TENTAFLAKE_JOB, TENTAFLAKE_CHECK, TERM, container, and the
 * proxy variables (http_proxy, https_proxy, HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, all_proxy,
 * NO_PROXY, no_proxy). */
bool capsule_env_name_is_reserved(const char *s, size_t n);
/* The whole list (NULL: empty, valid). */
bool capsule_extra_env_is_valid(char *const *env);
