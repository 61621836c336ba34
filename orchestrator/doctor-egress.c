/* SPDX-License-Identifier: MIT */
/* doctor's proof of the egress route (docs/egress.md), for a worker with network.allow: a probe
 * capsule with this worker's proxy, given an allowlist of one listener of doctor's own on the
 * host's loopback, must reach that listener through the proxy, be refused an unlisted port where
 * something also listens (which must never see a connection), and reach nothing of the host on
 * its own (the capsule's 127.0.0.1 is its own loopback; the host's address has no route). The
 * probe is init's --egress-probe (capsule-init/egress-probe.c), so it needs nothing of the
 * system mounts. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "capsule/egress.h"
#include "capsule/protocol.h"
#include "common/fd-util.h"
#include "orchestrator/doctor-internal.h"
#include "orchestrator/doctor.h"
#include "parser/egress-allow.h"

#define LISTEN_SECONDS (DOCTOR_PROBE_TIMEOUT_SECONDS + 30)

typedef struct Listeners {
        int allowed, unlisted, host, stop[2];
        uint16_t allowed_port, unlisted_port, host_port;
        char token[64];
        atomic_uint allowed_accepts, unlisted_accepts, host_accepts;
        pthread_t thread;
} Listeners;

static int listen_on(struct in_addr addr, uint16_t *ret_port) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr = addr };
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* Not the port the capsule's own relay listens on inside: a direct connection there
         * would find init, not the host. */
        for (int tries = 0; tries < 4; tries++) {
                a.sin_port = 0;
                if (bind(fd, (struct sockaddr *) &a, sizeof(a)) < 0 || listen(fd, 8) < 0 ||
                    getsockname(fd, (struct sockaddr *) &a, &len) < 0) {
                        int r = -errno;
                        close(fd);
                        return r;
                }
                if (ntohs(a.sin_port) != CAPSULE_EGRESS_PORT) {
                        *ret_port = ntohs(a.sin_port);
                        return fd;
                }
                close(fd);
                if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
                        return -errno;
        }
        close(fd);
        return -EADDRINUSE;
}

static void *listen_main(void *arg) {
        Listeners *l = arg;
        for (;;) {
                struct pollfd p[4] = { { .fd = l->allowed, .events = POLLIN },
                                       { .fd = l->unlisted, .events = POLLIN },
                                       { .fd = l->host, .events = POLLIN },
                                       { .fd = l->stop[0], .events = POLLIN } };
                if (poll(p, 4, LISTEN_SECONDS * 1000) <= 0 || p[3].revents)
                        return NULL;
                for (int i = 0; i < 3; i++) {
                        if (!p[i].revents)
                                continue;
                        int c = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
                        if (c < 0)
                                continue;
                        if (i == 0) {
                                atomic_fetch_add(&l->allowed_accepts, 1);
                                (void) write_all(c, l->token, strlen(l->token));
                                (void) write_all(c, "\n", 1);
                        } else
                                atomic_fetch_add(i == 1 ? &l->unlisted_accepts : &l->host_accepts, 1);
                        close(c);
                }
        }
}

/* host: the host's address the capsule must not reach on its own, listened on there alone. */
static int listeners_start(Listeners *l, const char *host) {
        uint8_t rnd[8];
        struct in_addr lo = { htonl(INADDR_LOOPBACK) }, h;
        *l = (Listeners) { .allowed = -EBADF, .unlisted = -EBADF, .host = -EBADF, .stop = { -EBADF, -EBADF } };
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
                return -EIO;
        snprintf(l->token, sizeof(l->token), "tentaflake-doctor-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
                 rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        if ((l->allowed = listen_on(lo, &l->allowed_port)) < 0)
                return l->allowed;
        if ((l->unlisted = listen_on(lo, &l->unlisted_port)) < 0)
                return l->unlisted;
        /* A capsule with a route to the host's address would reach this one; a host without an
         * address of its own (the TEST-NET fallback) has nothing listening there. */
        if (inet_pton(AF_INET, host, &h) == 1 && (l->host = listen_on(h, &l->host_port)) < 0)
                l->host = -EBADF;
        if (l->host < 0)
                l->host_port = l->allowed_port;
        if (pipe2(l->stop, O_CLOEXEC) < 0)
                return -errno;
        int r = pthread_create(&l->thread, NULL, listen_main, l);
        if (r != 0) {
                l->stop[1] = safe_close(l->stop[1]);
                return -r;
        }
        return 0;
}

static void listeners_stop(Listeners *l) {
        if (l->stop[1] >= 0) {
                (void) write_all(l->stop[1], "x", 1);
                pthread_join(l->thread, NULL);
        }
        safe_close(l->allowed);
        safe_close(l->unlisted);
        safe_close(l->host);
        safe_close(l->stop[0]);
        safe_close(l->stop[1]);
}

/* An IPv4 address of the host's that is not loopback (the capsule must not reach it), or a
 * TEST-NET address no network routes when the host has none. */
static void host_address(char buf[static INET_ADDRSTRLEN]) {
        struct ifaddrs *ifa = NULL;
        snprintf(buf, INET_ADDRSTRLEN, "192.0.2.1");
        if (getifaddrs(&ifa) < 0)
                return;
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next)
                if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
                    !(i->ifa_flags & IFF_LOOPBACK)) {
                        inet_ntop(AF_INET, &((struct sockaddr_in *) i->ifa_addr)->sin_addr, buf, INET_ADDRSTRLEN);
                        break;
                }
        freeifaddrs(ifa);
}

