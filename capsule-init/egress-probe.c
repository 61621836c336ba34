/* SPDX-License-Identifier: MIT */
/* `tentaflake-capsule-init --egress-probe ALLOWED UNLISTED HOST_ADDR HOST_PORT`: doctor's proof of a
 * capsule's egress (orchestrator/doctor.c), run as a job inside one, so it needs nothing of the
 * capsule's system mounts. It prints key=value lines:
 *   allowed=STATUS             CONNECT 127.0.0.1:ALLOWED through the proxy: the status line's code
 *   token=TEXT                 and the first line the host's listener sent through the tunnel
 *   unlisted=STATUS            CONNECT 127.0.0.1:UNLISTED (something listens there on the host)
 *   direct_loopback=RESULT     a connection of its own to 127.0.0.1:ALLOWED, which inside the
 *                              capsule is the capsule's loopback, not the host's
 *   direct_host=RESULT         a connection of its own to HOST_ADDR:HOST_PORT, the host's address,
 *                              where doctor listens
 * RESULT is "connected" or the errno's name. It is not pid 1 and reads no channel: any job could
 * run it, and all it can do is what the job could do itself. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "capsule-init/init-internal.h"
#include "capsule/protocol.h"

#define PROBE_TIMEOUT_MS 10000

/* A connection to addr:port within the probe's time; the errno's name when it fails. */
static int connect_to(const char *addr, unsigned port, const char **ret_result) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || inet_pton(AF_INET, addr, &a.sin_addr) != 1) {
                *ret_result = fd < 0 ? strerrorname_np(errno) : "bad_address";
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        if (connect(fd, (struct sockaddr *) &a, sizeof(a)) < 0 && errno != EINPROGRESS) {
                *ret_result = strerrorname_np(errno);
                close(fd);
                return -1;
        }
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        int err = 0;
        socklen_t len = sizeof(err);
        if (poll(&p, 1, PROBE_TIMEOUT_MS) <= 0) {
                *ret_result = "ETIMEDOUT";
                close(fd);
                return -1;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0 || err) {
                *ret_result = strerrorname_np(err ? err : errno);
                close(fd);
                return -1;
        }
        *ret_result = "connected";
        return fd;
}

/* One line from fd into buf (without its CRLF), within the probe's time. */
static bool read_line(int fd, char *buf, size_t size) {
        size_t n = 0;
        while (n + 1 < size) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                if (poll(&p, 1, PROBE_TIMEOUT_MS) <= 0 || read(fd, buf + n, 1) != 1)
                        break;
                if (buf[n] == '\n') {
                        if (n > 0 && buf[n - 1] == '\r')
                                n--;
                        buf[n] = 0;
                        return true;
                }
                n++;
        }
        buf[n] = 0;
        return false;
}

/* CONNECT 127.0.0.1:port through the capsule's proxy: the status code ("none" when no status
 * line came), and with 200 the first line through the tunnel into token. */
static void through_proxy(unsigned port, char status[static 16], char *token, size_t size) {
        const char *how;
        char line[512];
        snprintf(status, 16, "none");
        token[0] = 0;
        int fd = connect_to("127.0.0.1", CAPSULE_EGRESS_PORT, &how);
        if (fd < 0) {
                snprintf(status, 16, "%.15s", how);
                return;
        }
        int n = snprintf(line, sizeof(line), "CONNECT 127.0.0.1:%u HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n", port, port);
        if (write(fd, line, (size_t) n) == n && read_line(fd, line, sizeof(line)) && strncmp(line, "HTTP/1.", 7) == 0 &&
            strlen(line) >= 12) {
                snprintf(status, 16, "%.3s", line + 9);
                /* The rest of the head, then the tunnel's first line. */
                while (read_line(fd, line, sizeof(line)) && line[0])
                        ;
                if (streq(status, "200") && read_line(fd, line, sizeof(line)))
                        snprintf(token, size, "%s", line);
        }
        close(fd);
}

int egress_probe(int argc, char **argv) {
        char status[16], token[256];
        const char *how;
        if (argc != 6)
                return 2;
        unsigned allowed = (unsigned) strtoul(argv[2], NULL, 10), unlisted = (unsigned) strtoul(argv[3], NULL, 10);

        through_proxy(allowed, status, token, sizeof(token));
        printf("allowed=%s\ntoken=%s\n", status, token);
        through_proxy(unlisted, status, token, sizeof(token));
        printf("unlisted=%s\n", status);
        int fd = connect_to("127.0.0.1", allowed, &how);
        printf("direct_loopback=%s\n", how);
        if (fd >= 0)
                close(fd);
        fd = connect_to(argv[4], (unsigned) strtoul(argv[5], NULL, 10), &how);
        printf("direct_host=%s\n", how);
        if (fd >= 0)
                close(fd);
        return 0;
}
