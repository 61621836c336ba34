/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/path-util.h"
#include "common/resolve.h"
#include "orchestrator/cancel.h"
#include "orchestrator/finish.h"
#include "orchestrator/inbox.h"
#include "orchestrator/notify.h"
#include "orchestrator/publish.h"
#include "orchestrator/result.h"
#include "orchestrator/store.h"

#define CONTROL_DIR ".tentaflake-worker"

static int ensure_owned_dir(Worker *w, int parent, const char *name, TfwError *e) {
        int fd;

        if (mkdirat(parent, name, 0700) >= 0) {
                fd = openat_child(parent, name, O_RDONLY | O_DIRECTORY, w->use_openat2);
                if (fd >= 0 && fchown(fd, w->config->container_uid, w->config->container_gid) < 0) {
                        int r = -errno;
                        safe_close(fd);
                        return tfw_error(e, r, "inbox", "cannot hand '%s' to the controller: %s", name,
                                         strerror(-r));
                }
        } else if (errno != EEXIST)
                return tfw_error(e, errno, "inbox", "cannot create '%s' in the workspace: %m", name);
        else
                fd = openat_child(parent, name, O_RDONLY | O_DIRECTORY, w->use_openat2);
        if (fd < 0)
                return tfw_error(e, fd, "inbox", "cannot open '%s' in the workspace without following a symlink: %s",
                                 name, strerror(-fd));
        return fd;
}

int inbox_open(Worker *w, TfwError *e) {
        _cleanup_close_ int ws = -EBADF, ctl = -EBADF;
        int fd;

        ws = open_dir_path_nofollow(w->config->workspace, w->use_openat2);
        if (ws < 0)
                return worker_workspace_error(e, "inbox", w->config->workspace, ws);
        ctl = ensure_owned_dir(w, ws, CONTROL_DIR, e);
        if (ctl < 0)
                return ctl;
        fd = ensure_owned_dir(w, ctl, "inbox", e);
        if (fd < 0)
                return fd;
        safe_close(w->inbox_fd);
        w->inbox_fd = fd;
        return 0;
}

int inbox_open_existing(const Worker *w) {
        _cleanup_close_ int ws = open_dir_path_nofollow(w->config->workspace, w->use_openat2);
        if (ws < 0)
                return ws;
        _cleanup_close_ int ctl = openat_child(ws, CONTROL_DIR, O_RDONLY | O_DIRECTORY, w->use_openat2);
        if (ctl < 0)
                return ctl;
        return openat_child(ctl, "inbox", O_RDONLY | O_DIRECTORY, w->use_openat2);
}

bool inbox_holds(const Worker *w, const char *id) {
        char name[REQUEST_ID_MAX + 8];
        _cleanup_close_ int fd = inbox_open_existing(w);
        snprintf(name, sizeof(name), "%s.json", id);
        return fd >= 0 && faccessat(fd, name, F_OK, AT_SYMLINK_NOFOLLOW) >= 0;
}

static const char *type_name(mode_t m) {
        if (S_ISDIR(m))
                return "a directory";
        if (S_ISLNK(m))
                return "a symlink";
        if (S_ISFIFO(m))
                return "a FIFO";
        if (S_ISSOCK(m))
                return "a socket";
        if (S_ISCHR(m) || S_ISBLK(m))
                return "a device";
        return "not a regular file";
}

/* The id an entry name can own: "<id>.json" with a valid id, else NULL. */
static bool name_to_id(const char *name, char id[static REQUEST_ID_MAX + 1]) {
        size_t n = strlen(name);
        if (n <= 5 || n - 5 > REQUEST_ID_MAX || strcmp(name + n - 5, ".json") != 0)
                return false;
        memcpy(id, name, n - 5);
        id[n - 5] = 0;
        return request_id_is_valid(id);
}

