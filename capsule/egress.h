/* SPDX-License-Identifier: MIT */
/* The worker's side of a capsule's egress (docs/egress.md): the streams made, the proxy started
 * for them (tentaflake-egress-proxy, egress-proxy/; its command line and records are
 * capsule/egress-wire.h), and after the capsule its records read back as untrusted input.
 *
 * One proxy per capsule, so per job: a capsule started ahead gets its own, which waits with it.
 * The capsule holds one end of each of CAPSULE_EGRESS_STREAMS socket pairs, the proxy the
 * other, and nothing else of the host: no socket path, no host-uds, --network=none. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "capsule/egress-id.h"
#include "capsule/protocol.h"
#include "capsule/walls.h"
#include "common/error.h"
#include "common/time-util.h"
#include "parser/config.h"

/* How many times a proxy is started on a new id when the one it was given turned out to be some
 * process's (it refuses to run as an id it shares: capsule/egress-id.h). */
#define EGRESS_START_TRIES 4
/* How long the proxy may take to say it is ready (it drops its privileges first). */
#define EGRESS_READY_USEC (5 * USEC_PER_SEC)
/* After the capsule has ended, how long the proxy may take to write its last records and exit
 * (every stream has reached its end by then); then it is killed. */
#define EGRESS_END_USEC (3 * USEC_PER_SEC)

/* Each end's SO_SNDBUF (the kernel doubles it; net.core.wmem_max caps it): what a job can make
 * the host hold in socket buffers is at most 2 x 2 x this per connection, 128 connections a job. */
#define EGRESS_STREAM_SNDBUF (512 * 1024)

typedef struct EgressProxy {
        pid_t pid;                            /* 0: none started */
        int records;                          /* our end of the records pipe */
        int inside[CAPSULE_EGRESS_STREAMS];   /* the capsule's ends, until the sandbox holds them */
        EgressId id;                          /* its uid and gid, its alone until it is reaped */
} EgressProxy;

/* What the job's connections came to (the sum of the records). */
typedef struct EgressSummary {
        bool enabled;              /* the job had egress */
        unsigned connections;      /* records read: one per connection the proxy saw */
        unsigned allowed, refused; /* by verdict */
        uint64_t bytes_up, bytes_down;
        /* NULL when every record was read and valid; else why not ("egress_records"), and the
         * records up to there are all that is known. */
        const char *error;
        char message[256];
        /* The "network" walls (capsule/walls.h): the connections the proxy refused or cut at a
         * bound of the job's, from its checked records. */
        Walls walls;
} EgressSummary;

void egress_proxy_init(EgressProxy *p);

/* For a capsule of config (which has network.allow): the streams, and the proxy started as root
 * with them and the allowlist, waited for until it said it is ready. By then it runs as an id of
 * its own (egress_id_take: no other proxy's, no user's or group's) and has checked that no
 * process it can see has that id; when one does, it refuses and is started again on another id,
 * EGRESS_START_TRIES times in all. max_seconds bounds each connection. take_sockets (a capsule
 * on the host's kernel, whose init passes each connection's socket: capsule/protocol.h): the
 * proxy is told so (--stream-carries socket). On success p->inside are
 * the capsule's ends, for runsc (--pass-fd); close them with egress_proxy_close_inside once it
 * runs. The proxy dies with the calling thread (PR_SET_PDEATHSIG). Error code "capsule_setup". */
int egress_proxy_start(const Config *config, uint64_t max_seconds, bool take_sockets, EgressProxy *p, TfwError *e);
void egress_proxy_close_inside(EgressProxy *p);

/* After the capsule has ended: the proxy waited for (EGRESS_END_USEC, then killed) and its id
 * released, its records read (at most one per stream, each at most EGRESS_RECORD_MAX bytes), each checked by
 * egress_record_parse and, when out_fd >= 0, written there as one JSON object a line in the
 * worker's own serialisation. *ret sums them. Idempotent: a proxy already ended adds nothing. */
void egress_proxy_finish(EgressProxy *p, int out_fd, EgressSummary *ret);
/* Kill and reap it, release its id, close everything, read nothing (a capsule that never ran a
 * job). */
void egress_proxy_kill(EgressProxy *p);

/* Can the proxy reach anything from here? 0 when this process may open an AF_INET or AF_INET6
 * socket, has an interface up that is not loopback and can connect to a listener of its own on
 * 127.0.0.1 (within 1 s); else a negative errno and why in buf (a systemd unit's
 * PrivateNetwork=, RestrictAddressFamilies= or IPAddressDeny=, as the worker's own units set by
 * default: docs/install.md, "Network for jobs"). The proxy is started from here and keeps what it
 * finds. */
int egress_host_route_check(char *buf, size_t size);

/* One record line of the proxy (capsule/egress-wire.h), as untrusted input: exactly its keys,
 * each of its type; verdict and reason from the wire's words (a reason only from the list of its
 * verdict); host a name or IP literal (parser/egress-allow.h), address an IP literal, detail
 * printable ASCII of at most EGRESS_DETAIL_MAX bytes, the counts within 2^53. Returns 0 with
 * *ret a new object of the same keys made from the checked values, -EBADMSG otherwise. */
int egress_record_parse(const char *line, size_t len, json_t **ret);

/* What both planes report of a job's egress (result.json's and RESULT's "network"): the
 * allowlist and bounds of config, the connections (the checked records kept in records_fd by
 * egress_proxy_finish, one object each), their sums, and the error when the records are not
 * whole. NULL when out of memory. */
json_t *egress_result_json(const Config *config, const EgressSummary *s, int records_fd);
