/* SPDX-License-Identifier: MIT */
/* The egress proxy's request-head parser (parser/egress-request.h). Every read is bounded by
 * the caller's length and EGRESS_HEAD_MAX; the head is validated byte by byte before any line
 * is interpreted, so later stages may rely on CRLF-only line ends and no control bytes. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/macro.h"
#include "parser/egress-allow.h"
#include "parser/egress-request.h"

#define EGRESS_HEADERS_MAX 100

static const char *const forward_methods[] = {
        "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS",
};

/* Hop-by-hop and proxy headers never sent upstream; Host is replaced from the target. */
static const char *const dropped_headers[] = {
        "Proxy-Connection", "Proxy-Authorization", "Connection", "Keep-Alive", "Host",
};

static bool is_token_char(char c) {
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
                return true;
        return c && strchr("!#$%&'*+-.^_`|~", c);
}

static bool span_eq_ci(const char *s, size_t n, const char *lit) {
        return strlen(lit) == n && strncasecmp(s, lit, n) == 0;
}

static int fail(const char **ret_reason, const char *reason) {
        if (ret_reason)
                *ret_reason = reason;
        return -EINVAL;
}

/* host:port, [v6]:port, or (port_optional) host / [v6] with *ret_port left untouched. */
static int parse_authority(const char *s, size_t n, bool port_optional, char host[static EGRESS_HOST_MAX + 1],
                           uint16_t *ret_port, bool *ret_has_port, const char **ret_reason) {
        size_t host_end;        /* index of ':' or n */
        if (n > 0 && s[0] == '[') {
                const char *close = memchr(s, ']', n);
                if (!close)
                        return fail(ret_reason, "bad IPv6 literal");
                size_t v6len = (size_t) (close - s) - 1;
                uint8_t a[16];
                if (!egress_ipv6_parse(s + 1, v6len, a))
                        return fail(ret_reason, "bad IPv6 literal");
                for (size_t i = 0; i < v6len; i++) {
                        char c = s[1 + i];
                        host[i] = (c >= 'A' && c <= 'Z') ? (char) (c - 'A' + 'a') : c;
                }
                host[v6len] = 0;
                host_end = (size_t) (close - s) + 1;
                if (host_end < n && s[host_end] != ':')
                        return fail(ret_reason, "bad authority");
        } else {
                const char *colon = memchr(s, ':', n);
                host_end = colon ? (size_t) (colon - s) : n;
                if (!egress_host_parse(s, host_end, host))
                        return fail(ret_reason, "bad host name");
        }
        *ret_has_port = host_end < n;
        if (host_end >= n) {
                if (!port_optional)
                        return fail(ret_reason, "missing port");
                return 0;
        }
        if (!egress_port_parse(s + host_end + 1, n - host_end - 1, ret_port))
                return fail(ret_reason, "bad port");
        return 0;
}

static bool append(char *dst, size_t cap, size_t *pos, const char *s, size_t n) {
        if (n > cap - *pos)
                return false;
        memcpy(dst + *pos, s, n);
        *pos += n;
        return true;
}

/* Pass 1: byte rules and the terminator, never beyond len or EGRESS_HEAD_MAX. *ret_end is the
 * length through the blank line; 0 with -EAGAIN or -E2BIG when it has not arrived. */
static int scan_head(const char *buf, size_t len, size_t *ret_end, const char **ret_reason) {
        size_t scan = MIN(len, (size_t) EGRESS_HEAD_MAX);
        for (size_t i = 0; i < scan; i++) {
                unsigned char c = (unsigned char) buf[i];
                if (c == '\n') {
                        if (i == 0 || buf[i - 1] != '\r')
                                return fail(ret_reason, "bare LF");
                        if (i >= 3 && buf[i - 2] == '\n' && buf[i - 3] == '\r') {
                                *ret_end = i + 1;
                                return 0;
                        }
                } else if (c == '\r') {
                        if (i + 1 < len && buf[i + 1] != '\n')
                                return fail(ret_reason, "bare CR");
                } else if (c == 0)
                        return fail(ret_reason, "NUL byte");
                else if ((c < 0x20 && c != '\t') || c == 0x7f)
                        return fail(ret_reason, "control byte");
        }
        return len >= EGRESS_HEAD_MAX ? -E2BIG : -EAGAIN;
}

/* The parts of the request line the later steps need. */
typedef struct RequestLine {
        const char *method, *target, *version, *path;
        size_t mlen, tlen, plen;
        bool has_port;   /* the target spelled a port out */
} RequestLine;

