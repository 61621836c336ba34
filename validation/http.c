/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "snapshot/git-object.h"
#include "validation/curl-dl.h"
#include "validation/http.h"

struct Http {
        CURL *curl;
        char *base;
        struct curl_slist *auth; /* "Authorization: Bearer …" (wiped when freed) */
        char *unix_socket;       /* NULL: connect to the URL's host; else this AF_UNIX path */
        long timeout;
        char errbuf[CURL_ERROR_SIZE];
};

int http_global_init(TfwError *e) {
        int r = dlopen_libcurl(e);
        if (r < 0)
                return r;
        return sym_curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : tfw_error(e, EIO, "internal", "curl_global_init failed");
}

Http *http_free(Http *h) {
        if (!h)
                return NULL;
        if (h->curl)
                sym_curl_easy_cleanup(h->curl);
        for (struct curl_slist *s = h->auth; s; s = s->next)
                explicit_bzero(s->data, strlen(s->data));
        sym_curl_slist_free_all(h->auth);
        free(h->base);
        free(h->unix_socket);
        free(h);
        return NULL;
}

int http_set_unix_socket(Http *h, const char *path) {
        char *p = NULL;
        if (path && !(p = strdup(path)))
                return -ENOMEM;
        free(h->unix_socket);
        h->unix_socket = p;
        return 0;
}

int http_new(const char *base, const char *token, long timeout_secs, Http **ret, TfwError *e) {
        Http *h = calloc(1, sizeof(*h));
        _cleanup_free_ char *hdr = NULL;

        if (!h)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        h->timeout = timeout_secs;
        h->base = strdup(base);
        h->curl = sym_curl_easy_init();
        if (asprintf(&hdr, "Authorization: Bearer %s", token) < 0)
                hdr = NULL;
        if (!h->base || !h->curl || !hdr) {
                http_free(h);
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        }
        h->auth = sym_curl_slist_append(NULL, hdr);
        explicit_bzero(hdr, strlen(hdr));
        if (!h->auth) {
                http_free(h);
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        }
        *ret = h;
        return 0;
}

typedef struct Sink {
        char *buf;
        size_t len, cap, max;
        bool too_big;
} Sink;

static size_t sink_write(char *p, size_t size, size_t n, void *userdata) {
        Sink *s = userdata;
        size_t len = size * n;
        if (s->len + len > s->max) {
                s->too_big = true;
                return 0; /* aborts the transfer */
        }
        if (s->len + len + 1 > s->cap) {
                size_t cap = MAX(s->cap * 2, s->len + len + 1);
                cap = MIN(cap, s->max + 1);
                char *b = realloc(s->buf, cap);
                if (!b)
                        return 0;
                s->buf = b;
                s->cap = cap;
        }
        memcpy(s->buf + s->len, p, len);
        s->len += len;
        s->buf[s->len] = 0;
        return len;
}

static int setup(Http *h, const char *path, long timeout_secs, struct curl_slist *headers, TfwError *e) {
        _cleanup_free_ char *url = NULL;
        CURL *c = h->curl;

        if (asprintf(&url, "%s%s", h->base, path) < 0)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        sym_curl_easy_reset(c);
        h->errbuf[0] = 0;
        if (sym_curl_easy_setopt(c, CURLOPT_URL, url) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK)
                return tfw_error(e, EINVAL, "http", "the server URL is not usable");
        sym_curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
        sym_curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        sym_curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        sym_curl_easy_setopt(c, CURLOPT_PROXY, "");
        sym_curl_easy_setopt(c, CURLOPT_NETRC, (long) CURL_NETRC_IGNORED);
        sym_curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_secs > 0 ? timeout_secs : h->timeout);
        sym_curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, MIN(h->timeout, 30L));
        sym_curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        sym_curl_easy_setopt(c, CURLOPT_USERAGENT, "tentaflake-worker/" TFW_VERSION);
        /* The URL still names the server (Host header, TLS name check); only the connection
         * goes to the local socket (a proxy such as systemd-socket-proxyd). */
        if (h->unix_socket && sym_curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, h->unix_socket) != CURLE_OK)
                return tfw_error(e, EINVAL, "http", "this libcurl cannot connect through a unix socket");
        return 0;
}

/* -ECANCELED: the write callback stopped the transfer (it says why); -EFBIG: the answer
 * announced a length above CURLOPT_MAXFILESIZE_LARGE, before any byte of it was read (the
 * caller names its cap). Neither records an error. */
