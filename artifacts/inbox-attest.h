/* SPDX-License-Identifier: MIT */
/* The inbox plane's signature (contract section 7): when a worker config sets signing_key,
 * every final result carries attestation.json, a DSSE envelope over an in-toto v1 Statement
 * (predicateType ATTEST_PREDICATE_INBOX of artifacts/attest.h) naming the snapshot tree (or,
 * when nothing was snapshotted, the request's sha256), the request sha256, the approval, the
 * environment digest, the status, exit code and signal, and the sha256 of every artifact. */
#pragma once

#include <jansson.h>

#include "common/error.h"
#include "parser/config.h"

/* Ceiling on the artifacts listed (the import's own ceilings are lower in practice). */
#define INBOX_ATTEST_ARTIFACTS_MAX 200000

/* When c->signing_key is set: read result (the object result_build() made, before it is
 * published), hash the regular files below result_dir_fd/artifacts (fd-relative, never
 * following a symlink, at most INBOX_ATTEST_ARTIFACTS_MAX files and 256 levels), sign, write
 * result_dir_fd/attestation.json (0640, root:container_gid) and set result's "attestation"
 * to "attestation.json". Without a signing key it does nothing and returns 0. */
int inbox_attest_result(const Config *c, int result_dir_fd, json_t *result, TfwError *e);