/* "METHOD SP TARGET SP HTTP/1.x": split and check the bytes of each part. */
static int split_request_line(const char *line, size_t ll, RequestLine *rl, const char **ret_reason) {
        const char *eol = line + ll;
        const char *sp1 = memchr(line, ' ', ll);
        if (!sp1 || sp1 == line)
                return fail(ret_reason, "bad request line");
        rl->method = line;
        rl->mlen = (size_t) (sp1 - line);
        rl->target = sp1 + 1;
        const char *sp2 = memchr(rl->target, ' ', (size_t) (eol - rl->target));
        if (!sp2 || sp2 == rl->target)
                return fail(ret_reason, "bad request line");
        rl->tlen = (size_t) (sp2 - rl->target);
        rl->version = sp2 + 1;
        size_t vlen = (size_t) (eol - rl->version);
        if (vlen != 8 || (memcmp(rl->version, "HTTP/1.0", 8) != 0 && memcmp(rl->version, "HTTP/1.1", 8) != 0))
                return fail(ret_reason, "bad request line");
        for (size_t i = 0; i < rl->mlen; i++)
                if (!is_token_char(line[i]))
                        return fail(ret_reason, "bad request line");
        for (size_t i = 0; i < rl->tlen; i++)
                if ((unsigned char) rl->target[i] <= 0x20 || (unsigned char) rl->target[i] >= 0x7f)
                        return fail(ret_reason, "bad request target");
        return 0;
}

/* CONNECT's authority, or a forward method's absolute http:// target: fills r's kind, host and
 * port and rl's path. */
static int parse_target(RequestLine *rl, EgressRequest *r, const char **ret_reason) {
        const char *target = rl->target;
        size_t tlen = rl->tlen;
        if (rl->mlen == 7 && memcmp(rl->method, "CONNECT", 7) == 0) {
                r->kind = EGRESS_REQ_CONNECT;
                return parse_authority(target, tlen, false, r->host, &r->port, &rl->has_port, ret_reason);
        }
        bool known = false;
        for (size_t i = 0; i < ELEMENTSOF(forward_methods); i++)
                if (strlen(forward_methods[i]) == rl->mlen && memcmp(rl->method, forward_methods[i], rl->mlen) == 0)
                        known = true;
        if (!known)
                return fail(ret_reason, "method not allowed");
        r->kind = EGRESS_REQ_FORWARD;
        if (tlen >= 8 && strncasecmp(target, "https://", 8) == 0)
                return fail(ret_reason, "https:// must use CONNECT");
        if (tlen > 0 && target[0] == '/')
                return fail(ret_reason, "origin-form not allowed on a proxy");
        if (tlen < 7 || strncasecmp(target, "http://", 7) != 0)
                return fail(ret_reason, "target must be absolute http://");
        if (memchr(target, '#', tlen))
                return fail(ret_reason, "fragment in target");
        const char *auth = target + 7;
        size_t alen = 0, rest = tlen - 7;
        while (alen < rest && auth[alen] != '/' && auth[alen] != '?')
                alen++;
        if (memchr(auth, '@', alen))
                return fail(ret_reason, "userinfo in target");
        r->port = 80;
        int q = parse_authority(auth, alen, true, r->host, &r->port, &rl->has_port, ret_reason);
        if (q < 0)
                return q;
        rl->path = auth + alen;
        rl->plen = rest - alen;
        return 0;
}

/* The header lines in [p, stop) (each ending in CRLF): names, count, no folding, and no
 * ambiguous body length (request smuggling). */
static int check_headers(const char *p, const char *stop, const char **ret_reason) {
        unsigned n_headers = 0, n_cl = 0, n_te = 0;
        while (p < stop) {
                const char *eol = memmem(p, (size_t) (stop + 2 - p), "\r\n", 2);
                size_t hl = (size_t) (eol - p);
                if (p[0] == ' ' || p[0] == '\t')
                        return fail(ret_reason, "obsolete line folding");
                if (++n_headers > EGRESS_HEADERS_MAX)
                        return fail(ret_reason, "too many headers");
                const char *colon = memchr(p, ':', hl);
                if (!colon || colon == p)
                        return fail(ret_reason, "bad header");
                size_t nl = (size_t) (colon - p);
                for (size_t i = 0; i < nl; i++)
                        if (!is_token_char(p[i]))
                                return fail(ret_reason, "bad header name");
                if (span_eq_ci(p, nl, "Content-Length")) {
                        if (++n_cl > 1)
                                return fail(ret_reason, "duplicate Content-Length");
                        const char *v = colon + 1, *ve = eol;
                        while (v < ve && (*v == ' ' || *v == '\t'))
                                v++;
                        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                                ve--;
                        if (v == ve || ve - v > 19)
                                return fail(ret_reason, "bad Content-Length");
                        for (const char *c = v; c < ve; c++)
                                if (*c < '0' || *c > '9')
                                        return fail(ret_reason, "bad Content-Length");
                } else if (span_eq_ci(p, nl, "Transfer-Encoding"))
                        n_te++;
                p = eol + 2;
        }
        if (n_cl > 0 && n_te > 0)
                return fail(ret_reason, "Transfer-Encoding with Content-Length");
        return 0;
}

