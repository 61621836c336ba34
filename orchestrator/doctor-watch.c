/* SPDX-License-Identifier: MIT */
/* doctor's line about the workspace's watch (docs/snapshot.md, "The watch's budget"): how many
 * inotify watches it may hold and why (limits.max_watches, a quarter of the host's
 * fs.inotify.max_user_watches), and, as the running daemon last reported it
 * (state_dir/watch.json: the watch lives in the daemon), how many it holds and how many of the
 * workspace's directories the last walk left without one. Informational: a directory without a
 * watch is read by every request, which costs time, not a wall. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>

#include <jansson.h>

#include "common/fd-util.h"
#include "orchestrator/doctor-internal.h"
#include "orchestrator/watch.h"
#include "orchestrator/worker.h"

static long long get_int(json_t *j, const char *key) {
        json_t *v = json_object_get(j, key);
        return json_is_integer(v) ? (long long) json_integer_value(v) : -1;
}

void doctor_check_watch(Doctor *d) {
        const Config *c = d->config;
        uint64_t host = watch_host_max();
        uint32_t budget = watch_budget(c, host);
        char why[256];

        if (!d->driver.ops || !d->driver.ops->binds_generations)
                return; /* no generations: every workspace is streamed, nothing is watched */
        snprintf(why, sizeof(why), "limits.max_watches %llu, at most a quarter of the host's fs.inotify.max_user_watches %llu",
                 (unsigned long long) c->limits.max_watches, (unsigned long long) host);
        if (budget == 0) {
                doctor_info(d, "workspace_watch", "off (%s): every request reads all of the workspace", why);
                return;
        }
        _cleanup_close_ int sfd = open(c->state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_(json_decrefp) json_t *j = NULL;
        if (sfd < 0 || worker_daemon_report(sfd, "watch.json", &j) < 0 || !j) {
                doctor_info(d, "workspace_watch", "at most %u inotify watches (%s); no job has used it yet", budget, why);
                return;
        }
        long long held = get_int(j, "held"), dirs = get_int(j, "directories"), over = get_int(j, "over_budget"),
                  unwatched = get_int(j, "unwatched");
        if (held < 0 || dirs < 0 || over < 0 || unwatched < 0) {
                doctor_info(d, "workspace_watch", "at most %u inotify watches (%s); state_dir/watch.json cannot be read", budget, why);
                return;
        }
        if (over == 0 && unwatched == 0) {
                doctor_info(d, "workspace_watch", "%lld of at most %u inotify watches held (%s); the last walk watched all %lld directories",
                            held, budget, why, dirs);
                return;
        }
        doctor_info(d, "workspace_watch", "%lld of at most %u inotify watches held (%s); the last walk found %lld directories: %lld past "
                    "the budget and %lld the host had no watch for are read by every request",
                    held, budget, why, dirs, over, unwatched);
}
