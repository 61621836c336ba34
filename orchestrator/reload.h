/* SPDX-License-Identifier: MIT */
/* `systemctl reload` (SIGHUP to the daemon; docs/operator.md, "Changing the configuration"):
 * the configuration file read again, and what can change without a restart applied.
 *
 * The new file must parse and pass every check first; else nothing changes and the error says
 * why. The changed keys (dotted, leaf by leaf, against the configuration in use) are then split
 * in two: those a running daemon reads afresh for each job or each timer (config_reload_live)
 * are applied, those its start fixed (the workspace, the directories, the ids, concurrency, the
 * runtime, the generation store and build cache, the signing key...) are named as needing a
 * restart and keep their value. The configuration in use is then the old one with the live keys
 * of the new: parsed and checked as a whole once more, and if that fails nothing changes. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "parser/config.h"

#define CONFIG_RELOAD_KEYS_MAX 1024

typedef struct ConfigReload {
        Config *next;    /* the configuration to use from now on (the caller's); NULL: none */
        json_t *next_raw; /* its JSON, against which the next reload compares (the caller's) */
        char applied[CONFIG_RELOAD_KEYS_MAX]; /* the changed keys applied, ", "-separated */
        char restart[CONFIG_RELOAD_KEYS_MAX]; /* the changed keys that need a restart */
} ConfigReload;

/* Does a change of this dotted key take effect without a restart? */
bool config_reload_live(const char *key);
/* Read path again against cur_raw, the JSON of the configuration in use. 0 with *ret filled
 * (ret->next NULL when no live key changed); a negative errno with *e (nothing changes). */
int config_reload(const char *path, const json_t *cur_raw, ConfigReload *ret, TfwError *e);
/* The JSON of the configuration file at path (for the first reload's comparison). */
int config_reload_raw(const char *path, json_t **ret, TfwError *e);
