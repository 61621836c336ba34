/* SPDX-License-Identifier: MIT */
/* What the worker and its egress proxy (tentaflake-egress-proxy, egress-proxy/) say to each
 * other: the proxy's command line and the records it writes. Header-only: the proxy program and
 * the worker's side (capsule/egress.c) both include it.
 *
 * The command line (every value decimal; the worker starts it as root, it drops to UID:GID
 * before it reads a byte from a stream). Started as root it takes only ids of the egress
 * proxies' range (CONFIG_EGRESS_ID_*, parser/config.h: the worker gives each proxy one of its
 * own, capsule/egress-id.h), and once it runs as them it refuses to go on, exit status
 * EGRESS_EXIT_ID_IN_USE, when any process it can see in /proc but itself runs with UID or GID
 * as its effective id and is dumpable (the owner of its /proc/PID): that takes in every process
 * whose /proc/PID/environ would be the proxy's to read. Started unprivileged (its tests) it
 * changes nothing and takes only its own ids.
 *
 *   tentaflake-egress-proxy --uid UID --gid GID --records-fd FD --streams FIRST:COUNT
 *       --max-upload BYTES --max-download BYTES --idle-seconds N --max-seconds N
 *       [--head-seconds N] [--stream-carries bytes|socket] [--allow ENTRY]...
 *
 *   --streams     fds FIRST..FIRST+COUNT-1 are the proxy's ends of the capsule's streams
 *                 (capsule/protocol.h, CAPSULE_EGRESS_*): each carries at most one connection
 *   --stream-carries  bytes (the default, runsc): a stream carries the connection's bytes;
 *                 socket (runc, where the capsule's sockets are the host kernel's): its first
 *                 and only message is one byte with the job's TCP socket attached
 *                 (CAPSULE_EGRESS_PASS_ARG), which the proxy then reads and writes itself; a
 *                 stream that brings anything else is refused ("no_request")
 *   --records-fd  where the proxy writes its lines (below); the only fd it writes to but the
 *                 streams and the sockets it opens
 *   --allow       a network.allow entry (parser/egress-allow.h); none: every request refused
 *
 * The records: one JSON object per line, each at most EGRESS_RECORD_MAX bytes with its '\n'.
 * First exactly one of
 *   {"ready":true}                    set up, privileges dropped: the capsule may start
 *   {"error":"TEXT"}                  it could not start (then it exits non-zero)
 * then one line per stream that carried a connection, written when the connection ended (on
 * SIGTERM, which the worker sends once the capsule has ended, every connection still open ends
 * at once, "stopped", and writes its line before the proxy exits):
 *   {"kind":"connect"|"forward"|null, "host":STR|null, "port":INT|null, "address":STR|null,
 *    "verdict":"allowed"|"refused", "reason":WORD|null, "detail":STR|null,
 *    "bytes_up":INT, "bytes_down":INT, "duration_ms":INT}
 * kind and host/port are null when no request head was understood; address is the address the
 * proxy connected to (allowed), or the one it refused; bytes_up counts what the proxy sent to
 * the upstream (the forwarded head included), bytes_down what it sent back into the capsule.
 * An allowed connection has reason null when it ended by itself, else one of the CUT words; a
 * refused one always has a reason from the REFUSED words. detail is printable ASCII for a
 * person (the parser's reason, the address class, the errno text), at most
 * EGRESS_DETAIL_MAX bytes. The worker re-reads every line as untrusted input (capsule/egress.c). */
#pragma once

#define EGRESS_PROXY_NAME "tentaflake-egress-proxy"
/* Its exit status when the id it was given is some other process's too (after {"error":...}):
 * the worker then starts it again on another id. Every other failure exits 1 or 2. */
#define EGRESS_EXIT_ID_IN_USE 3
#define EGRESS_RECORD_MAX 1024
#define EGRESS_DETAIL_MAX 200

/* Defaults of the proxy's bounds that the configuration does not name. */
#define EGRESS_IDLE_SECONDS 60   /* no byte either way for this long: cut */
#define EGRESS_HEAD_SECONDS 10   /* the request head must be whole within this */
#define EGRESS_CONNECT_SECONDS 10 /* per address tried */
#define EGRESS_MAX_ADDRESSES 16  /* of a resolved name, all checked, tried in order */

/* Why a refused connection was refused (verdict "refused"). */
#define EGRESS_REFUSED_WORDS                                                                       \
        "no_request",        /* the stream ended before a whole request head (or brought no   \
                              * TCP socket, --stream-carries socket) */                       \
        "head_timeout",      /* no whole head within EGRESS_HEAD_SECONDS */                      \
        "bad_request",       /* the head parser refused it (detail: why) */                      \
        "not_allowed",       /* host:port is not on network.allow */                             \
        "resolve_failed",    /* the name did not resolve */                                      \
        "address_refused",   /* it resolves to an address of a refused class or the host's own */ \
        "connect_failed",    /* no address accepted the connection */                            \
        "upload_limit",      /* the job's upload budget was spent before this one */             \
        "download_limit",    /* the job's download budget was spent before this one */           \
        "stopped"            /* the capsule ended (SIGTERM) before it was connected */

/* Why an allowed connection was cut (verdict "allowed", reason not null). */
#define EGRESS_CUT_WORDS                                                                           \
        "upload_limit",   /* max_upload_bytes reached: the connection is closed there */         \
        "download_limit", /* max_download_bytes reached */                                      \
        "idle_timeout",   /* no byte either way for --idle-seconds */                           \
        "time_limit",     /* open for --max-seconds */                                          \
        "io_error",       /* a read or write failed on either side */                           \
        "stopped"         /* still open when the capsule ended: the worker's SIGTERM cut it */
