/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "approve/report.h"
#include "capsule/walls.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/term-escape.h"
#include "orchestrator/inbox.h"
#include "orchestrator/publish.h"
#include "orchestrator/store.h"

static const char *jstr(json_t *o, const char *k) {
        json_t *v = json_object_get(o, k);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

void report_print_summary(json_t *res, FILE *out) {
        json_t *ec = json_object_get(res, "exit_code"), *sig = json_object_get(res, "signal");
        fprintf(out, "status: %s", jstr(res, "status") ? jstr(res, "status") : "?");
        if (json_is_integer(ec))
                fprintf(out, ", exit code %" JSON_INTEGER_FORMAT, json_integer_value(ec));
        if (json_is_integer(sig))
                fprintf(out, ", signal %" JSON_INTEGER_FORMAT, json_integer_value(sig));
        if (jstr(res, "error"))
                fprintf(out, ", error %s", jstr(res, "error"));
        fputc('\n', out);
        if (jstr(res, "message")) {
                _cleanup_free_ char *m = term_escape_strdup(jstr(res, "message"), TERM_ESCAPE_LINE);
                fprintf(out, "message: %s\n", m ? m : "?");
        }
        size_t i;
        json_t *el;
        char line[1024];
        json_array_foreach(json_object_get(res, "walls"), i, el)
                if (walls_sentence(el, line, sizeof(line)))
                        fprintf(out, "wall: %s\n", line);
}

static json_t *record_json(const RequestRecord *r) {
        char a[RFC3339_MAX], b[RFC3339_MAX];
        return json_pack("{s:s, s:s, s:s?, s:s?, s:s, s:s, s:I, s:s?, s:s?}", "id", r->id, "state",
                         request_state_to_string(r->state), "status", r->status[0] ? r->status : NULL,
                         "action_class", r->action_class >= 0 ? action_class_to_string(r->action_class) : NULL,
                         "request_sha256", r->sha256, "submitted_at", format_rfc3339(r->submitted_at, a),
                         "seq", (json_int_t) r->seq, "decision", r->decision[0] ? r->decision : NULL,
                         "decided_at", r->decided_at ? format_rfc3339(r->decided_at, b) : NULL);
}

static json_t *report_or_null(Worker *w, const char *name) {
        json_t *j;
        return worker_daemon_report(w->dirs.state_fd, name, &j) >= 0 && j ? j : json_null();
}

/* Requests waiting in the inbox, not taken yet: by id and time only (their bytes are the agent's,
 * read by the worker when it takes them, never here). Only names a request can have
 * (<id>.json) are shown, so that an agent's file name cannot pass for a row of the list; the
 * others are counted. */
typedef struct InboxEntry {
        char id[REQUEST_ID_MAX + 1];
        usec_t mtime;
} InboxEntry;

#define INBOX_LISTED_MAX 20

typedef struct InboxView {
        InboxEntry v[INBOX_LISTED_MAX];
        size_t n, more, other; /* shown; more valid ones; names no request can have */
} InboxView;

static void inbox_view(const Worker *w, InboxView *ret) {
        _cleanup_close_ int fd = inbox_open_existing(w);
        *ret = (InboxView){};
        if (fd < 0)
                return;
        _cleanup_closedir_ DIR *d = opendir_fd(fd);
        for (struct dirent *de; d && (de = readdir(d));) {
                struct stat st;
                size_t len = strlen(de->d_name);
                if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                char id[REQUEST_ID_MAX + 1];
                bool named = len > 5 && len - 5 <= REQUEST_ID_MAX && streq(de->d_name + len - 5, ".json");
                if (named)
                        snprintf(id, sizeof(id), "%.*s", (int) (len - 5), de->d_name);
                if (!named || !request_id_is_valid(id) || !S_ISREG(st.st_mode)) {
                        ret->other++;
                        continue;
                }
                if (ret->n == INBOX_LISTED_MAX) {
                        ret->more++;
                        continue;
                }
                snprintf(ret->v[ret->n].id, sizeof(ret->v[ret->n].id), "%s", id);
                ret->v[ret->n++].mtime = (usec_t) st.st_mtim.tv_sec * USEC_PER_SEC + (usec_t) st.st_mtim.tv_nsec / 1000;
        }
}

static void list_inbox(const Worker *w, int width, FILE *out) {
        InboxView iv;
        inbox_view(w, &iv);
        for (size_t i = 0; i < iv.n; i++) {
                char ts[RFC3339_MAX];
                fprintf(out, "%-*s %-9s %-20s %-20s %s\n", width, iv.v[i].id, "inbox", "-",
                        format_rfc3339(iv.v[i].mtime, ts), "(not taken yet)");
        }
        if (iv.more || iv.other)
                fprintf(out, "(in the inbox also: %zu more request(s) not taken yet, %zu entr%s no request can be)\n",
                        iv.more, iv.other, iv.other == 1 ? "y" : "ies");
}

static json_t *inbox_json(const Worker *w) {
        InboxView iv;
        inbox_view(w, &iv);
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < iv.n; i++) {
                char ts[RFC3339_MAX];
                json_array_append_new(arr, json_pack("{s:s, s:s}", "id", iv.v[i].id, "since",
                                                     format_rfc3339(iv.v[i].mtime, ts)));
        }
        return json_pack("{s:o, s:I, s:I}", "entries", arr, "more", (json_int_t) iv.more, "other",
                         (json_int_t) iv.other);
}