static int perform(Http *h, const char *what, long *ret_status, TfwError *e) {
        CURLcode cc = sym_curl_easy_perform(h->curl);
        long status = 0;
        if (cc == CURLE_FILESIZE_EXCEEDED)
                return -EFBIG;
        if (cc != CURLE_OK && cc != CURLE_WRITE_ERROR)
                return tfw_error(e, EIO, "http", "%s: %s", what, h->errbuf[0] ? h->errbuf : sym_curl_easy_strerror(cc));
        sym_curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &status);
        *ret_status = status;
        return cc == CURLE_WRITE_ERROR ? -ECANCELED : 0;
}

static int too_big(const char *method, const char *path, size_t max, TfwError *e) {
        return tfw_error(e, E2BIG, "too_large", "%s %s: the answer is larger than %zu bytes, this call's cap; not read further",
                         method, path, max);
}

int http_call(Http *h, bool post, const char *path, json_t *body, size_t max, long timeout_secs, long *ret_status,
              char **ret_body, size_t *ret_len, TfwError *e) {
        _cleanup_free_ char *json = NULL;
        struct curl_slist *headers = NULL;
        Sink s = {.max = max};
        long status = 0;
        int r;

        /* The auth header is first in the list; the JSON header is appended to a copy chain
         * that shares h->auth's node, and freed (only the appended node) afterwards. */
        struct curl_slist ct = {.data = (char *) "Content-Type: application/json", .next = NULL};
        struct curl_slist auth = {.data = h->auth->data, .next = post ? &ct : NULL};
        headers = &auth;

        r = setup(h, path, timeout_secs, headers, e);
        if (r < 0)
                return r;
        if (post) {
                json = body ? json_dumps(body, JSON_COMPACT) : strdup("{}");
                if (!json)
                        return tfw_error(e, ENOMEM, "oom", "out of memory");
                sym_curl_easy_setopt(h->curl, CURLOPT_POST, 1L);
                sym_curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, json);
                sym_curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE, (long) strlen(json));
        }
        sym_curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, sink_write);
        sym_curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &s);
        sym_curl_easy_setopt(h->curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) max);
        r = perform(h, path, &status, e);
        sym_curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
        if (r == -EFBIG || (r == -ECANCELED && s.too_big)) {
                free(s.buf);
                return too_big(post ? "POST" : "GET", path, max, e);
        }
        if (r == -ECANCELED) {
                free(s.buf);
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        }
        if (r < 0) {
                free(s.buf);
                return r;
        }
        if (!s.buf) {
                s.buf = strdup("");
                if (!s.buf)
                        return tfw_error(e, ENOMEM, "oom", "out of memory");
        }
        *ret_status = status;
        *ret_body = s.buf;
        *ret_len = s.len;
        return 0;
}

typedef struct StreamSink {
        CURL *curl;
        HttpChunkFn fn;
        void *userdata;
        size_t received, max;
        long status;
        bool too_big, refused;
        TfwError *e;
} StreamSink;

static size_t stream_write(char *p, size_t size, size_t n, void *userdata) {
        StreamSink *s = userdata;
        size_t len = size * n;

        if (s->status == 0)
                sym_curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &s->status);
        if (len > s->max - s->received) {
                s->too_big = true;
                return 0; /* aborts the transfer */
        }
        s->received += len;
        if (s->status != 200)
                return len; /* an error answer: its status is all the caller reads */
        if (s->fn(p, len, s->userdata, s->e) < 0) {
                s->refused = true;
                return 0;
        }
        return len;
}

int http_get_stream(Http *h, const char *path, size_t max, HttpChunkFn fn, void *userdata, long *ret_status,
                    TfwError *e) {
        StreamSink s = {.curl = h->curl, .fn = fn, .userdata = userdata, .max = max, .e = e};
        struct curl_slist auth = {.data = h->auth->data, .next = NULL};
        long status = 0;
        int r;

        r = setup(h, path, 0, &auth, e);
        if (r < 0)
                return r;
        sym_curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, stream_write);
        sym_curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &s);
        sym_curl_easy_setopt(h->curl, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t) max);
        r = perform(h, path, &status, e);
        sym_curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
        if (r == -EFBIG || (r == -ECANCELED && s.too_big))
                return too_big("GET", path, max, e);
        if (r == -ECANCELED && s.refused)
                return -(e->error ? e->error : EBADMSG); /* the consumer's refusal, already in e */
        if (r < 0)
                return r;
        *ret_status = status;
        return 0;
}

typedef struct BlobSink {
        CURL *curl;
        int fd;
        Sink mem;
        uint64_t *budget;
        uint64_t received;
        Sha256 *h;
        int64_t announced; /* -1 until known */
        bool hashing, too_big, io_error;
        long status;
} BlobSink;

