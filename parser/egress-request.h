/* SPDX-License-Identifier: MIT */
/* The egress proxy's request-head parser (issue 21): a strict, bounded reader of one HTTP/1.x
 * proxy request head. CONNECT host:port (or [v6]:port) yields a tunnel target; GET, HEAD, POST,
 * PUT, DELETE, PATCH and OPTIONS with an absolute http:// target yield a forward target plus the
 * head rewritten to origin form, with hop-by-hop and proxy headers dropped, exactly one Host
 * taken from the target, and "Connection: close". Everything else is refused with a reason. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "parser/egress-allow.h"

#define EGRESS_HEAD_MAX 16384      /* bytes of request line + headers accepted */
#define EGRESS_HOST_MAX EGRESS_NAME_MAX   /* parser/egress-allow.h */

typedef enum { EGRESS_REQ_CONNECT, EGRESS_REQ_FORWARD } EgressReqKind;

typedef struct {
        EgressReqKind kind;
        char host[EGRESS_HOST_MAX + 1];   /* lowercased name, or IP literal without brackets */
        uint16_t port;                    /* CONNECT: required; forward http://: default 80 */
        char *head;                       /* FORWARD only: the rewritten head to send upstream, NUL-terminated */
        size_t head_len;
} EgressRequest;

/* Returns 0 and fills *ret when buf[0..len) holds a complete head ending in CRLF CRLF (*ret_consumed = bytes through the blank line);
 * -EAGAIN when more bytes are needed (len < EGRESS_HEAD_MAX and no terminator yet);
 * -E2BIG when no terminator within EGRESS_HEAD_MAX; -EINVAL for any malformed or refused request,
 * with a short static reason in *ret_reason (e.g. "method not allowed", "bad request line", "https:// must use CONNECT"). */
int egress_request_parse(const char *buf, size_t len, EgressRequest *ret, size_t *ret_consumed, const char **ret_reason);
void egress_request_done(EgressRequest *r);   /* frees head */