/* The head sent upstream: origin-form request line, the client's headers but the dropped ones,
 * one Host from the target, Connection: close. The headers [hdr, stop) were checked. */
static int build_forward_head(const RequestLine *rl, const char *hdr, const char *stop, size_t end,
                              EgressRequest *r, const char **ret_reason) {
        size_t cap = end + EGRESS_HOST_MAX + 64;
        _cleanup_free_ char *out = malloc(cap + 1);
        size_t pos = 0;
        if (!out)
                return -ENOMEM;
        bool ok = append(out, cap, &pos, rl->method, rl->mlen + 1);
        if (rl->plen == 0 || rl->path[0] != '/')
                ok = ok && append(out, cap, &pos, "/", 1);
        ok = ok && append(out, cap, &pos, rl->path, rl->plen) && append(out, cap, &pos, " ", 1) &&
             append(out, cap, &pos, rl->version, 8) && append(out, cap, &pos, "\r\n", 2);
        for (const char *p = hdr; ok && p < stop;) {
                const char *eol = memmem(p, (size_t) (stop + 2 - p), "\r\n", 2);
                size_t nl = (size_t) ((const char *) memchr(p, ':', (size_t) (eol - p)) - p);
                bool drop = false;
                for (size_t i = 0; i < ELEMENTSOF(dropped_headers); i++)
                        if (span_eq_ci(p, nl, dropped_headers[i]))
                                drop = true;
                if (!drop)
                        ok = append(out, cap, &pos, p, (size_t) (eol + 2 - p));
                p = eol + 2;
        }
        bool v6 = strchr(r->host, ':');
        ok = ok && append(out, cap, &pos, "Host: ", 6);
        ok = ok && (!v6 || append(out, cap, &pos, "[", 1));
        ok = ok && append(out, cap, &pos, r->host, strlen(r->host));
        ok = ok && (!v6 || append(out, cap, &pos, "]", 1));
        if (ok && rl->has_port) {
                char port[8];
                int k = snprintf(port, sizeof port, ":%u", (unsigned) r->port);
                ok = k > 0 && (size_t) k < sizeof port && append(out, cap, &pos, port, (size_t) k);
        }
        ok = ok && append(out, cap, &pos, "\r\nConnection: close\r\n\r\n", 23);
        if (!ok)
                return fail(ret_reason, "rewritten head too large");
        out[pos] = 0;
        r->head = TAKE_PTR(out);
        r->head_len = pos;
        return 0;
}

int egress_request_parse(const char *buf, size_t len, EgressRequest *ret, size_t *ret_consumed, const char **ret_reason) {
        if (ret_reason)
                *ret_reason = NULL;
        if (!buf && len > 0)
                return fail(ret_reason, "no buffer");

        size_t end = 0;
        int q = scan_head(buf, len, &end, ret_reason);
        if (q < 0)
                return q;

        EgressRequest r = {};
        RequestLine rl = {};
        const char *eol = memmem(buf, end, "\r\n", 2);   /* exists: the head ends in CRLF CRLF */
        q = split_request_line(buf, (size_t) (eol - buf), &rl, ret_reason);
        if (q < 0)
                return q;
        q = parse_target(&rl, &r, ret_reason);
        if (q < 0)
                return q;

        const char *hdr = eol + 2, *stop = buf + end - 2;   /* stop: the final CRLF */
        q = check_headers(hdr, stop, ret_reason);
        if (q < 0)
                return q;
        if (r.kind == EGRESS_REQ_FORWARD) {
                q = build_forward_head(&rl, hdr, stop, end, &r, ret_reason);
                if (q < 0)
                        return q;
        }

        *ret = r;
        if (ret_consumed)
                *ret_consumed = end;
        return 0;
}

void egress_request_done(EgressRequest *r) {
        if (!r)
                return;
        free(r->head);
        r->head = NULL;
        r->head_len = 0;
}
