/* SPDX-License-Identifier: MIT */
/* What the egress proxy's two files share (egress-proxy/, capsule/egress-wire.h): the
 * process-wide state every connection thread reads (the command line, the host's own
 * addresses, the job's two byte budgets, the stop signal) and the records writer.
 * egress-proxy.c sets it all up before the first stream byte is read and owns the threads;
 * conn.c serves one stream from its first byte to its record. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/time-util.h"
#include "parser/egress-allow.h"

/* The host's own addresses kept for the address check. Not attacker-controlled (getifaddrs),
 * but capped like everything else; a host with more keeps the first ones. */
#define PROXY_OWN_ADDRESSES_MAX 256

/* One fixed buffer each way per connection: the whole of what the proxy ever holds of a
 * connection's bytes, whatever the peers do. The download's is a pipe of this size where one
 * can be had (conn.c: splice, no copy through the proxy), else a buffer. */
#define PROXY_RELAY_BUFFER (256 * 1024)

/* The download's pipe where one of this size can be had (else one of PROXY_RELAY_BUFFER, else
 * the buffer): as large as what the upstream socket's receive buffer lets arrive at once, so
 * that one wake-up moves it all. With 256 KiB each, the proxy spent about 36 ms of CPU on a
 * 100 MB download; with 1 MiB each, 16 to 26 ms (issue 48, runc; docs/egress.md, "Measured").
 * 1 MiB is the default fs.pipe-max-size. */
#define PROXY_DOWN_PIPE (1024 * 1024)

/* Each upstream socket's SO_SNDBUF and SO_RCVBUF (the kernel doubles them): fixed, so what a
 * connection can make the host queue is bounded (capsule/egress.h). Uploads are small; the
 * receive side matches the download's pipe. */
#define PROXY_UPSTREAM_BUFFER (256 * 1024)
#define PROXY_UPSTREAM_RCVBUF PROXY_DOWN_PIPE

/* A connection thread's stack: getaddrinfo (nss files + dns) is the deepest caller. The
 * sanitizers' redzones need more. */
#if defined(__SANITIZE_ADDRESS__)
#define PROXY_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PROXY_UNDER_ASAN 1
#endif
#endif
#ifdef PROXY_UNDER_ASAN
#define PROXY_THREAD_STACK (1024 * 1024)
#else
#define PROXY_THREAD_STACK (256 * 1024)
#endif

/* How long a reply of the proxy's own (the 200 of a CONNECT, a refusal) may take to go into
 * the stream. Such a reply is far smaller than a socket buffer: this only bounds a peer that
 * never reads. */
#define PROXY_REPLY_SECONDS 5

typedef struct ProxyAddress {
        int family;          /* AF_INET or AF_INET6 */
        uint8_t addr[16];    /* network order; 4 bytes used for AF_INET */
} ProxyAddress;

typedef struct Proxy {
        /* The command line (capsule/egress-wire.h). */
        uid_t uid;
        gid_t gid;
        int records_fd;
        int first_stream;
        unsigned n_streams;
        uint64_t max_upload, max_download;
        usec_t idle_usec, max_usec, head_usec;
        /* --stream-carries socket: each stream brings the job's own connection as an fd
         * (conn.c, conn_take_socket) instead of its bytes. */
        bool take_sockets;
        EgressAllow *allow;
        size_t n_allow;

        ProxyAddress own[PROXY_OWN_ADDRESSES_MAX];
        size_t n_own;

        /* What is left of the job's budgets, shared by every connection (conn.c takes from
         * them before each send). */
        _Atomic uint64_t upload_left, download_left;

        /* An eventfd that becomes readable for good when the proxy stops (SIGTERM): every
         * connection polls it beside its sockets. */
        int stop_fd;

        pthread_mutex_t records_lock;
} Proxy;

/* One record line (capsule/egress-wire.h); NULL fields are written as null. */
typedef struct ProxyRecord {
        const char *kind;      /* "connect", "forward" or NULL */
        const char *host;      /* NULL when no head was understood */
        int port;              /* < 0: null */
        const char *address;
        bool allowed;
        const char *reason;    /* a REFUSED word (refused), a CUT word or NULL (allowed) */
        const char *detail;    /* any bytes: made printable and capped by the writer */
        uint64_t bytes_up, bytes_down, duration_ms;
} ProxyRecord;

/* Write one record as one JSON line (egress-proxy.c): at most EGRESS_RECORD_MAX bytes with its
 * '\n', in one write under p->records_lock. */
int proxy_write_record(Proxy *p, const ProxyRecord *r);

/* src (NULL: "") as printable ASCII into dst[size]: every other byte becomes '?', cut to fit. */
void proxy_printable(char *dst, size_t size, const char *src);

/* A connection's socket that the main thread may shut down (--stream-carries socket: the job's
 * own). That socket's file came from the sandbox, which may hold a copy of it and clear its
 * O_NONBLOCK: a splice into it then waits for room with no deadline, and only a shutdown ends
 * that wait. The connection's thread sets fd under lock and clears it under lock as it closes
 * it, so the main thread never shuts down an fd number since reused. */
typedef struct ConnSocket {
        pthread_mutex_t lock;
        int fd;   /* -1: none */
} ConnSocket;

/* Serve the stream fd (conn.c) from its first byte, which arrived at start, to its record;
 * closes fd. sock: where the job's socket is made known while the connection holds it. */
void conn_serve(Proxy *p, int fd, usec_t start, ConnSocket *sock);

/* The proxy stops: a connection's thread that waits inside a call on the job's socket returns
 * (conn.c; see ConnSocket). */
void conn_socket_shutdown(ConnSocket *sock);