static void report_route(Doctor *d, const Probe *p, const Listeners *l, const char *host) {
        char a[64], t[128], u[64], dl[64], dh[64];
        unsigned hacc = atomic_load(&l->host_accepts);
        const char *allowed = doctor_probe_get(p, "allowed", a, sizeof(a)), *token = doctor_probe_get(p, "token", t, sizeof(t)),
                   *unlisted = doctor_probe_get(p, "unlisted", u, sizeof(u)),
                   *direct_lo = doctor_probe_get(p, "direct_loopback", dl, sizeof(dl)),
                   *direct_host = doctor_probe_get(p, "direct_host", dh, sizeof(dh));
        unsigned acc = atomic_load(&l->allowed_accepts), unl = atomic_load(&l->unlisted_accepts);

        bool ok = allowed && streq(allowed, "200") && token && streq(token, l->token) && acc == 1;
        doctor_report(d, "egress_route", ok,
                      ok ? "through the worker's proxy the capsule reached an allowed listener on the host (127.0.0.1:%u)"
                         : "the capsule did not reach an allowed listener on the host (127.0.0.1:%u) through the proxy: "
                           "answer %s, %s, %u connection(s) arrived",
                      (unsigned) l->allowed_port, allowed ? allowed : "none",
                      token && streq(token, l->token) ? "the listener's token came back" : "no token came back", acc);
        ok = unlisted && streq(unlisted, "403") && unl == 0;
        doctor_report(d, "egress_refused", ok,
                      ok ? "an unlisted port where something listens (127.0.0.1:%u) was refused by the proxy (403) and "
                           "never reached"
                         : "an unlisted port (127.0.0.1:%u) was not refused as it must be: answer %s, %u connection(s) "
                           "arrived",
                      (unsigned) l->unlisted_port, unlisted ? unlisted : "none", unl);
        ok = direct_lo && direct_host && !streq(direct_lo, "connected") && !streq(direct_host, "connected") &&
             acc <= 1 && hacc == 0;
        doctor_report(d, "egress_no_other_route", ok,
                      ok ? "on its own the capsule reached nothing of the host: 127.0.0.1:%u (its own loopback) %s, "
                           "%s:%u %s"
                         : "the capsule has a route of its own: 127.0.0.1:%u %s, %s:%u %s",
                      (unsigned) l->allowed_port, direct_lo ? direct_lo : "not tried", host, (unsigned) l->host_port,
                      direct_host ? direct_host : "not tried");
}

void doctor_probe_egress(Doctor *d, const Config *c) {
        Listeners l;
        char entry[32], ports[3][8], host[INET_ADDRSTRLEN], buf[1200];
        char *allow[] = { entry, NULL };
        EgressAllow rule;
        const char *why = NULL;
        Probe p;

        /* What the proxy, started from here, can reach at all (a unit's PrivateNetwork=). */
        int r = egress_host_route_check(buf, sizeof(buf));
        doctor_report(d, "egress_host", r >= 0, "%s",
                      r >= 0 ? "this process may open IP sockets and has an interface up that is not loopback" : buf);
        host_address(host);
        r = listeners_start(&l, host);
        if (r < 0) {
                doctor_report(d, "egress_route", false, "cannot listen on the host for the probe: %s", strerror(-r));
                listeners_stop(&l);
                return;
        }
        /* This worker's proxy and bounds, with an allowlist of the probe's own listener. */
        snprintf(entry, sizeof(entry), "127.0.0.1:%u", (unsigned) l.allowed_port);
        if (egress_allow_parse(entry, &rule, &why) < 0) {
                doctor_report(d, "egress_route", false, "'%s': %s", entry, why);
                listeners_stop(&l);
                return;
        }
        Config pc = *c;
        pc.network.allow = allow;
        pc.network.rules = &rule;
        pc.network.n_allow = 1;
        snprintf(ports[0], sizeof(ports[0]), "%u", (unsigned) l.allowed_port);
        snprintf(ports[1], sizeof(ports[1]), "%u", (unsigned) l.unlisted_port);
        snprintf(ports[2], sizeof(ports[2]), "%u", (unsigned) l.host_port);
        char *argv[] = { (char *) CAPSULE_INIT_PATH, (char *) "--egress-probe", ports[0], ports[1], host, ports[2],
                         NULL };
        r = doctor_probe(d, &pc, "egress", argv, DOCTOR_PROBE_TIMEOUT_SECONDS, &p);
        listeners_stop(&l);
        if (r < 0 || p.res.status != CAPSULE_SUCCEEDED)
                doctor_report(d, "egress_route", false, "the egress probe job did not complete: %s",
                              r < 0 ? strerror(-r) : doctor_probe_result(&p, buf, sizeof(buf)));
        else
                report_route(d, &p, &l, host);
        if (r >= 0)
                doctor_probe_free(&p);
}