/* Remove the entry, but only if it is still the object we looked at. */
static void unlink_entry(Worker *w, const char *name, const struct stat *seen) {
        struct stat now;
        /* Looked at through an O_PATH fd that cannot cross into a mount made meanwhile. */
        _cleanup_close_ int pfd = openat_child_same_mount(w->inbox_fd, name, O_PATH);
        if (pfd < 0 || fstat(pfd, &now) < 0)
                return;
        if (now.st_dev != seen->st_dev || now.st_ino != seen->st_ino)
                return; /* replaced meanwhile: the new entry gets its own turn */
        if (S_ISDIR(now.st_mode))
                (void) rm_rf_at(w->inbox_fd, name);
        else
                (void) unlinkat(w->inbox_fd, name, 0);
}

static json_t *rejection_fields(const char *name, const char *id, const char *sha, const char *code,
                                const char *message) {
        char pname[256];
        /* The name is the controller's bytes: only a printable form goes into JSON. */
        return json_pack("{s:s, s:s?, s:s?, s:s, s:s, s:s}", "name", printable_name(name, pname, sizeof(pname)),
                         "id", id, "request_sha256", sha, "outcome", "rejected", "error", code, "message", message);
}

static void audit_rejection(Worker *w, const char *name, const char *id, const char *sha,
                            const char *code, const char *message) {
        _cleanup_(json_decrefp) json_t *f = rejection_fields(name, id, sha, code, message);
        (void) worker_audit_best_effort(w, "rejected", f);
}

/* A request that owns its id ends rejected: its result, its audit line, its record final. */
static int finish_rejected(Worker *w, RequestRecord *rec, const Request *req, const char *name, const char *code,
                           const char *message, TfwError *e) {
        _cleanup_(json_decrefp) json_t *f = rejection_fields(name, rec->id, rec->sha256, code, message);
        return finish_request(w, rec, req, "rejected", code, message, NULL, &(FinishAudit){"rejected", f}, e);
}

/* Reject an entry: a result under its id when it can own one, else a .rejected/ record.
 * bytes may be NULL (never read). */
static int reject(Worker *w, const char *name, const char *owner_id, const char *bytes, size_t len,
                  const char *code, const char *message, CaptureOutcome *ret, TfwError *e) {
        char sha[SHA256_HEX_SIZE] = "";
        usec_t now = now_realtime();
        int r;

        if (bytes)
                (void) sha256_buffer_hex(bytes, len, sha);

        if (owner_id && bytes) {
                RequestRecord rec = {.state = STATE_FINAL, .action_class = -1, .ending_unrecorded = true}, existing;
                strcpy(rec.id, owner_id);
                strcpy(rec.status, "rejected");
                memcpy(rec.sha256, sha, sizeof(sha));
                int lock = r = store_lock(w->dirs.requests_fd);
                if (r < 0)
                        return tfw_error(e, r, "internal", "cannot lock the request store");
                r = store_capture(w->dirs.requests_fd, &rec, bytes, len, now, &existing, e);
                store_unlock(lock);
                if (r == -EEXIST) {
                        if (streq(existing.sha256, sha)) {
                                *ret = CAPTURE_REPLAYED;
                                return 1; /* captured before a crash; make sure it is published */
                        }
                        /* The id is taken by another request: this one cannot own it. */
                        owner_id = NULL;
                } else if (r < 0)
                        return r;
                else {
                        r = finish_rejected(w, &rec, NULL, name, code, message, e);
                        if (r < 0)
                                return r;
                        worker_say(w, LOG_NOTICE, "request '%s': rejected (%s): %s", owner_id, code, message);
                        *ret = CAPTURE_REJECTED;
                        return 0;
                }
        }
        r = publish_rejected_record(&w->dirs, w->config->container_gid, name, code, message, now, e);
        if (r < 0)
                return r;
        audit_rejection(w, name, NULL, sha[0] ? sha : NULL, code, message);
        {
                char pname[256];
                worker_say(w, LOG_NOTICE, "inbox entry '%s': rejected (%s): %s; recorded in %s/.rejected/",
                           printable_name(name, pname, sizeof(pname)), code, message, w->config->results_dir);
        }
        *ret = CAPTURE_REJECTED_ANON;
        return 0;
}