static size_t blob_write(char *p, size_t size, size_t n, void *userdata) {
        BlobSink *b = userdata;
        size_t len = size * n;

        if (b->status == 0)
                sym_curl_easy_getinfo(b->curl, CURLINFO_RESPONSE_CODE, &b->status);
        if (b->status != 200) {
                /* An error answer: keep a little of it for the message, nothing on disk. */
                if (b->mem.len + len <= 4096)
                        (void) sink_write(p, 1, len, &b->mem);
                return len;
        }
        if (len > *b->budget) {
                b->too_big = true;
                return 0;
        }
        *b->budget -= len;
        if (b->announced < 0) {
                curl_off_t cl = -1;
                sym_curl_easy_getinfo(b->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl);
                b->announced = cl;
                if (cl >= 0 && git_blob_hash_start(b->h, (uint64_t) cl) >= 0)
                        b->hashing = true;
                else
                        b->announced = -2; /* unknown: hash after the transfer */
        }
        if (b->hashing && sha256_update(b->h, p, len) < 0) {
                b->io_error = true;
                return 0;
        }
        b->received += len;
        if (b->fd >= 0) {
                if (write_all(b->fd, p, len) < 0) {
                        b->io_error = true;
                        return 0;
                }
        } else if (sink_write(p, 1, len, &b->mem) != len) {
                b->io_error = true;
                return 0;
        }
        return len;
}

int http_get_blob(Http *h, const char *path, int fd, char **ret_mem, size_t *ret_mem_len, uint64_t *budget,
                  uint8_t ret_oid[static SHA256_DIGEST_SIZE], uint64_t *ret_size, long *ret_status, TfwError *e) {
        _cleanup_(sha256_freep) Sha256 *hh = NULL;
        BlobSink b = {.curl = h->curl, .fd = fd, .budget = budget, .announced = -1, .mem = {.max = SIZE_MAX - 1}};
        struct curl_slist auth = {.data = h->auth->data, .next = NULL};
        long status = 0;
        int r;

        if (sha256_new(&hh) < 0)
                return tfw_error(e, ENOMEM, "oom", "out of memory");
        b.h = hh;
        if (fd < 0)
                b.mem.max = (size_t) MIN(*budget, (uint64_t) 64 << 20);
        r = setup(h, path, 0, &auth, e);
        if (r < 0)
                return r;
        sym_curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, blob_write);
        sym_curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &b);
        r = perform(h, path, &status, e);
        sym_curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
        if (r == -ECANCELED || b.too_big || b.io_error) {
                free(b.mem.buf);
                if (b.too_big)
                        return tfw_error(e, E2BIG, "checkout_too_large", "the tree is larger than the checkout ceiling");
                return tfw_error(e, EIO, "checkout_io", "%s: cannot write the blob: %m", path);
        }
        if (r < 0) {
                free(b.mem.buf);
                return r;
        }
        *ret_status = status;
        if (status != 200) {
                free(b.mem.buf);
                return 0;
        }
        if (b.hashing && b.announced >= 0 && (uint64_t) b.announced != b.received) {
                free(b.mem.buf);
                return tfw_error(e, EBADMSG, "blob_mismatch", "%s: %llu bytes received, %lld announced", path,
                                 (unsigned long long) b.received, (long long) b.announced);
        }
        if (!b.hashing) {
                /* No length was announced (or nothing was received): hash what was kept. */
                if (git_blob_hash_start(hh, b.received) < 0)
                        return tfw_error(e, ENOMEM, "oom", "out of memory");
                if (fd >= 0) {
                        char buf[65536];
                        uint64_t left = b.received;
                        off_t off = 0;
                        while (left > 0) {
                                ssize_t m = pread(fd, buf, MIN(sizeof(buf), left), off);
                                if (m <= 0) {
                                        free(b.mem.buf);
                                        return tfw_error(e, EIO, "checkout_io", "%s: cannot read the blob back", path);
                                }
                                (void) sha256_update(hh, buf, (size_t) m);
                                left -= (uint64_t) m;
                                off += m;
                        }
                } else if (b.received)
                        (void) sha256_update(hh, b.mem.buf, b.mem.len);
        }
        if (sha256_final(hh, ret_oid) < 0) {
                free(b.mem.buf);
                return tfw_error(e, EIO, "oom", "hashing failed");
        }
        *ret_size = b.received;
        if (ret_mem) {
                if (!b.mem.buf)
                        b.mem.buf = strdup("");
                *ret_mem = b.mem.buf;
                *ret_mem_len = b.mem.len;
        } else
                free(b.mem.buf);
        return 0;
}
