/* SPDX-License-Identifier: MIT */
/* The validation plane's HTTP client (contract section 8) on libcurl: one handle per thread,
 * keep-alive, bearer token, JSON in and out, every answer bounded.
 *
 * Security contract: only http:// and https:// URLs, no redirects followed, no proxy from the
 * environment, no cookies, no netrc. The token is set as a header from memory and never put
 * in a URL, a log line or an error message. Every body read is capped by its caller (the
 * claim's and the other answers' own ceilings, the manifest's, the checkout budget for blobs),
 * refused at once when its Content-Length announces more, and otherwise counted on the bytes
 * received, whatever Content-Length says, the transfer stopped as soon as they pass the cap.
 * Every call is bounded by the client timeout. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/macro.h"
#include "common/sha256.h"

/* The answers to heartbeat, complete and fail: a few dozen bytes of JSON, or an error's
 * message. Parsed whole by jansson (about 80 bytes of memory a byte at worst). */
#define HTTP_BODY_MAX (64U << 10)

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
 * answer came (connection refused, timeout), -E2BIG (code "too_large", naming the call and
 * max) when the body is larger than max: announced so, or as soon as it passes it. */
int http_call(Http *h, bool post, const char *path, json_t *body, size_t max, long timeout_secs, long *ret_status,
              char **ret_body, size_t *ret_len, TfwError *e);

/* What reads a streamed body: 0 to go on, a negative errno with e set to stop the transfer. */
typedef int (*HttpChunkFn)(const char *p, size_t n, void *userdata, TfwError *e);

/* GET base+path and hand a 200 answer's body to fn as it arrives, chunk by chunk (at most
 * CURL_MAX_WRITE_SIZE each), keeping none of it; another status's body is read and dropped.
 * Every answer is capped at max bytes: refused before its first byte when its Content-Length
 * says more, else as soon as the bytes received pass it (-E2BIG, code too_large, naming the
 * path and the cap). fn's refusal stops the transfer and is returned as fn recorded it.
 * *ret_status: the status, when the whole answer was read. */
int http_get_stream(Http *h, const char *path, size_t max, HttpChunkFn fn, void *userdata, long *ret_status,
                    TfwError *e);

/* GET base+path streaming the body to fd (fd -1: into *ret_mem, at most budget bytes),
 * hashing it as a git blob of the announced length on the way. *budget is decreased by the
 * bytes received; going below zero stops the transfer (-E2BIG, code "checkout_too_large").
 * ret_oid receives sha256("blob <n>\0" + bytes). */
int http_get_blob(Http *h, const char *path, int fd, char **ret_mem, size_t *ret_mem_len, uint64_t *budget,
                  uint8_t ret_oid[static SHA256_DIGEST_SIZE], uint64_t *ret_size, long *ret_status, TfwError *e);

/* Load libcurl (the daemon does not link it: common/dlopen-util.h) and run its global
 * initialisation; call once from main before any thread starts. */
int http_global_init(TfwError *e);