/* The operator's cue: a journal line with the command to run, and the hook when configured. */
static void say_pending(Worker *w, const Request *req, const RequestRecord *rec) {
        char ts[RFC3339_MAX];
        usec_t expires = rec->submitted_at + (usec_t) w->config->pending_ttl_hours * 3600 * USEC_PER_SEC;
        _cleanup_free_ char *cmd = worker_approve_command(w, req->id, req->sha256);
        const char *cls = action_class_to_string(req->action_class);

        /* The reason is the agent's text: escaped (a newline or "<N>" must not forge a line of the
         * worker's own, an escape sequence must not reach the terminal), and after the command. */
        char why[4 * 256 + 8];
        printable_name(req->reason ? req->reason : "", why, sizeof(why));
        worker_say(w, LOG_NOTICE, "request '%s' (%s) waits for approval until %s; approve with: %s%s%s%s", req->id, cls,
                   format_rfc3339(expires, ts), cmd ? cmd : "approve", req->reason ? "; the agent's reason: '" : "",
                   req->reason ? why : "", req->reason ? "'" : "");
        notify_pending(w, req->id, cls, req->reason, req->sha256);
}

/* Reject an entry and take it out of the inbox (if it is still the object seen). */
static int reject_consumed(Worker *w, const char *name, const char *owner_id, const char *bytes, size_t len,
                           const char *code, const char *message, const struct stat *seen, CaptureOutcome *ret,
                           TfwError *e) {
        int r = reject(w, name, owner_id, bytes, len, code, message, ret, e);
        if (r >= 0)
                unlink_entry(w, name, seen);
        return r;
}

/* The entry looked at without following or crossing anything, then opened: a regular file of
 * its own (one link), within the size bound. Opened: 0 with its descriptor in *ret_fd and its
 * stat in *fst; else *ret_fd stays negative and the value is inbox_capture's (an entry gone
 * meanwhile: 0; one refused: its rejection, consumed where it can be). */
