/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "capsule/walls.h"
#include "common/json-util.h"
#include "common/term-escape.h"
#include "controller/apply.h"
#include "controller/live.h"
#include "controller/no-worker.h"
#include "controller/outcome.h"
#include "controller/request.h"
#include "controller/site.h"
#include "controller/status.h"
#include "controller/submit.h"

#define FRESH_ID_TRIES 8
#define ARTIFACTS_LISTED_MAX 100000
#define LIVE_CHUNK 65536

/* Is id already known to the worker, as far as this client can see? */
static bool id_in_use(const ControllerSite *s, const char *id) {
        ControllerStatus st;
        if (s->results_fd < 0 || controller_status(s->results_fd, id, 0, false, &st) < 0)
                return false;
        bool used = st.state != CONTROLLER_UNKNOWN || faccessat(s->results_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
        controller_status_done(&st);
        return used;
}

int controller_submit_request(const ControllerSite *site, const json_t *fields, const char *id_prefix,
                              ControllerRequest *ret, usec_t *ret_submitted_at, TfwError *e) {
        ControllerRequest req = {};
        _cleanup_(json_decrefp) json_t *with_cwd = NULL;
        int r;

        /* The caller's directory, when the fields name none (contract section 9). */
        json_t *c = json_object_get(fields, "cwd");
        if (site->cwd && (!c || json_is_null(c))) {
                json_t *v = json_string(site->cwd);
                if (!v)
                        return tfw_error(e, EILSEQ, "bad_cwd",
                                         "the current directory's path below the workspace is not UTF-8: "
                                         "a request cannot name it (run from another directory)");
                with_cwd = json_deep_copy(fields);
                if (!with_cwd || json_object_set_new(with_cwd, "cwd", v) < 0)
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
                fields = with_cwd;
        }
        for (unsigned attempt = 0;; attempt++) {
                controller_request_done(&req);
                r = controller_request_build(fields, &site->policy, id_prefix, &req, e);
                if (r < 0) {
                        if (r != -ENOMEM)
                                tfw_error_prefix(e, "refused, as the worker would: ");
                        return r;
                }
                usec_t now = now_realtime();
                if (id_in_use(site, req.id))
                        r = tfw_error(e, EEXIST, "duplicate_id", "id '%s' is already used within retention (see '%s/%s')",
                                      req.id, site->results_dir, req.id);
                else
                        r = controller_request_write(site->inbox_fd, &req, e);
                if (r >= 0) {
                        *ret = req;
                        *ret_submitted_at = now;
                        return 0;
                }
                if (r != -EEXIST || !req.id_generated || attempt + 1 >= FRESH_ID_TRIES) {
                        controller_request_done(&req);
                        return r;
                }
        }
}

static json_int_t count_of(const json_t *c, const char *key) {
        json_t *v = json_object_get(c, key);
        return json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
}

/* Nothing a job changes is lost without a word: how many paths it changed, and where they are
 * (the worker never writes the workspace). */
static void print_changes(const ControllerSite *s, const char *id, const json_t *res, FILE *err) {
        const json_t *c = json_object_get(res, "changes");
        const char *code = json_string_value(json_object_get(c, "error"));
        if (!json_is_object(c))
                return;
        if (code) {
                const char *msg = json_string_value(json_object_get(c, "message"));
                _cleanup_free_ char *shown = msg ? term_escape_strdup(msg, TERM_ESCAPE_LINE) : NULL;
                fprintf(err, "submit '%s': the job's changes could not be taken: %s%s%s\n", id, code, shown ? ": " : "",
                        shown ? shown : "");
                return;
        }
        json_int_t a = count_of(c, "added"), m = count_of(c, "modified"), d = count_of(c, "deleted"),
                   dirs = count_of(c, "directories"), refused = count_of(c, "refused");
        if (a + m + d + dirs + refused == 0)
                return;
        fprintf(err, "submit '%s': the job changed %lld path(s) of /work: %lld added, %lld modified, %lld deleted, "
                     "%lld director%s made, %lld refused%s; the workspace is unchanged: the new files are in "
                     "'%s/%s/changes/', all of it listed in '%s/%s/changes.json'; apply them with "
                     "'tentaflake-worker apply %s' (or submit --apply)\n",
                id, (long long) (a + m + d + dirs + refused), (long long) a, (long long) m, (long long) d, (long long) dirs,
                dirs == 1 ? "y" : "ies", (long long) refused,
                json_is_true(json_object_get(c, "truncated")) ? " (incomplete: the list stops at its bound)" : "",
                s->results_dir, id, s->results_dir, id, id);
}

/* The walls the job met (capsule/walls.h), one line each, last: what the agent reads before it
 * decides what to try next. */
static void print_walls(const char *id, const json_t *res, FILE *err) {
        size_t i;
        json_t *el;
        char line[1024];
        json_array_foreach(json_object_get(res, "walls"), i, el)
                if (walls_sentence(el, line, sizeof(line)))
                        fprintf(err, "submit '%s': %s\n", id, line);
}

static void print_outcome(const ControllerSite *s, const char *id, const json_t *res, bool anonymous,
                          const char *unlisted, FILE *err) {
        const char *status = json_string_value(json_object_get(res, "status"));
        const char *code = json_string_value(json_object_get(res, "error"));
        const char *msg = json_string_value(json_object_get(res, "message"));

        if (!anonymous) {
                json_t *paths = NULL;
                bool cut = false;
                if (controller_artifacts(s->results_fd, id, ARTIFACTS_LISTED_MAX, &paths, &cut) >= 0) {
                        size_t i;
                        json_t *p;
                        json_array_foreach(paths, i, p) {
                                if (streq_ptr(json_string_value(p), unlisted))
                                        continue;
                                /* Names the job chose (the writer refuses controls; shown escaped whatever). */
                                _cleanup_free_ char *name = term_escape_strdup(json_string_value(p), TERM_ESCAPE_LINE);
                                fprintf(err, "%s/%s/artifacts/%s\n", s->results_dir, id, name ? name : "?");
                        }
                        if (cut)
                                fprintf(err, "submit '%s': more artifacts in '%s/%s/artifacts/' than listed\n", id,
                                        s->results_dir, id);
                        json_decref(paths);
                }
                print_changes(s, id, res, err);
        }
        /* succeeded and failed speak through the exit status; every other ending says why. */
        if (!status || (!streq(status, "succeeded") && !streq(status, "failed"))) {
                _cleanup_free_ char *shown = msg ? term_escape_strdup(msg, TERM_ESCAPE_LINE) : NULL;
                fprintf(err, "submit '%s': %s%s%s%s%s\n", id, status ? status : "ended without a status", code ? ": " : "",
                        code ? code : "", shown ? ": " : "", shown ? shown : "");
        }
        print_walls(id, res, err);
}

/* --apply: the job's changeset into the workspace, when the job ended by itself and left one. */
static void submit_apply(const ControllerSite *s, const char *id, const json_t *res, FILE *out, FILE *err, int *status) {
        const char *st = json_string_value(json_object_get(res, "status"));
        const json_t *c = json_object_get(res, "changes");
        if (!st || (!streq(st, "succeeded") && !streq(st, "failed"))) {
                fprintf(err, "submit '%s': nothing applied: the job did not end by itself (%s)\n", id, st ? st : "?");
                return;
        }
        if (!json_is_object(c)) {
                fprintf(err, "submit '%s': nothing applied: the job has no changeset\n", id);
                *status = 125;
                return;
        }
        if (!json_is_string(json_object_get(c, "error")) && !json_is_true(json_object_get(c, "truncated")) &&
            count_of(c, "added") + count_of(c, "modified") + count_of(c, "deleted") + count_of(c, "directories") +
                            count_of(c, "refused") == 0)
                return; /* nothing changed: nothing to apply or say (shell runs each command so) */
        ApplyOptions ao = { .workspace = s->workspace, .results = s->results_dir, .id = id };
        TfwError e = {};
        if (controller_apply(&ao, out, err, &e) < 0) {
                fprintf(err, "submit '%s': not applied: %s\n", id, e.message);
                *status = 125;
        }
}

/* Where the request is, once submit stops waiting for it without its result. */
static void say_gave_up(const ControllerSite *s, const SubmitOptions *o, const char *id, ControllerState st, FILE *err) {
        const char *where = st == CONTROLLER_PENDING ? "pending: it waits for an operator"
                            : st == CONTROLLER_QUEUED  ? "queued"
                            : st == CONTROLLER_RUNNING ? "running"
                            : controller_request_taken(s, id, st) ? "taken by the worker"
                                                                  : "still in the inbox: no worker has taken it";
        fprintf(err, "submit '%s': no result after %u s (--wait-timeout): the request is %s. It stays in the worker's "
                     "hands (giving up does not withdraw it): follow it in '%s/%s.state.json' (once a worker has taken "
                     "it) and '%s/%s/' (when it ends)\n",
                id, o->wait_timeout, where, s->results_dir, id, s->results_dir, id);
}

/* Once, when no worker has taken the request in time (controller/no-worker.h). */
static void say_no_worker(const ControllerSite *s, const SubmitOptions *o, const char *id, FILE *err) {
        _cleanup_free_ char *words = controller_no_worker_words(s, id);
        char bound[96];
        if (o->wait_timeout)
                snprintf(bound, sizeof(bound), "up to --wait-timeout %u s", o->wait_timeout);
        else
                snprintf(bound, sizeof(bound), "without a bound (--wait-timeout sets one)");
        fprintf(err, "submit '%s': %s Still waiting, %s.\n", id, words ? words : "no worker has taken it.", bound);
        fflush(err);
}

static int ms_until(usec_t deadline, usec_t now) {
        if (deadline <= now)
                return 0;
        usec_t ms = (deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
        return ms > INT32_MAX ? INT32_MAX : (int) ms;
}

/* What the job wrote since the last look, to out (controller/live.h); NULL live: not followed. */
static void print_live(const ControllerSite *site, const char *id, ControllerWatch *watch, LiveFollow *live,
                       FILE *out) {
        char buf[LIVE_CHUNK];
        size_t n;
        if (!live)
                return;
        do {
                if (live_follow_next(live, site->results_fd, id, watch->fd, buf, sizeof(buf), now_monotonic(), &n) < 0)
                        return; /* not readable: the rest comes from job.log at the end */
                if (n && (fwrite(buf, 1, n, out) != n || fflush(out) != 0))
                        return;
        } while (n > 0); /* until nothing is due: no event may come for what is already there */
}

/* Wait with inotify until the request is final (1, *ret its status) or wait_timeout is over
 * (0, said on err); saying once that it waits for an operator, and once that no worker took it;
 * printing the job's output to out as it comes when live is given. */
static int submit_wait(const SubmitOptions *o, const ControllerSite *site, ControllerWatch *watch,
                       const ControllerRequest *req, usec_t submitted_at, LiveFollow *live, FILE *out, FILE *err,
                       ControllerStatus *ret, TfwError *e) {
        usec_t start = now_monotonic(), no_worker_at = start + CONTROLLER_NO_WORKER_SECONDS * USEC_PER_SEC;
        usec_t give_up_at = o->wait_timeout ? start + (usec_t) o->wait_timeout * USEC_PER_SEC : 0;
        bool said_pending = false, looked_taken = false, scan_rejected = true;
        int r;

        for (;;) {
                ControllerStatus st = {};
                r = controller_status(site->results_fd, req->id, submitted_at, scan_rejected, &st);
                if (r < 0)
                        return tfw_error(e, r, "internal", "cannot look up '%s': %s", req->id, strerror(-r));
                if (st.state == CONTROLLER_FINAL) {
                        *ret = st;
                        return 1;
                }
                print_live(site, req->id, watch, live, out);
                if (st.state == CONTROLLER_PENDING && !said_pending) {
                        _cleanup_free_ char *cmd = controller_approve_command(site, req->id, req->sha256);
                        fprintf(err, "submit '%s': pending: an operator must approve it; as root: %s\n", req->id,
                                cmd ? cmd : "approve");
                        fflush(err);
                        said_pending = true;
                }
                usec_t now = now_monotonic();
                if (!looked_taken && now >= no_worker_at) {
                        /* Looked at once: a request a worker took stays taken. */
                        if (!controller_request_taken(site, req->id, st.state))
                                say_no_worker(site, o, req->id, err);
                        looked_taken = true;
                }
                if (give_up_at && now >= give_up_at) {
                        say_gave_up(site, o, req->id, st.state, err);
                        return 0;
                }
                int timeout = -1;
                if (!looked_taken)
                        timeout = ms_until(no_worker_at, now);
                if (give_up_at && (timeout < 0 || ms_until(give_up_at, now) < timeout))
                        timeout = ms_until(give_up_at, now);
                int due = live ? live_follow_due_ms(live, now) : -1;
                if (due >= 0 && (timeout < 0 || due < timeout))
                        timeout = due;
                struct pollfd p[2] = {{.fd = watch->fd, .events = POLLIN}, {.fd = o->stop_fd ? *o->stop_fd : -1, .events = POLLIN}};
                if (poll(p, 2, timeout) < 0 && errno != EINTR)
                        return tfw_error(e, errno, "internal", "poll: %m");
                if (p[1].revents & POLLIN)
                        return tfw_error(e, EINTR, "interrupted", "'%s': stopped waiting (a signal)", req->id);
                int m = controller_watch_read(watch);
                if (m < 0)
                        return tfw_error(e, ENOENT, "no_results", "the results directory '%s' went away while waiting for '%s'",
                                         site->results_dir, req->id);
                scan_rejected = m & CONTROLLER_WATCH_REJECTED;
        }
}

/* --attach: id must name a request of this workspace (its state or result in this results
 * directory, or its file in this inbox): another workspace's are in neither. Followed as submit
 * follows its own from here on. */
static int attach_request(const ControllerSite *site, const char *id, ControllerRequest *ret, TfwError *e) {
        ControllerStatus st = {};
        if (!request_id_is_valid(id))
                return tfw_error(e, EINVAL, "bad_id", "attach '%.80s': not a request id ([a-z0-9][a-z0-9_-]{0,63})", id);
        int r = controller_status(site->results_fd, id, 0, false, &st);
        if (r < 0)
                return tfw_error(e, -r, "internal", "attach '%s': cannot look it up: %s", id, strerror(-r));
        bool known = st.state != CONTROLLER_UNKNOWN || controller_inbox_holds(site, id);
        controller_status_done(&st);
        if (!known)
                return tfw_error(e, ENOENT, "not_found", "attach '%s': this workspace has no request with that id "
                                 "(none in its inbox, none in '%s')", id, site->results_dir);
        *ret = (ControllerRequest) {};
        snprintf(ret->id, sizeof(ret->id), "%s", id);
        snprintf(ret->sha256, sizeof(ret->sha256), "<sha256>"); /* an operator's show prints it */
        return 0;
}

int controller_submit(const SubmitOptions *o, FILE *out, FILE *err, int *ret_status, TfwError *e) {
        _cleanup_(controller_site_close) ControllerSite site = CONTROLLER_SITE_NULL;
        _cleanup_(controller_request_done) ControllerRequest req = {};
        _cleanup_(controller_watch_close) ControllerWatch watch = CONTROLLER_WATCH_NULL;
        int r;

        r = controller_site_open(o->workspace, o->results, &site, e);
        if (r < 0)
                return r;
        if (o->wait) {
                r = controller_site_need_results(&site, e);
                if (r < 0)
                        return r;
                /* Watch before the request exists: its result cannot slip in unseen. */
                r = controller_watch_open(site.results_fd, &watch, e);
                if (r < 0)
                        return r;
        }

        usec_t submitted_at = 0;
        r = o->attach ? attach_request(&site, o->attach, &req, e)
                      : controller_submit_request(&site, o->fields, "sub", &req, &submitted_at, e);
        if (r < 0)
                return r;
        if (!o->wait) {
                fprintf(out, "%s\n", req.id);
                *ret_status = 0;
                return 0;
        }

        ControllerStatus st = {};
        _cleanup_(live_follow_done) LiveFollow live = LIVE_FOLLOW_NULL;
        r = submit_wait(o, &site, &watch, &req, submitted_at, o->json ? NULL : &live, out, err, &st, e);
        if (r <= 0) {
                *ret_status = CONTROLLER_EXIT_NOT_RUN;
                return r;
        }

        _cleanup_(json_decrefp) json_t *res = st.result;
        if (o->json) {
                /* On a terminal, every non-ASCII character as \uXXXX: jansson escapes only C0, and a
                 * C1 or bidi control in a string the job influenced would act on the terminal. */
                size_t ascii = isatty(fileno(out)) ? JSON_ENSURE_ASCII : 0;
                _cleanup_free_ char *s = json_dumps(res, JSON_INDENT(2) | JSON_PRESERVE_ORDER | ascii);
                if (s)
                        fprintf(out, "%s\n", s);
        } else {
                fflush(out);
                if (!st.anonymous && (r = controller_log_copy(site.results_fd, req.id, live.offset, out)) < 0)
                        fprintf(err, "submit '%s': cannot read its log: %s\n", req.id, strerror(-r));
                print_outcome(&site, req.id, res, st.anonymous, o->unlisted_artifact, err);
        }
        *ret_status = controller_exit_status(res);
        if (o->apply && !st.anonymous)
                submit_apply(&site, req.id, res, out, err, ret_status);
        return 0;
}