int report_list(Worker *w, bool all, bool json, FILE *out, TfwError *e) {
        _cleanup_free_ RequestRecord *list = NULL;
        size_t n = 0;
        int r = store_list(w->dirs.requests_fd, &list, &n, e);
        if (r < 0)
                return r;

        if (json) {
                _cleanup_(json_decrefp) json_t *arr = json_array();
                for (size_t i = 0; i < n; i++)
                        if (all || list[i].state != STATE_FINAL)
                                json_array_append_new(arr, record_json(&list[i]));
                /* What the daemon last reported of the memory it keeps between jobs (it lives in
                 * the daemon's namespace, which this process cannot see). */
                _cleanup_(json_decrefp) json_t *o = json_pack("{s:O, s:o, s:o, s:o}", "requests", arr, "inbox",
                                                              inbox_json(w), "cache",
                                                              report_or_null(w, "cache.json"), "generation_store",
                                                              report_or_null(w, "store.json"));
                _cleanup_free_ char *s = o ? json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
                if (!s)
                        return tfw_error(e, ENOMEM, "internal", "out of memory");
                fprintf(out, "%s\n", s);
                return 0;
        }
        int width = 29; /* the ids submit makes */
        for (size_t i = 0; i < n; i++)
                if (all || list[i].state != STATE_FINAL)
                        width = MAX(width, (int) strlen(list[i].id));
        fprintf(out, "%-*s %-9s %-20s %-20s %s\n", width, "ID", "STATE", "CLASS", "SUBMITTED", "SHA256");
        for (size_t i = 0; i < n; i++) {
                RequestRecord *rec = &list[i];
                char ts[RFC3339_MAX];
                if (!all && rec->state == STATE_FINAL)
                        continue;
                fprintf(out, "%-*s %-9s %-20s %-20s %.16s\n", width, rec->id,
                        rec->state == STATE_FINAL ? rec->status : request_state_to_string(rec->state),
                        rec->action_class >= 0 ? action_class_to_string(rec->action_class) : "-",
                        format_rfc3339(rec->submitted_at, ts), rec->sha256);
        }
        list_inbox(w, width, out);
        return 0;
}

/* What a pending job will start from at its paths, read-only: the build cache as the daemon
 * last reported it (cache.json); the job takes the version current when it runs. */
static void pending_cache(Worker *w, FILE *out) {
        if (!w->config->cache.paths)
                return;
        _cleanup_(json_decrefp) json_t *c = report_or_null(w, "cache.json");
        const char *tree = jstr(c, "tree");
        json_t *entries = json_object_get(c, "entries");
        if (tree && json_is_integer(entries))
                fprintf(out, "build cache:  tree %s (%" JSON_INTEGER_FORMAT " entries), read-only: the job starts from the "
                             "cache current when it runs and keeps nothing of it\n",
                        tree, json_integer_value(entries));
        else
                fprintf(out, "build cache:  empty, read-only: the job starts from the cache current when it runs and keeps "
                             "nothing of it\n");
}