static int capture_open(Worker *w, const char *name, const char *pname, const char *owner_id, int *ret_fd,
                        struct stat *fst, CaptureOutcome *ret, TfwError *e) {
        char msg[1100];
        struct stat st;

        /* Looked at through an O_PATH fd that never crosses into a mount: something mounted
         * over the name (a FUSE file system could block any stat or open that reaches its
         * server; a directory there must never be recursed into) is -EXDEV, atomically. */
        {
                _cleanup_close_ int pfd = openat_child_same_mount(w->inbox_fd, name, O_PATH);
                if (pfd == -ENOENT)
                        return 0;
                if (pfd == -EXDEV) {
                        /* Left in place: it cannot be unlinked while mounted, and nothing behind
                         * it is touched (no stat, no open, no removal). */
                        snprintf(msg, sizeof(msg),
                                 "inbox entry '%.200s' is a mount point; only regular files are accepted", pname);
                        return reject(w, name, NULL, NULL, 0, "not_regular_file", msg, ret, e);
                }
                if (pfd < 0)
                        return tfw_error(e, -pfd, "inbox", "inbox entry '%s': %s", pname, strerror(-pfd));
                if (fstat(pfd, &st) < 0)
                        return tfw_error(e, errno, "inbox", "inbox entry '%s': %m", pname);
        }

        if (!S_ISREG(st.st_mode)) {
                snprintf(msg, sizeof(msg), "inbox entry '%.200s' is %s; only regular files are accepted",
                         pname, type_name(st.st_mode));
                return reject_consumed(w, name, NULL, NULL, 0, "not_regular_file", msg, &st, ret, e);
        }

        _cleanup_close_ int fd = openat_child_same_mount(w->inbox_fd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0) {
                if (fd == -ENOENT)
                        return 0;
                /* ELOOP: a symlink swapped in after the check; ENXIO: a socket; EXDEV: a mount. */
                snprintf(msg, sizeof(msg), "inbox entry '%.200s' changed while it was opened (%s)", pname,
                         strerror(-fd));
                return reject_consumed(w, name, NULL, NULL, 0, "not_regular_file", msg, &st, ret, e);
        }
        if (fstat(fd, fst) < 0)
                return tfw_error(e, errno, "inbox", "inbox entry '%s': %m", pname);
        if (!S_ISREG(fst->st_mode)) {
                snprintf(msg, sizeof(msg), "inbox entry '%.200s' is %s; only regular files are accepted",
                         pname, type_name(fst->st_mode));
                return reject_consumed(w, name, NULL, NULL, 0, "not_regular_file", msg, fst, ret, e);
        }
        if (fst->st_nlink != 1) {
                snprintf(msg, sizeof(msg),
                         "inbox entry '%.200s' has %ju hard links; a request must be a file of its own",
                         pname, (uintmax_t) fst->st_nlink);
                return reject_consumed(w, name, NULL, NULL, 0, "hard_link", msg, fst, ret, e);
        }
        if ((uint64_t) fst->st_size > w->policy.max_request_bytes) {
                snprintf(msg, sizeof(msg), "request is larger than %" PRIu64 " bytes",
                         w->policy.max_request_bytes);
                /* Not read at all; a result under its id still tells the controller why. */
                return reject_consumed(w, name, owner_id, owner_id ? "" : NULL, 0, "too_large", msg, fst, ret, e);
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* A captured request said: in the audit log, then rejected (forbidden), or its first state
 * published (queued, or pending with the approver told). */
static int capture_announce(Worker *w, const Request *req, RequestRecord *rec, ActionPolicy pol, const char *name,
                            CaptureOutcome *ret, TfwError *e) {
        char msg[1100];
        int r;

        _cleanup_(json_decrefp) json_t *argv = json_array();
        for (size_t i = 0; i < req->argc; i++)
                json_array_append_new(argv, json_string(req->argv[i]));
        _cleanup_(json_decrefp) json_t *f =
                json_pack("{s:s, s:s, s:s, s:O, s:s?}", "id", req->id, "request_sha256", req->sha256,
                          "action_class", action_class_to_string(req->action_class), "argv", argv, "cwd", req->cwd);
        (void) worker_audit_best_effort(w, "captured", f);

        if (pol == ACTION_POLICY_REJECT) {
                snprintf(msg, sizeof(msg), "action class 'forbidden' is always rejected");
                r = finish_rejected(w, rec, req, name, "forbidden", msg, e);
                if (r < 0)
                        return r;
                worker_say(w, LOG_NOTICE, "request '%s': rejected (forbidden): %s", req->id, msg);
                *ret = CAPTURE_REJECTED;
        } else {
                r = publish_state(&w->dirs, w->config->container_gid, rec, rec->submitted_at, e);
                if (r < 0)
                        return r;
                _cleanup_(json_decrefp) json_t *g = json_pack("{s:s, s:s, s:s?}", "id", req->id, "action_class",
                                                              action_class_to_string(req->action_class),
                                                              "reason", req->reason);
                if (pol == ACTION_POLICY_APPROVAL) {
                        (void) worker_audit_best_effort(w, "pending", g);
                        say_pending(w, req, rec);
                }
                *ret = pol == ACTION_POLICY_RUN ? CAPTURE_QUEUED : CAPTURE_PENDING;
        }
        return 0;
}

int inbox_capture(Worker *w, const char *name, CaptureOutcome *ret, TfwError *e) {
        char id_buf[REQUEST_ID_MAX + 1], msg[1100];
        const char *owner_id;
        struct stat fst;
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *bytes = NULL;
        _cleanup_request_ Request *req = NULL;
        size_t len = 0;
        TfwError pe = {0};
        int r;

        *ret = CAPTURE_IGNORED;
        /* A controller's cancel is not a request: the daemon takes it (orchestrator/cancel.h). */
        if (name[0] == '.' || !filename_is_valid(name) || cancel_name_to_id(name, NULL, 0))
                return 0;
        /* Messages and records show the name in a printable form: the raw bytes need not be
         * UTF-8, and a message that cannot be JSON would keep the entry from being consumed. */
        char pname[256];
        printable_name(name, pname, sizeof(pname));
        owner_id = name_to_id(name, id_buf) ? id_buf : NULL;
        r = capture_open(w, name, pname, owner_id, &fd, &fst, ret, e);
        if (fd < 0)
                return r;

        r = read_full_fd_bounded(fd, w->policy.max_request_bytes, &bytes, &len);
        if (r == -E2BIG) {
                snprintf(msg, sizeof(msg), "request is larger than %" PRIu64 " bytes",
                         w->policy.max_request_bytes);
                return reject_consumed(w, name, owner_id, owner_id ? "" : NULL, 0, "too_large", msg, &fst, ret, e);
        }
        if (r < 0)
                return tfw_error(e, r, "inbox", "inbox entry '%s': %s", pname, strerror(-r));

        if (!owner_id) {
                snprintf(msg, sizeof(msg), "inbox entry '%.200s' is not named <id>.json with a valid id", pname);
                return reject_consumed(w, name, NULL, bytes, len, "bad_name", msg, &fst, ret, e);
        }

        r = request_parse_buffer(bytes, len, owner_id, &w->policy, &req, &pe);
        if (r < 0) {
                r = reject(w, name, owner_id, bytes, len, pe.code, pe.message, ret, e);
                if (r > 0)
                        r = 0; /* replay of an already published rejection */
                if (r >= 0)
                        unlink_entry(w, name, &fst);
                return r;
        }

        /* Valid: capture under the store lock; the policy decides the first state. */
        ActionPolicy pol = action_class_policy(req->action_class);
        RequestRecord rec = {.action_class = req->action_class}, existing;
        strcpy(rec.id, req->id);
        memcpy(rec.sha256, req->sha256, sizeof(rec.sha256));
        rec.state = pol == ACTION_POLICY_RUN ? STATE_QUEUED : pol == ACTION_POLICY_APPROVAL ? STATE_PENDING : STATE_FINAL;
        if (pol == ACTION_POLICY_REJECT) {
                strcpy(rec.status, "rejected");
                rec.ending_unrecorded = true;
        }

        int lock = r = store_lock(w->dirs.requests_fd);
        if (r < 0)
                return tfw_error(e, r, "internal", "cannot lock the request store");
        r = store_capture(w->dirs.requests_fd, &rec, bytes, len, now_realtime(), &existing, e);
        store_unlock(lock);
        if (r == -EEXIST) {
                if (streq(existing.sha256, req->sha256)) {
                        *ret = CAPTURE_REPLAYED;
                        unlink_entry(w, name, &fst);
                        return 0;
                }
                snprintf(msg, sizeof(msg), "id '%s' is already used by another request within retention", req->id);
                return reject_consumed(w, name, NULL, bytes, len, "duplicate_id", msg, &fst, ret, e);
        }
        if (r < 0)
                return r;

        r = capture_announce(w, req, &rec, pol, name, ret, e);
        if (r < 0)
                return r;
        unlink_entry(w, name, &fst);
        return 0;
}

int inbox_scan(Worker *w, TfwError *e) {
        int handled = 0, first_error = 0;
        _cleanup_closedir_ DIR *d = opendir_fd(w->inbox_fd);
        if (!d)
                return tfw_error(e, errno, "inbox", "cannot read the inbox: %m");
        struct dirent *de;
        while ((de = readdir(d))) {
                CaptureOutcome o;
                TfwError one = {0};
                if (de->d_name[0] == '.')
                        continue;
                /* One entry the worker cannot handle now must not stop the others. */
                int r = inbox_capture(w, de->d_name, &o, &one);
                if (r < 0) {
                        if (!first_error) {
                                first_error = r;
                                if (e)
                                        *e = one;
                        }
                        continue;
                }
                handled += o != CAPTURE_IGNORED;
        }
        return first_error < 0 ? first_error : handled;
}
