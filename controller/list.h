/* SPDX-License-Identifier: MIT */
/* The controller's own list (issue 35 item 2; docs/controller.md, "Coming back to a job"):
 * `tentaflake-worker list` run as the controller, MCP's `list` tool and `tasks/list`. What the
 * controller can read of this workspace's requests, and nothing the worker keeps to itself:
 *  - the inbox: <id>.json entries not taken yet (regular files with a request's name, read
 *    bounded by the request limit without following a link: their bytes are the controller's
 *    own), with their action class and command when they parse;
 *  - <results>/<id>.state.json: pending, queued, running, since when (the worker does not
 *    publish an active request's command: it shows as unknown);
 *  - <results>/<id>/result.json: the most recent results, newest first, with status, exit code,
 *    signal, action class, command, submitted_at and finished_at.
 * A command is shown in short: its words as a shell would read them back, every byte that is
 * not printable ASCII or valid UTF-8 text as '?' (a control character never reaches a
 * terminal), cut at CONTROLLER_COMMAND_SHORT bytes with "...". */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "controller/site.h"

#define CONTROLLER_COMMAND_SHORT 80
#define CONTROLLER_LIST_RECENT_DEFAULT 20
#define CONTROLLER_LIST_RECENT_MAX 100
/* At most this many inbox entries and active requests are read (a full inbox is said). */
#define CONTROLLER_LIST_ACTIVE_MAX 1000

/* argv (a JSON array of strings) in short, as above, into buf (size > 4). "-" for anything
 * that is not an array of strings. Returns buf. */
const char *controller_command_short(const json_t *argv, char *buf, size_t size);

/* {"inbox": [{"id","state":"inbox","since","action_class","command"}], "active": [{"id",
 * "state","since","action_class","command"}], "recent": [{"id","status","exit_code","signal","action_class","command",
 * "submitted_at","finished_at"}], "recent_more": N (results not listed), "inbox_other": N
 * (inbox entries no request can be)}: inbox and active ones oldest first, recent ones newest
 * first, at most max_recent. Needs s->results_fd. */
int controller_list(const ControllerSite *s, size_t max_recent, json_t **ret);

/* The list as a table on out, or a sentence saying there is nothing. */
void controller_list_print(const json_t *list, const char *results_dir, FILE *out);

/* `list` as the controller: 0, 1 when the list cannot be made (err says why). */
int controller_list_run(const char *workspace, const char *results, size_t max_recent, bool json, FILE *out,
                        FILE *err);