int report_show(Worker *w, const char *id, bool json, FILE *out, TfwError *e) {
        RequestRecord rec;
        _cleanup_free_ char *bytes = NULL;
        _cleanup_(json_decrefp) json_t *res = NULL, *req = NULL;
        size_t len = 0;
        int r;

        r = store_load(w->dirs.requests_fd, id, &rec, e);
        if (r == -ENOENT)
                return tfw_error(e, ENOENT, "not_found", "show '%s': no request with that id", id);
        if (r < 0)
                return r;
        {
                char path[REQUEST_ID_MAX + 16];
                snprintf(path, sizeof(path), "%s/request.json", id);
                _cleanup_close_ int fd = openat(w->dirs.requests_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0)
                        (void) read_full_fd_bounded(fd, w->policy.max_request_bytes, &bytes, &len);
        }
        if (bytes)
                (void) json_load_object_strict(bytes, len, "request", &req, NULL);
        res = publish_load_result(&w->dirs, id);

        if (json) {
                _cleanup_(json_decrefp) json_t *o = json_pack("{s:o, s:O?, s:O?}", "record", record_json(&rec),
                                                              "request", req, "result", res);
                _cleanup_free_ char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                fprintf(out, "%s\n", s);
                return 0;
        }
        char ts[RFC3339_MAX];
        fprintf(out, "id:           %s\n", rec.id);
        fprintf(out, "state:        %s\n", rec.state == STATE_FINAL ? "final" : request_state_to_string(rec.state));
        fprintf(out, "class:        %s\n", rec.action_class >= 0 ? action_class_to_string(rec.action_class) : "-");
        fprintf(out, "sha256:       %s\n", rec.sha256);
        fprintf(out, "submitted at: %s\n", format_rfc3339(rec.submitted_at, ts));
        if (rec.decision[0])
                fprintf(out, "decision:     %s%s%s at %s\n", rec.decision, rec.approver[0] ? " by " : "",
                        rec.approver, format_rfc3339(rec.decided_at, ts));
        if (req) {
                /* The agent's words: jansson leaves C1 and bidi controls as they are, which would
                 * act on, or reorder, the operator's terminal (an argv shown other than it is). */
                _cleanup_free_ char *s = json_dumps(req, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
                _cleanup_free_ char *shown = s ? term_escape_strdup(s, 0) : NULL;
                fprintf(out, "request (the captured private copy):\n%s\n", shown ? shown : "?");
        } else if (bytes)
                fprintf(out, "request: %zu bytes that are not valid JSON (it was rejected)\n", len);
        if (rec.state == STATE_PENDING) {
                usec_t exp = rec.submitted_at + (usec_t) w->config->pending_ttl_hours * 3600 * USEC_PER_SEC;
                fprintf(out, "expires at:   %s (pending_ttl_hours %u), unless approved or denied\n",
                        format_rfc3339(exp, ts), w->config->pending_ttl_hours);
                pending_cache(w, out);
        }
        if (res) {
                json_t *ms = json_object_get(res, "duration_ms");
                if (jstr(res, "started_at"))
                        fprintf(out, "started at:   %s\n", jstr(res, "started_at"));
                if (jstr(res, "finished_at"))
                        fprintf(out, "finished at:  %s\n", jstr(res, "finished_at"));
                if (json_is_integer(ms))
                        fprintf(out, "duration:     %" JSON_INTEGER_FORMAT ".%03" JSON_INTEGER_FORMAT " s\n",
                                json_integer_value(ms) / 1000, json_integer_value(ms) % 1000);
                report_print_summary(res, out);
                fprintf(out, "result:       %s/%s/result.json\n", w->config->results_dir, id);
                fprintf(out, "log:          %s/%s/job.log\n", w->config->results_dir, id);
        }
        return 0;
}
