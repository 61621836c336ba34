/* SPDX-License-Identifier: MIT */
/* The validation plane's HTTP client (contract section 8) on libcurl: one handle per thread,
 * keep-alive, bearer token, JSON in and out, every answer bounded.
 *
 * Security contract: only http:// and https:// URLs, no redirects followed, no proxy from the
 * environment, no cookies, no netrc. The token is set as a header from memory and never put
 * in a URL, a log line or an error message. Every body read is capped (HTTP_BODY_MAX for JSON,
 * the caller's budget for blobs) and counted on the bytes received, whatever Content-Length
 * says. Every call is bounded by the client timeout. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/macro.h"
#include "common/sha256.h"

#define HTTP_BODY_MAX (1U << 20)

typedef struct Http Http;

/* base: the server URL ("http://127.0.0.1:8080", no trailing '/'); token: copied. */
int http_new(const char *base, const char *token, long timeout_secs, Http **ret, TfwError *e);
Http *http_free(Http *h);
/* Connect through the AF_UNIX stream socket at path (NULL: directly) instead of the URL's
 * host; HTTP and TLS still speak to the URL's host. */
int http_set_unix_socket(Http *h, const char *path);
static inline void http_freep(Http **h) {
        http_free(*h);
}
#define _cleanup_http_ _cleanup_(http_freep)

/* POST a JSON body (or GET when body is NULL and post is false) to base+path; store the
 * status in *ret_status and the body, at most max bytes (NUL-terminated), in *ret_body.
 * timeout_secs 0 uses the handle's client timeout. Returns -EIO (code "http") when no HTTP
 * answer came (connection refused, timeout), -E2BIG when the body is larger than max. */
int http_call(Http *h, bool post, const char *path, json_t *body, size_t max, long timeout_secs, long *ret_status,
              char **ret_body, size_t *ret_len, TfwError *e);

/* GET base+path streaming the body to fd (fd -1: into *ret_mem, at most budget bytes),
 * hashing it as a git blob of the announced length on the way. *budget is decreased by the
 * bytes received; going below zero stops the transfer (-E2BIG, code "checkout_too_large").
 * ret_oid receives sha256("blob <n>\0" + bytes). */
int http_get_blob(Http *h, const char *path, int fd, char **ret_mem, size_t *ret_mem_len, uint64_t *budget,
                  uint8_t ret_oid[static SHA256_DIGEST_SIZE], uint64_t *ret_size, long *ret_status, TfwError *e);

/* Load libcurl (the daemon does not link it: common/dlopen-util.h) and run its global
 * initialisation; call once from main before any thread starts. */
int http_global_init(TfwError *e);
