/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "controller/cancel.h"
#include "parser/request.h"

#define CANCEL_SUFFIX ".cancel"

/* The empty cancel file, whole, then renamed to its name without replacing one. */
static int write_cancel(const ControllerSite *s, const char *id, TfwError *e) {
        char tmp[REQUEST_ID_MAX + 32], name[REQUEST_ID_MAX + 16];
        snprintf(tmp, sizeof(tmp), ".%s%s.%d.tmp", id, CANCEL_SUFFIX, (int) getpid());
        snprintf(name, sizeof(name), "%s%s", id, CANCEL_SUFFIX);
        (void) unlinkat(s->inbox_fd, tmp, 0);
        _cleanup_close_ int fd = openat(s->inbox_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return tfw_error(e, errno, "internal", "cancel '%s': cannot write into the inbox: %m", id);
        int r = renameat2(s->inbox_fd, tmp, s->inbox_fd, name, RENAME_NOREPLACE) < 0 ? -errno : 0;
        (void) unlinkat(s->inbox_fd, tmp, 0);
        if (r == -EEXIST)
                return tfw_error(e, EEXIST, "cancel_waiting",
                                 "cancel '%s': a cancel of it is already in the inbox, waiting for the worker", id);
        if (r < 0)
                return tfw_error(e, -r, "internal", "cancel '%s': cannot write into the inbox: %s", id, strerror(-r));
        return 0;
}

int controller_cancel_send(const ControllerSite *s, const char *id, usec_t *ret_sent_at, TfwError *e) {
        ControllerStatus st = {};
        if (!request_id_is_valid(id))
                return tfw_error(e, EINVAL, "bad_id", "cancel '%.80s': not a request id ([a-z0-9][a-z0-9_-]{0,63})", id);
        int r = controller_site_need_results(s, e);
        if (r < 0)
                return r;
        r = controller_status(s->results_fd, id, 0, false, &st);
        if (r < 0)
                return tfw_error(e, -r, "internal", "cancel '%s': cannot look it up: %s", id, strerror(-r));
        if (st.state == CONTROLLER_FINAL) {
                const char *status = json_string_value(json_object_get(st.result, "status"));
                r = tfw_error(e, EALREADY, "already_ended", "cancel '%s': the request already ended as %s; nothing was "
                              "cancelled (its result: '%s/%s/')", id, status ? status : "?", s->results_dir, id);
                controller_status_done(&st);
                return r;
        }
        if (st.state == CONTROLLER_UNKNOWN && !controller_inbox_holds(s, id))
                return tfw_error(e, ENOENT, "not_found", "cancel '%s': this workspace has no request with that id "
                                 "(none in its inbox, none in '%s')", id, s->results_dir);
        usec_t now = now_realtime();
        r = write_cancel(s, id, e);
        if (r >= 0)
                *ret_sent_at = now;
        return r;
}

static int ms_until(usec_t deadline, usec_t now) {
        return deadline <= now ? 0 : (int) MIN((deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC, (usec_t) 60000);
}

/* The .rejected/ records of id's cancel, by name: one made after this set was taken is the
 * worker's answer to this cancel (a stamp has whole seconds: an earlier refusal in the same
 * second must not pass for it). Bounded: a set of at most REFUSALS_MAX names. */
#define REFUSALS_MAX 10000
static json_t *refusal_names(int results_fd, const char *id) {
        char prefix[REQUEST_ID_MAX + 16];
        json_t *set = json_object();
        _cleanup_close_ int dfd = openat(results_fd, ".rejected", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_closedir_ DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (d)
                TAKE_FD(dfd);
        snprintf(prefix, sizeof(prefix), "%s%s-", id, CANCEL_SUFFIX);
        for (struct dirent *de; set && d && (de = readdir(d)) && json_object_size(set) < REFUSALS_MAX;)
                if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
                        json_object_set_new(set, de->d_name, json_true());
        return set;
}

static json_t *new_refusal(int results_fd, const char *id, const json_t *before) {
        _cleanup_(json_decrefp) json_t *now = refusal_names(results_fd, id);
        const char *name;
        json_t *v;
        json_object_foreach(now, name, v) {
                if (json_object_get(before, name))
                        continue;
                _cleanup_close_ int dfd = openat(results_fd, ".rejected", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                _cleanup_close_ int fd = dfd >= 0 ? openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) : -EBADF;
                _cleanup_free_ char *buf = NULL;
                size_t len;
                json_t *rec = NULL;
                if (fd >= 0 && read_full_fd_bounded(fd, 64 * 1024, &buf, &len) >= 0 &&
                    json_load_object_strict(buf, len, name, &rec, NULL) >= 0)
                        return rec;
                /* Not whole yet (written by rename, so it is) or not the worker's: looked at again. */
        }
        return NULL;
}

int controller_cancel_wait(const ControllerSite *s, ControllerWatch *w, const char *id, const json_t *before,
                           unsigned timeout_s, json_t **ret, TfwError *e) {
        usec_t give_up_at = now_monotonic() + (usec_t) timeout_s * USEC_PER_SEC;
        for (;;) {
                ControllerStatus st = {};
                int r = controller_status(s->results_fd, id, 0, false, &st);
                if (r < 0)
                        return tfw_error(e, -r, "internal", "cancel '%s': cannot look it up: %s", id, strerror(-r));
                if (st.state == CONTROLLER_FINAL) {
                        *ret = st.result;
                        return 1;
                }
                _cleanup_(json_decrefp) json_t *refusal = new_refusal(s->results_fd, id, before);
                if (refusal) {
                        const char *code = json_string_value(json_object_get(refusal, "error"));
                        const char *msg = json_string_value(json_object_get(refusal, "message"));
                        return tfw_error(e, EPERM, "cancel_refused", "%s (the worker's %s)",
                                         msg ? msg : "the worker refused the cancel", code ? code : "refusal");
                }
                usec_t now = now_monotonic();
                if (now >= give_up_at)
                        return 0;
                struct pollfd p = {.fd = w->fd, .events = POLLIN};
                if (poll(&p, 1, ms_until(give_up_at, now)) < 0 && errno != EINTR)
                        return tfw_error(e, errno, "internal", "poll: %m");
                if (controller_watch_read(w) < 0)
                        return tfw_error(e, ENOENT, "no_results", "the results directory '%s' went away while waiting for '%s'",
                                         s->results_dir, id);
        }
}

int controller_cancel(const char *workspace, const char *results, const char *id, unsigned timeout_s, bool json,
                      FILE *out, FILE *err, int *ret_status, TfwError *e) {
        _cleanup_(controller_site_close) ControllerSite site = CONTROLLER_SITE_NULL;
        _cleanup_(controller_watch_close) ControllerWatch watch = CONTROLLER_WATCH_NULL;
        usec_t sent_at;
        int r = controller_site_open(workspace, results, &site, e);
        if (r < 0)
                return r;
        r = controller_site_need_results(&site, e);
        if (r < 0)
                return r;
        /* Watch before the cancel exists: its result cannot slip in unseen. */
        r = controller_watch_open(site.results_fd, &watch, e);
        if (r < 0)
                return r;
        _cleanup_(json_decrefp) json_t *before = refusal_names(site.results_fd, id);
        r = controller_cancel_send(&site, id, &sent_at, e);
        if (r < 0)
                return r;
        if (!timeout_s)
                timeout_s = CONTROLLER_CANCEL_WAIT_DEFAULT;
        _cleanup_(json_decrefp) json_t *res = NULL;
        r = controller_cancel_wait(&site, &watch, id, before, timeout_s, &res, e);
        if (r < 0)
                return r;
        if (r == 0) {
                fprintf(err, "submit --cancel '%s': the cancel is written, but no result came within %u s: follow it in "
                             "'%s/%s.state.json' and '%s/%s/'\n", id, timeout_s, site.results_dir, id, site.results_dir, id);
                *ret_status = 1;
                return 0;
        }
        const char *status = json_string_value(json_object_get(res, "status"));
        const char *code = json_string_value(json_object_get(res, "error"));
        const char *msg = json_string_value(json_object_get(res, "message"));
        bool cancelled = status && streq(status, "cancelled");
        if (json) {
                _cleanup_free_ char *txt = json_dumps(res, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                if (txt)
                        fprintf(out, "%s\n", txt);
        }
        if (cancelled)
                fprintf(err, "submit --cancel '%s': cancelled: %s: %s\n", id, code ? code : "?", msg ? msg : "");
        else
                fprintf(err, "submit --cancel '%s': not cancelled: the request ended first, as %s%s%s\n", id,
                        status ? status : "?", msg ? ": " : "", msg ? msg : "");
        *ret_status = cancelled ? 0 : 1;
        return 0;
}

json_t *controller_cancel_refusals(const ControllerSite *s, const char *id) {
        return refusal_names(s->results_fd, id);
}

json_t *controller_cancel_refusal(const ControllerSite *s, const char *id, const json_t *before) {
        return new_refusal(s->results_fd, id, before);
}
