/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "approve/report.h"
#include "approve/wait.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/proc-locks.h"
#include "orchestrator/publish.h"
#include "orchestrator/store.h"

/* ActiveState of a unit, via the system bus; NULL when systemd cannot be asked. */
static char *unit_active_state(sd_bus *bus, const char *unit) {
        _cleanup_free_ char *path = NULL;
        char *state = NULL;
        if (sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path) < 0)
                return NULL;
        if (sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path, "org.freedesktop.systemd1.Unit",
                                       "ActiveState", NULL, &state) < 0)
                return NULL;
        return state;
}

/* systemd's own socket first (root, as systemctl does: there is no dbus-daemon on every
 * host), then the system bus. */
static int open_systemd_bus(sd_bus **ret) {
        sd_bus *bus = NULL;
        int r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_address(bus, "unix:path=/run/systemd/private");
        if (r >= 0)
                r = sd_bus_start(bus);
        if (r >= 0) {
                *ret = bus;
                return 0;
        }
        sd_bus_unref(bus);
        return sd_bus_open_system(ret);
}

WorkerPresence approve_worker_presence(Worker *w, char *why, size_t size) {
        char dummy[1];
        struct stat st;
        sd_bus *bus = NULL;
        WorkerPresence p = WORKER_NONE;

        if (!why) {
                why = dummy;
                size = sizeof(dummy);
        }
        if (fstatat(w->dirs.state_fd, "daemon.lock", &st, AT_SYMLINK_NOFOLLOW) >= 0) {
                int r = flock_held(st.st_ino);
                if (r != 0) {
                        snprintf(why, size, r > 0 ? "a worker holds '%s/daemon.lock'"
                                                  : "cannot read /proc/locks: assuming a worker runs",
                                 w->config->state_dir);
                        return WORKER_RUNNING;
                }
        }
        const char *const prefix[] = {"tentaflake-worker", "tentaflake-worker-queue", "tentaflake-worker-queue"};
        const char *const suffix[] = {"service", "service", "path"};
        if (open_systemd_bus(&bus) < 0) {
                snprintf(why, size, "nothing holds '%s/daemon.lock' and systemd cannot start one (no system bus)",
                         w->config->state_dir);
                return WORKER_NONE;
        }
        for (size_t i = 0; i < ELEMENTSOF(prefix) && p == WORKER_NONE; i++) {
                char unit[128];
                snprintf(unit, sizeof(unit), "%s@%s.%s", prefix[i], w->config->name, suffix[i]);
                _cleanup_free_ char *state = unit_active_state(bus, unit);
                if (state && (streq(state, "active") || streq(state, "activating") || streq(state, "reloading"))) {
                        snprintf(why, size, "%s is %s", unit, state);
                        p = WORKER_STARTABLE;
                }
        }
        if (p == WORKER_NONE)
                snprintf(why, size,
                         "nothing holds '%s/daemon.lock' and none of tentaflake-worker@%s.service, "
                         "tentaflake-worker-queue@%s.path is active",
                         w->config->state_dir, w->config->name, w->config->name);
        sd_bus_flush_close_unref(bus);
        return p;
}

/* The request's own timeout (its captured copy, else the policy default). */
static uint64_t request_timeout(Worker *w, const char *id) {
        _cleanup_request_ Request *req = NULL;
        if (store_read_request(w->dirs.requests_fd, id, &w->policy, &req, NULL) >= 0)
                return req->timeout_seconds;
        return w->policy.default_timeout_seconds;
}

int approve_wait_result(Worker *w, const char *id, uint64_t timeout_seconds, json_t **ret_result, TfwError *e) {
        _cleanup_close_ int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        _cleanup_(json_decrefp) json_t *res = NULL;
        char path[64], why[512];

        if (ifd < 0)
                return tfw_error(e, errno, "internal", "inotify: %m");
        if (timeout_seconds == 0)
                timeout_seconds = request_timeout(w, id) + APPROVE_WAIT_MARGIN_SECONDS;
        usec_t deadline = now_monotonic() + timeout_seconds * USEC_PER_SEC;
        usec_t next_check = 0; /* at once */

        /* Watch first, then look: a result that lands in between is not missed. */
        snprintf(path, sizeof(path), "/proc/self/fd/%d", w->dirs.results_fd);
        if (inotify_add_watch(ifd, path, IN_MOVED_TO | IN_CREATE) < 0)
                return tfw_error(e, errno, "internal", "inotify on the results directory: %m");
        for (;;) {
                res = publish_load_result(&w->dirs, id);
                if (res)
                        break;
                usec_t now = now_monotonic();
                if (now >= deadline)
                        return tfw_error(e, ETIMEDOUT, "timeout",
                                         "approve '%s': no result within %" PRIu64 " s (--timeout); the request "
                                         "stays approved: 'show %s' tells where it is",
                                         id, timeout_seconds, id);
                if (now >= next_check) {
                        if (approve_worker_presence(w, why, sizeof(why)) == WORKER_NONE)
                                return tfw_error(e, ESRCH, "no_worker",
                                                 "approve '%s': approved and queued, but no worker runs for '%s' "
                                                 "and none can be started (%s): start its service or path unit, "
                                                 "or run 'drain'",
                                                 id, w->config->name, why);
                        next_check = now + APPROVE_WAIT_RECHECK_SECONDS * USEC_PER_SEC;
                }
                usec_t until = MIN(deadline, next_check);
                int ms = (int) ((until - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC);
                struct pollfd p = {.fd = ifd, .events = POLLIN};
                if (poll(&p, 1, ms) < 0 && errno != EINTR)
                        return tfw_error(e, errno, "internal", "poll: %m");
                char buf[4096];
                while (read(ifd, buf, sizeof(buf)) > 0)
                        ;
        }
        *ret_result = TAKE_PTR(res);
        return 0;
}
