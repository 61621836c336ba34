/* SPDX-License-Identifier: MIT */
/* Building a version 1 request on the controller's side (contract sections 4 and 9).
 *
 * controller_request_build() takes the request's fields as JSON (argv, action_class,
 * timeout_seconds, reason, cwd, id; exactly the names of the request) and refuses locally what the
 * worker would reject, with the worker's own codes and messages: it assembles the request and
 * runs it through the worker's parser (parser/request.h) with the worker's limits, so the two
 * cannot disagree on the grammar; the forbidden class is refused too ("forbidden"). A missing
 * action_class is local-reversible; a missing id is a fresh one. A field other than those six
 * (version included: the builder owns it) is "unknown_field". What it accepts is exactly the
 * bytes that will be written. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "parser/request.h"

#define CONTROLLER_DEFAULT_CLASS "local-reversible"

typedef struct ControllerRequest {
        char id[REQUEST_ID_MAX + 1];
        bool id_generated;
        ActionPolicy policy;            /* run now, or wait for an operator */
        uint64_t timeout_seconds;       /* the request's, or the limits' default */
        char sha256[SHA256_HEX_SIZE];   /* of the bytes */
        char *bytes;                    /* the request file's content */
        size_t len;
} ControllerRequest;

void controller_request_done(ControllerRequest *r);

/* A fresh id: "<prefix>-<utc stamp>-<8 random hex>", lowercase (prefix: a valid id, at most
 * 16 bytes, such as "sub" or "mcp"). */
int controller_id_generate(const char *prefix, char ret[static REQUEST_ID_MAX + 1]);

int controller_request_build(const json_t *fields, const RequestPolicy *limits, const char *id_prefix,
                             ControllerRequest *ret, TfwError *e);

/* The fields from command-line strings (`submit`): argv[0..argc), and each of class, timeout
 * (decimal seconds), reason and id when not NULL. A string that is not UTF-8 is refused
 * (invalid_utf8), a timeout that is not a plain decimal integer is bad_type. */
int controller_fields_from_strings(char *const *argv, size_t argc, const char *cls, const char *timeout,
                                   const char *reason, const char *id, json_t **ret, TfwError *e);

/* Write the request into the inbox atomically: a dot-file (ignored by the worker), fsync,
 * rename to <id>.json without replacing anything (an existing entry of that name is -EEXIST,
 * code "duplicate_id"), fsync of the inbox. */
int controller_request_write(int inbox_fd, const ControllerRequest *r, TfwError *e);
