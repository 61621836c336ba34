/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "controller/status.h"
#include "parser/request.h"

#define RESULT_MAX_BYTES (1 << 20)
#define REJECTED_MAX_BYTES (64 * 1024)

const char *controller_state_to_string(ControllerState s) {
        static const char *const t[] = {"unknown", "pending", "queued", "running", "final"};
        return (unsigned) s < ELEMENTSOF(t) ? t[s] : "unknown";
}

int controller_load_json_at(int dir_fd, const char *path, size_t max, json_t **ret) {
        _cleanup_close_ int fd = openat(dir_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t len;
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        int r = read_full_fd_bounded(fd, max, &buf, &len);
        if (r < 0)
                return r;
        return json_load_object_strict(buf, len, "file", ret, NULL);
}

/* The .rejected/ record for id's inbox name made at or after not_before, as a result. */
static json_t *find_rejection(int results_fd, const char *id, usec_t not_before) {
        char name[REQUEST_ID_MAX + 8], prefix[REQUEST_ID_MAX + 9];
        _cleanup_close_ int dfd = openat(results_fd, ".rejected", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        json_t *found = NULL;

        if (dfd < 0)
                return NULL;
        snprintf(name, sizeof(name), "%s.json", id);
        snprintf(prefix, sizeof(prefix), "%s-", name);
        DIR *d = opendir_fd(dfd);
        if (!d)
                return NULL;
        struct dirent *de;
        while (!found && (de = readdir(d))) {
                _cleanup_(json_decrefp) json_t *rec = NULL;
                usec_t at;
                if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
                    controller_load_json_at(dfd, de->d_name, REJECTED_MAX_BYTES, &rec) < 0)
                        continue;
                const char *n = json_string_value(json_object_get(rec, "name"));
                const char *ts = json_string_value(json_object_get(rec, "rejected_at"));
                if (!n || !streq(n, name) || !ts || parse_rfc3339(ts, &at) < 0 ||
                    at / USEC_PER_SEC < not_before / USEC_PER_SEC)
                        continue;
                found = json_pack("{s:i, s:s, s:s, s:O, s:O, s:s}", "version", 1, "id", id, "status", "rejected",
                                  "error", json_object_get(rec, "error") ?: json_null(), "message",
                                  json_object_get(rec, "message") ?: json_null(), "rejected_at", ts);
        }
        closedir(d);
        return found;
}

int controller_status(int results_fd, const char *id, usec_t not_before, bool scan_rejected,
                      ControllerStatus *ret) {
        char path[REQUEST_ID_MAX + 32];
        json_t *j = NULL;
        int r;

        if (!request_id_is_valid(id))
                return -EINVAL;
        *ret = (ControllerStatus){};
        snprintf(path, sizeof(path), "%s/result.json", id);
        r = controller_load_json_at(results_fd, path, RESULT_MAX_BYTES, &j);
        if (r >= 0) {
                *ret = (ControllerStatus){.state = CONTROLLER_FINAL, .result = j};
                return 0;
        }
        snprintf(path, sizeof(path), "%s.state.json", id);
        r = controller_load_json_at(results_fd, path, CONTROLLER_STATE_MAX_BYTES, &j);
        if (r >= 0) {
                const char *s = json_string_value(json_object_get(j, "state"));
                ControllerState st = !s                    ? CONTROLLER_UNKNOWN
                                     : streq(s, "pending") ? CONTROLLER_PENDING
                                     : streq(s, "queued")  ? CONTROLLER_QUEUED
                                     : streq(s, "running") ? CONTROLLER_RUNNING
                                                           : CONTROLLER_UNKNOWN;
                const char *since = json_string_value(json_object_get(j, "since"));
                if (st != CONTROLLER_UNKNOWN && since && strlen(since) < sizeof(ret->since))
                        snprintf(ret->since, sizeof(ret->since), "%s", since);
                json_decref(j);
                ret->state = st;
                return 0;
        }
        if (scan_rejected) {
                j = find_rejection(results_fd, id, not_before);
                if (j)
                        *ret = (ControllerStatus){.state = CONTROLLER_FINAL, .result = j, .anonymous = true};
        }
        return 0;
}

void controller_status_done(ControllerStatus *s) {
        json_decref(s->result);
        s->result = NULL;
}

int controller_watch_open(int results_fd, ControllerWatch *ret, TfwError *e) {
        ControllerWatch w = CONTROLLER_WATCH_NULL;
        char path[64];

        w.fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (w.fd < 0)
                return tfw_error(e, errno, "internal", "inotify: %m");
        snprintf(path, sizeof(path), "/proc/self/fd/%d", results_fd);
        w.results_wd = inotify_add_watch(w.fd, path,
                                         IN_MOVED_TO | IN_CREATE | IN_CLOSE_WRITE | IN_DELETE | IN_ONLYDIR);
        if (w.results_wd < 0) {
                int r = -errno;
                safe_close(w.fd);
                return tfw_error(e, r, "no_results", "cannot watch the results directory: %s", strerror(-r));
        }
        _cleanup_close_ int rfd = openat(results_fd, ".rejected", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rfd >= 0) {
                snprintf(path, sizeof(path), "/proc/self/fd/%d", rfd);
                w.rejected_wd = inotify_add_watch(w.fd, path, IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR);
        }
        *ret = w;
        return 0;
}

int controller_watch_read(ControllerWatch *w) {
        char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
        int mask = 0;

        for (;;) {
                ssize_t n = read(w->fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return mask;
                for (char *p = buf; p < buf + n;) {
                        struct inotify_event *ev = (struct inotify_event *) p;
                        p += sizeof(*ev) + ev->len;
                        if (ev->mask & IN_Q_OVERFLOW)
                                mask |= CONTROLLER_WATCH_CHANGED | CONTROLLER_WATCH_REJECTED;
                        else if (ev->wd == w->results_wd && (ev->mask & IN_IGNORED))
                                return -ENOENT;
                        else if (ev->wd == w->results_wd)
                                mask |= CONTROLLER_WATCH_CHANGED;
                        else if (ev->wd == w->rejected_wd)
                                mask |= CONTROLLER_WATCH_REJECTED;
                }
        }
}

void controller_watch_close(ControllerWatch *w) {
        w->fd = safe_close(w->fd);
        w->results_wd = w->rejected_wd = -1;
}
