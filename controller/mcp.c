/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "capsule/walls.h"
#include "common/fd-util.h"
#include "common/json-util.h"
#include "common/path-util.h"
#include "controller/apply.h"
#include "controller/cancel.h"
#include "controller/job-words.h"
#include "controller/list.h"
#include "controller/live.h"
#include "controller/mcp-internal.h"
#include "controller/mcp-task.h"
#include "controller/mcp.h"
#include "controller/no-worker.h"
#include "controller/outcome.h"
#include "controller/request.h"
#include "controller/site.h"
#include "controller/status.h"
#include "controller/submit.h"

#define READ_CHUNK 65536
#define RESULT_WAIT_MAX 3600
#define LIST_RECENT_DEFAULT CONTROLLER_LIST_RECENT_DEFAULT
#define LIST_RECENT_MAX CONTROLLER_LIST_RECENT_MAX

/* Newest first: the answer to a client that asks for none of these. */
const char *const mcp_protocol_versions[] = {MCP_LATEST_PROTOCOL, "2025-06-18", "2025-03-26", "2024-11-05", NULL};

static bool protocol_at_least(const Mcp *m, const char *v) {
        return strcmp(m->protocol, v) >= 0;
}

/* ---- output ------------------------------------------------------------------------------- */

void mcp_send_json(Mcp *m, json_t *msg) {
        if (!msg || m->write_error)
                return;
        /* One line: jansson escapes every control character in strings, so no raw newline. */
        char *s = json_dumps(msg, JSON_COMPACT);
        if (!s) {
                m->write_error = -ENOMEM;
                return;
        }
        size_t n = strlen(s);
        char *line = realloc(s, n + 2);
        if (!line) {
                free(s);
                m->write_error = -ENOMEM;
                return;
        }
        line[n] = '\n';
        int r = write_all(m->out_fd, line, n + 1);
        free(line);
        if (r < 0)
                m->write_error = r;
}

void mcp_send_result(Mcp *m, json_t *id, json_t *result) {
        _cleanup_(json_decrefp) json_t *msg = json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result",
                                                        result ? result : json_object());
        mcp_send_json(m, msg);
}

void mcp_send_error(Mcp *m, json_t *id, int code, const char *fmt, ...) {
        char msg[1200];
        va_list ap;
        va_start(ap, fmt);
        (void) vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        /* The message may quote the client's bytes: keep it valid UTF-8 for jansson. */
        json_t *text = json_string(msg);
        if (!text)
                text = json_string("invalid input");
        _cleanup_(json_decrefp) json_t *j = json_pack("{s:s, s:O, s:{s:i, s:o}}", "jsonrpc", "2.0", "id",
                                                      id ? id : json_null(), "error", "code", code, "message", text);
        mcp_send_json(m, j);
}

void mcp_send_progress(Mcp *m, Waiter *w, const char *message) {
        if (!w->progress_token)
                return;
        w->progress++;
        _cleanup_(json_decrefp) json_t *params =
                json_pack("{s:O, s:I, s:s}", "progressToken", w->progress_token, "progress", (json_int_t) w->progress,
                          "message", message);
        /* A task's notifications name it (the spec's related-task). */
        if (params && w->kind == WAIT_TASK_WATCH)
                json_object_set_new(params, "_meta", json_pack("{s:{s:s}}", MCP_META_RELATED_TASK, "taskId", w->id));
        _cleanup_(json_decrefp) json_t *j =
                json_pack("{s:s, s:s, s:O}", "jsonrpc", "2.0", "method", "notifications/progress", "params", params);
        mcp_send_json(m, j);
        w->next_progress = now_monotonic() + MCP_PROGRESS_INTERVAL_SECONDS * USEC_PER_SEC;
}

/* ---- tool results ----------------------------------------------------------------------- */

/* A tool result: text for the model, structuredContent for programs (2025-06-18 and later). */
static json_t *tool_result(const Mcp *m, const char *text, json_t *structured, bool is_error) {
        json_t *t = json_string(text);
        if (!t)
                t = json_string("(output not valid UTF-8)");
        json_t *r = json_pack("{s:[{s:s, s:o}], s:b}", "content", "type", "text", "text", t, "isError", is_error);
        if (r && structured && protocol_at_least(m, "2025-06-18"))
                json_object_set(r, "structuredContent", structured);
        json_decref(structured);
        return r;
}

static json_t *tool_error(const Mcp *m, const char *code, const char *message) {
        char text[1400];
        snprintf(text, sizeof(text), "%s%s%s", message, code ? " (" : "", code ? code : "");
        if (code)
                strncat(text, ")", sizeof(text) - strlen(text) - 1);
        return tool_result(m, text, json_pack("{s:s, s:s?, s:s}", "status", "refused", "error", code, "message", message),
                           true);
}

bool mcp_site_ready(Mcp *m, TfwError *e) {
        if (m->have_site && m->site.results_fd >= 0)
                return true;
        /* Opened on first use, and again while the results directory is unknown: the worker
         * may have started (and written worker.json) since. */
        if (m->have_site) {
                controller_watch_close(&m->watch);
                controller_site_close(&m->site);
                m->have_site = false;
        }
        if (controller_site_open(m->o.workspace, m->o.results, &m->site, e) < 0)
                return false;
        m->have_site = true;
        return true;
}

bool mcp_watch_ready(Mcp *m, TfwError *e) {
        if (m->watch.fd >= 0)
                return true;
        if (controller_site_need_results(&m->site, e) < 0)
                return false;
        return controller_watch_open(m->site.results_fd, &m->watch, e) >= 0;
}

/* controller_apply's words, captured: NULL when it could not even start. */
static char *apply_text(Mcp *m, const char *id, bool dry_run, bool allow_git, bool *ret_ok) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return NULL;
        ApplyOptions ao = { .workspace = m->site.workspace, .results = m->site.results_dir, .id = id, .dry_run = dry_run,
                            .allow_git = allow_git };
        TfwError e = {};
        *ret_ok = controller_apply(&ao, f, f, &e) >= 0;
        if (!*ret_ok)
                fprintf(f, "not applied: %s\n", e.message);
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}

/* The walls the job met (capsule/walls.h) into structuredContent ("walls": the result's entries,
 * each with its "words") and the text, right below the status line: said as the sandbox's
 * decisions, so that a model does not take a refused connection for a broken network. */
static int outcome_walls(const json_t *res, json_t *structured, FILE *f) {
        json_t *out = json_array(), *el;
        size_t i;
        char line[1024];

        if (!out || json_object_set_new(structured, "walls", out) < 0)
                return -ENOMEM;
        json_array_foreach(json_object_get(res, "walls"), i, el) {
                if (!walls_sentence(el, line, sizeof(line)))
                        continue;
                json_t *copy = json_deep_copy(el);
                if (!copy || json_object_set_new(copy, "words", json_string(line)) < 0) {
                        json_decref(copy);
                        return -ENOMEM;
                }
                if (json_array_append_new(out, copy) < 0)
                        return -ENOMEM;
                if (json_array_size(out) == 1)
                        fputs("walls (the sandbox's decisions, not failures of the network or of a service):\n", f);
                fprintf(f, "  %s\n", line);
        }
        return 0;
}

json_t *mcp_outcome_result(Mcp *m, const char *id, json_t *res, bool anonymous, bool apply) {
        const char *status = json_string_value(json_object_get(res, "status"));
        int exit_status = controller_exit_status(res);
        _cleanup_free_ char *tail = NULL;
        _cleanup_(json_decrefp) json_t *paths = NULL, *abs = json_array();
        bool cut = false, arts_cut = false;
        char dir[4200];

        snprintf(dir, sizeof(dir), "%s/%s", m->site.results_dir ? m->site.results_dir : "", id);
        if (anonymous || controller_log_tail(m->site.results_fd, id, MCP_LOG_TAIL_BYTES, &tail, &cut) < 0)
                tail = strdup("");
        if (anonymous || controller_artifacts(m->site.results_fd, id, MCP_ARTIFACTS_MAX, &paths, &arts_cut) < 0)
                paths = json_array();
        size_t i;
        json_t *p;
        json_array_foreach(paths, i, p) {
                char path[8400];
                snprintf(path, sizeof(path), "%s/artifacts/%s", dir, json_string_value(p));
                json_array_append_new(abs, json_string(path));
        }
        /* The log is the job's bytes: a tail that is not UTF-8 is shown with replacements. */
        json_t *tailj = json_string(tail ? tail : "");
        if (!tailj) {
                for (char *c = tail; c && *c; c++)
                        if ((unsigned char) *c >= 0x80)
                                *c = '?';
                tailj = json_string(tail ? tail : "");
        }
        json_t *structured = json_pack(
                "{s:s, s:s?, s:O, s:O, s:O, s:O, s:i, s:s?, s:o, s:b, s:O, s:b}", "id", id, "status", status,
                "exit_code", json_object_get(res, "exit_code") ?: json_null(), "signal",
                json_object_get(res, "signal") ?: json_null(), "error", json_object_get(res, "error") ?: json_null(),
                "message", json_object_get(res, "message") ?: json_null(), "exit_status", exit_status, "result_dir",
                anonymous ? NULL : dir, "log_tail", tailj ? tailj : json_string(""), "log_truncated", cut, "artifacts",
                abs, "artifacts_truncated", arts_cut);
        /* The changeset (docs/controller.md, "Changes"), and with apply what became of it. */
        json_t *changes = json_object_get(res, "changes");
        _cleanup_free_ char *applied = NULL;
        bool applied_ok = false, self_ended = status && (streq(status, "succeeded") || streq(status, "failed"));
        if (structured && json_object_set(structured, "changes", changes ? changes : json_null()) < 0)
                structured = (json_decref(structured), NULL);
        if (structured && apply && !anonymous && json_is_object(changes) && self_ended) {
                applied = apply_text(m, id, false, false, &applied_ok);
                if (json_object_set_new(structured, "applied", json_boolean(applied_ok)) < 0 ||
                    json_object_set_new(structured, "apply_output", json_string(applied ? applied : "")) < 0)
                        structured = (json_decref(structured), NULL);
        }
        if (!structured)
                return tool_error(m, "internal", "out of memory");

        _cleanup_free_ char *text = NULL;
        size_t tlen = 0;
        FILE *f = open_memstream(&text, &tlen);
        if (!f) {
                json_decref(structured);
                return tool_error(m, "internal", "out of memory");
        }
        const char *err = json_string_value(json_object_get(res, "error"));
        const char *msg = json_string_value(json_object_get(res, "message"));
        json_t *code = json_object_get(res, "exit_code");
        const char *log = json_string_value(json_object_get(structured, "log_tail"));
        fprintf(f, "request '%s': %s", id, status ? status : "?");
        if (json_is_integer(code))
                fprintf(f, ", exit code %" JSON_INTEGER_FORMAT, json_integer_value(code));
        fprintf(f, " (exit status %d)", exit_status);
        if (err)
                fprintf(f, ": %s", err);
        if (msg)
                fprintf(f, ": %s", msg);
        fputc('\n', f);
        if (outcome_walls(res, structured, f) < 0) {
                fclose(f);
                json_decref(structured);
                return tool_error(m, "internal", "out of memory");
        }
        if (log && log[0])
                fprintf(f, "%s%s%s", cut ? "log (last part):\n" : "log:\n", log,
                        log[strlen(log) - 1] == '\n' ? "" : "\n");
        if (json_array_size(abs)) {
                fputs("artifacts:\n", f);
                json_array_foreach(abs, i, p)
                        fprintf(f, "  %s\n", json_string_value(p));
                if (arts_cut)
                        fputs("  (more not listed)\n", f);
        }
        if (json_is_object(changes)) {
                json_int_t n = 0;
                const char *k;
                json_t *v;
                json_object_foreach(changes, k, v)
                        if (json_is_integer(v) && !streq(k, "bytes"))
                                n += json_integer_value(v);
                if (applied)
                        fprintf(f, "changes: %s%s", applied, applied[0] && applied[strlen(applied) - 1] == '\n' ? "" : "\n");
                else if (n > 0)
                        fprintf(f, "changes: the job changed %" JSON_INTEGER_FORMAT " path(s) of /work; the workspace is "
                                   "unchanged: they are listed in %s/changes.json (apply them with the apply tool)\n",
                                n, dir);
        }
        if (fclose(f) != 0 || !text) {
                json_decref(structured);
                return tool_error(m, "internal", "out of memory");
        }
        return tool_result(m, text, structured, exit_status == CONTROLLER_EXIT_NOT_RUN);
}

static json_t *state_result(Mcp *m, const Waiter *w, ControllerState st) {
        char text[2048];
        _cleanup_free_ char *cmd = NULL;
        if (st == CONTROLLER_PENDING)
                cmd = controller_approve_command(&m->site, w->id, w->sha256[0] ? w->sha256 : "<sha256>");
        if (cmd)
                snprintf(text, sizeof(text),
                         "request '%s': pending: an operator must approve it before it runs. The operator runs, as "
                         "root: %s\nAsk for its outcome later with the result tool (id '%s').",
                         w->id, cmd, w->id);
        else if (st == CONTROLLER_QUEUED || st == CONTROLLER_RUNNING)
                snprintf(text, sizeof(text),
                         "request '%s': %s, not ended yet. Ask for its outcome with the result tool (id '%s', "
                         "wait_seconds to wait for it).",
                         w->id, controller_state_to_string(st), w->id);
        else
                snprintf(text, sizeof(text), "request '%s': %s", w->id, controller_state_to_string(st));
        return tool_result(m, text,
                           json_pack("{s:s, s:s, s:s?}", "id", w->id, "status", controller_state_to_string(st),
                                     "approve_command", cmd),
                           false);
}

/* No worker took the request (controller/no-worker.h): said as submit says it, as an error,
 * since the command has not run and will not without someone starting the worker. */
static json_t *no_worker_result(Mcp *m, const char *id) {
        _cleanup_free_ char *words = controller_no_worker_words(&m->site, id);
        _cleanup_free_ char *text = NULL;
        if (!words || asprintf(&text, "%s Ask for its outcome later with the result tool (id '%s').", words, id) < 0)
                return tool_error(m, "internal", "out of memory");
        return tool_result(m, text,
                           json_pack("{s:s, s:s, s:b, s:s}", "id", id, "status", "unknown", "taken", false, "message", words),
                           true);
}

/* ---- waiting ------------------------------------------------------------------------------ */

static void waiter_drop(Mcp *m, size_t i) {
        live_follow_close(&m->waiting[i].live, m->watch.fd);
        json_decref(m->waiting[i].rpc_id);
        json_decref(m->waiting[i].progress_token);
        json_decref(m->waiting[i].cancel_before);
        m->waiting[i] = m->waiting[--m->n_waiting];
}

/* Look at one waiting call: answer it (and drop it) when its request is final, or pending for
 * run, or its wait is over. true when answered. */
static bool waiter_check(Mcp *m, size_t i, bool scan_rejected) {
        Waiter *w = &m->waiting[i];
        ControllerStatus st;

        if (controller_status(m->site.results_fd, w->id, w->submitted_at, scan_rejected || w->scan_rejected, &st) < 0)
                st = (ControllerStatus){};
        w->scan_rejected = false;
        json_t *answer = NULL;
        _cleanup_(json_decrefp) json_t *refusal =
                w->cancel_before && st.state != CONTROLLER_FINAL ? controller_cancel_refusal(&m->site, w->id, w->cancel_before)
                                                                 : NULL;
        if (w->kind != WAIT_TOOL) {
                bool done = mcp_task_waiter_check(m, w, &st, refusal);
                controller_status_done(&st);
                if (done)
                        waiter_drop(m, i);
                return done;
        }
        if (st.state == CONTROLLER_FINAL)
                answer = mcp_outcome_result(m, w->id, st.result, st.anonymous, w->apply);
        else if (refusal)
                answer = tool_error(m, json_string_value(json_object_get(refusal, "error")),
                                    json_string_value(json_object_get(refusal, "message")) ?: "the worker refused the cancel");
        else if (st.state == CONTROLLER_PENDING && w->answer_pending)
                answer = state_result(m, w, st.state);
        else if (w->no_worker_at && now_monotonic() >= w->no_worker_at &&
                 !controller_request_taken(&m->site, w->id, st.state))
                answer = no_worker_result(m, w->id);
        else if (w->deadline && now_monotonic() >= w->deadline)
                answer = state_result(m, w, st.state);
        else if (st.state != w->last) {
                char msg[128];
                snprintf(msg, sizeof(msg), "%s", controller_state_to_string(st.state));
                if (st.state != CONTROLLER_UNKNOWN)
                        mcp_send_progress(m, w, msg);
                w->last = st.state;
        }
        /* Looked at once: a request a worker took stays taken. */
        if (!answer && w->no_worker_at && now_monotonic() >= w->no_worker_at)
                w->no_worker_at = 0;
        controller_status_done(&st);
        if (!answer)
                return false;
        mcp_send_result(m, w->rpc_id, answer);
        waiter_drop(m, i);
        return true;
}

static void check_all(Mcp *m, bool scan_rejected) {
        for (size_t i = 0; i < m->n_waiting;)
                if (!waiter_check(m, i, scan_rejected))
                        i++;
}


void mcp_waiter_add(Mcp *m, json_t *rpc_id, json_t *token, const WaitSpec *ws) {
        Waiter *w = &m->waiting[m->n_waiting++];
        usec_t now = now_monotonic();
        *w = (Waiter){.kind = ws->kind,
                      .rpc_id = json_incref(rpc_id),
                      .progress_token = token ? json_incref(token) : NULL,
                      .answer_pending = ws->answer_pending,
                      .apply = ws->apply,
                      .scan_rejected = true,
                      .submitted_at = ws->submitted_at,
                      .started = now,
                      .deadline = ws->wait_seconds ? now + ws->wait_seconds * USEC_PER_SEC : 0,
                      .no_worker_at = ws->no_worker_in ? now + ws->no_worker_in : 0,
                      .last = CONTROLLER_UNKNOWN,
                      .live = LIVE_FOLLOW_NULL,
                      .live_more = true,
                      .cancel_before = ws->cancel_before};
        snprintf(w->id, sizeof(w->id), "%s", ws->id);
        snprintf(w->sha256, sizeof(w->sha256), "%s", ws->sha256 ? ws->sha256 : "");
        mcp_send_progress(m, w, "submitted: waiting for the worker");
        (void) waiter_check(m, m->n_waiting - 1, true);
}

/* ---- tools -------------------------------------------------------------------------------- */

/* run's request written (judged by the worker's own parser first): NULL, or the tool error to
 * answer with and nothing written. */
json_t *mcp_run_submit(Mcp *m, json_t *args, ControllerRequest *req, usec_t *ret_submitted_at, bool *ret_apply,
                          int64_t *ret_wait) {
        TfwError e = {0};

        if (!mcp_site_ready(m, &e))
                return tool_error(m, e.code, e.message);
        /* Refused before anything is written when the answer could not be waited for. */
        if (m->n_waiting >= MCP_MAX_WAITING)
                return tool_error(m, "busy", "too many calls are waiting already; try again when one has ended");
        if (!mcp_watch_ready(m, &e))
                return tool_error(m, e.code, e.message);
        /* wait_seconds is the tool's, not the request's: the rest goes to the builder, which
         * judges every other field as the worker would. */
        *ret_wait = 0;
        int r = json_get_int_range(args, "wait_seconds", "wait_seconds", false, 1, RESULT_WAIT_MAX, ret_wait, &e);
        if (r < 0 && r != -ENOENT)
                return tool_error(m, e.code, e.message);
        _cleanup_(json_decrefp) json_t *fields = json_copy(args);
        if (!fields)
                return tool_error(m, "internal", "out of memory");
        (void) json_object_del(fields, "wait_seconds");
        json_t *ap = json_object_get(args, "apply");
        if (ap && !json_is_boolean(ap))
                return tool_error(m, "bad_type", "field 'apply' must be true or false");
        *ret_apply = json_is_true(ap);
        (void) json_object_del(fields, "apply");
        if (controller_submit_request(&m->site, fields, "mcp", req, ret_submitted_at, &e) < 0)
                return tool_error(m, e.code, e.message);
        return NULL;
}

static json_t *tool_run(Mcp *m, json_t *rpc_id, json_t *args, json_t *token, bool *ret_deferred) {
        _cleanup_(controller_request_done) ControllerRequest req = {};
        usec_t submitted_at;
        bool apply;
        int64_t wait;

        json_t *refused = mcp_run_submit(m, args, &req, &submitted_at, &apply, &wait);
        if (refused)
                return refused;
        WaitSpec ws = {.id = req.id, .sha256 = req.sha256, .answer_pending = true, .apply = apply,
                       .submitted_at = submitted_at, .wait_seconds = (unsigned) wait,
                       .no_worker_in = CONTROLLER_NO_WORKER_SECONDS * USEC_PER_SEC};
        mcp_waiter_add(m, rpc_id, token, &ws);
        *ret_deferred = true;
        return NULL;
}

static const char *const result_fields[] = {"id", "wait_seconds", "offset", NULL};
#define LOG_OFFSET_MAX ((int64_t) 1 << 40)

/* The job's log from offset on (controller/live.h: the live log while it runs, job.log once
 * final), at most MCP_LOG_READ_BYTES, added to a tool result: structuredContent's log, offset,
 * next_offset (where to go on from) and log_complete (final and nothing after next_offset),
 * and a text item for the model. */
static json_t *with_log(Mcp *m, json_t *result, const char *id, bool final, uint64_t offset) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        if (!result)
                return NULL;
        int r = live_log_read(m->site.results_fd, id, final, offset, MCP_LOG_READ_BYTES, &buf, &n);
        if (r < 0 && r != -ENOENT)
                n = 0;
        bool complete = final && n < MCP_LOG_READ_BYTES;
        json_t *log = live_json_text(buf ? buf : "", n);
        json_t *sc = json_object_get(result, "structuredContent");
        if (!log || (sc && (json_object_set(sc, "log", log) < 0 ||
                            json_object_set_new(sc, "offset", json_integer((json_int_t) offset)) < 0 ||
                            json_object_set_new(sc, "next_offset", json_integer((json_int_t) (offset + n))) < 0 ||
                            json_object_set_new(sc, "log_complete", json_boolean(complete)) < 0))) {
                json_decref(log);
                json_decref(result);
                return tool_error(m, "internal", "out of memory");
        }
        _cleanup_free_ char *text = NULL;
        if (asprintf(&text, "log from byte %" PRIu64 " (%zu bytes; ask again with offset %" PRIu64 " for %s):\n%s",
                     offset, n, offset + n, complete ? "nothing more: it has ended" : "more", json_string_value(log)) < 0)
                text = NULL;
        json_decref(log);
        json_t *item = text ? json_pack("{s:s, s:s}", "type", "text", "text", text) : NULL;
        if (item)
                json_array_append_new(json_object_get(result, "content"), item);
        return result;
}

static json_t *tool_result_of(Mcp *m, json_t *rpc_id, json_t *args, json_t *token, bool *ret_deferred) {
        TfwError e = {0};
        const char *id;
        int64_t wait = 0;

        if (json_check_keys(args, result_fields, NULL, &e) < 0 ||
            json_get_string(args, "id", "id", true, false, &id, &e) < 0)
                return tool_error(m, e.code, e.message);
        int r = json_get_int_range(args, "wait_seconds", "wait_seconds", false, 0, RESULT_WAIT_MAX, &wait, &e);
        if (r < 0 && r != -ENOENT)
                return tool_error(m, e.code, e.message);
        int64_t offset = 0;
        r = json_get_int_range(args, "offset", "offset", false, 0, LOG_OFFSET_MAX, &offset, &e);
        if (r < 0 && r != -ENOENT)
                return tool_error(m, e.code, e.message);
        bool has_offset = r >= 0;
        if (!request_id_is_valid(id))
                return tool_error(m, "bad_id", "field 'id' must match ^[a-z0-9][a-z0-9_-]{0,63}$");
        if (!mcp_site_ready(m, &e) || controller_site_need_results(&m->site, &e) < 0)
                return tool_error(m, e.code, e.message);

        ControllerStatus st;
        if (controller_status(m->site.results_fd, id, 0, false, &st) < 0)
                return tool_error(m, "internal", "cannot look the request up");
        if (st.state == CONTROLLER_FINAL) {
                json_t *res = mcp_outcome_result(m, id, st.result, st.anonymous, false);
                controller_status_done(&st);
                return has_offset ? with_log(m, res, id, true, (uint64_t) offset) : res;
        }
        /* Still in the inbox: for how long says whether no worker took it (controller/no-worker.h). */
        usec_t in_inbox = 0, no_worker_in = 0;
        if (st.state == CONTROLLER_UNKNOWN && controller_inbox_age(&m->site, id, &in_inbox) >= 0) {
                if (in_inbox >= CONTROLLER_NO_WORKER_SECONDS * USEC_PER_SEC)
                        return no_worker_result(m, id);
                if (wait == 0) {
                        char text[256];
                        snprintf(text, sizeof(text), "request '%s' is in the inbox: no worker has taken it yet. Ask again "
                                                     "with the result tool (wait_seconds to wait for it).", id);
                        return tool_result(m, text,
                                           json_pack("{s:s, s:s, s:b}", "id", id, "status", "unknown", "taken", false),
                                           false);
                }
                no_worker_in = CONTROLLER_NO_WORKER_SECONDS * USEC_PER_SEC - in_inbox;
        } else if (st.state == CONTROLLER_UNKNOWN) {
                char msg[256];
                snprintf(msg, sizeof(msg),
                         "no request '%s' in the inbox or the results directory (expired, or never submitted)", id);
                return tool_error(m, "unknown_id", msg);
        } else if (wait == 0) {
                Waiter w = {};
                snprintf(w.id, sizeof(w.id), "%s", id);
                json_t *res = state_result(m, &w, st.state);
                /* Running: its output so far, from offset on. */
                return st.state == CONTROLLER_RUNNING ? with_log(m, res, id, false, (uint64_t) offset) : res;
        }
        if (m->n_waiting >= MCP_MAX_WAITING)
                return tool_error(m, "busy", "too many calls are waiting already; try again when one has ended");
        if (!mcp_watch_ready(m, &e))
                return tool_error(m, e.code, e.message);
        WaitSpec ws = {.id = id, .wait_seconds = (unsigned) wait, .no_worker_in = no_worker_in};
        mcp_waiter_add(m, rpc_id, token, &ws);
        *ret_deferred = true;
        return NULL;
}

static const char *const cancel_fields[] = {"id", NULL};

/* cancel: the controller's cancel of a request of this workspace (controller/cancel.h),
 * answered with its outcome once it ended, or with the refusal. */
static json_t *tool_cancel(Mcp *m, json_t *rpc_id, json_t *args, json_t *token, bool *ret_deferred) {
        TfwError e = {0};
        const char *id;
        usec_t sent_at;

        if (json_check_keys(args, cancel_fields, NULL, &e) < 0 ||
            json_get_string(args, "id", "id", true, false, &id, &e) < 0)
                return tool_error(m, e.code, e.message);
        if (!mcp_site_ready(m, &e) || !mcp_watch_ready(m, &e))
                return tool_error(m, e.code, e.message);
        if (m->n_waiting >= MCP_MAX_WAITING)
                return tool_error(m, "busy", "too many calls are waiting already; try again when one has ended");
        json_t *before = controller_cancel_refusals(&m->site, id);
        if (!before)
                return tool_error(m, "internal", "out of memory");
        if (controller_cancel_send(&m->site, id, &sent_at, &e) < 0) {
                json_decref(before);
                return tool_error(m, e.code, e.message);
        }
        WaitSpec ws = {.id = id, .wait_seconds = CONTROLLER_CANCEL_WAIT_DEFAULT, .cancel_before = before};
        mcp_waiter_add(m, rpc_id, token, &ws);
        *ret_deferred = true;
        return NULL;
}

static const char *const list_fields[] = {"recent", NULL};

/* No allow_git here: what the agent reads (the job's names and log) must not be able to talk it
 * into planting a .git or a repository (controller/apply-git.h); only the CLI's --allow-git, a person's act, takes it. */
static const char *const apply_fields[] = {"id", "dry_run", NULL};

/* apply: a job's changeset into the workspace (controller/apply.h). */
static json_t *tool_apply(Mcp *m, json_t *args) {
        TfwError e = {0};
        if (json_check_keys(args, apply_fields, NULL, &e) < 0)
                return tool_error(m, e.code, e.message);
        json_t *id = json_object_get(args, "id"), *dry = json_object_get(args, "dry_run");
        if (!json_is_string(id) || (dry && !json_is_boolean(dry)))
                return tool_error(m, "bad_type", "apply takes id (a string) and dry_run (true or false)");
        if (!mcp_site_ready(m, &e))
                return tool_error(m, e.code, e.message);
        bool ok = false;
        _cleanup_free_ char *text = apply_text(m, json_string_value(id), json_is_true(dry), false, &ok);
        if (!text)
                return tool_error(m, "internal", "out of memory");
        json_t *st = json_pack("{s:s, s:b, s:b}", "id", json_string_value(id), "applied", ok && !json_is_true(dry), "ok", ok);
        return tool_result(m, text, st, !ok);
}

static json_t *tool_list(Mcp *m, json_t *args) {
        _cleanup_(json_decrefp) json_t *l = NULL;
        TfwError e = {0};
        int64_t recent = LIST_RECENT_DEFAULT;

        if (json_check_keys(args, list_fields, NULL, &e) < 0)
                return tool_error(m, e.code, e.message);
        int r = json_get_int_range(args, "recent", "recent", false, 0, LIST_RECENT_MAX, &recent, &e);
        if (r < 0 && r != -ENOENT)
                return tool_error(m, e.code, e.message);
        if (!mcp_site_ready(m, &e) || controller_site_need_results(&m->site, &e) < 0)
                return tool_error(m, e.code, e.message);
        r = controller_list(&m->site, (size_t) recent, &l);
        if (r < 0)
                return tool_error(m, "internal", "cannot list the results directory");
        /* The words the command line's list prints (controller/list.h). */
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        if (!f)
                return tool_error(m, "internal", "out of memory");
        controller_list_print(l, m->site.results_dir, f);
        if (fclose(f) != 0 || !text)
                return tool_error(m, "internal", "out of memory");
        return tool_result(m, text, json_incref(l), false);
}

static json_t *tools_list(const Mcp *m) {
        const RequestPolicy *p = m->have_site ? &m->site.policy : &request_policy_default;
        _cleanup_free_ char *run_words = controller_job_words(&m->site, JOB_WORDS_RUN);
        if (!run_words)
                return NULL;
        _cleanup_(json_decrefp) json_t *classes = json_array();
        for (int c = 0; c < _ACTION_CLASS_MAX; c++)
                if (action_class_policy((ActionClass) c) != ACTION_POLICY_REJECT)
                        json_array_append_new(classes, json_string(action_class_to_string((ActionClass) c)));
        json_t *run = json_pack(
                "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:{s:s}, s:i, s:I, s:s}, s:{s:s, s:O, s:s, s:s}, "
                "s:{s:s, s:i, s:I, s:s}, s:{s:s, s:i, s:s}, s:{s:s, s:i, s:s}, s:{s:s, s:s, s:s}, s:{s:s, s:i, s:i, s:s}, "
                "s:{s:s, s:s}}, s:[s], s:b}}",
                "name", "run", "title", "Run a command in a capsule", "description", run_words,
                "inputSchema", "type", "object", "properties", "argv", "type", "array", "items", "type", "string",
                "minItems", 1, "maxItems", (json_int_t) p->max_argv, "description",
                "the command and its arguments, run without a shell in /work (or /work/<cwd>)", "action_class", "type", "string",
                "enum", classes, "default", CONTROLLER_DEFAULT_CLASS, "description",
                "local-reversible runs at once; every other class waits for an operator", "timeout_seconds", "type",
                "integer", "minimum", 1, "maximum", (json_int_t) p->max_timeout_seconds, "description",
                "wall-clock limit (the worker's default when absent)", "reason", "type", "string", "maxLength",
                REQUEST_REASON_MAX, "description", "why, shown to the operator when approval is needed", "cwd", "type",
                "string", "maxLength", REQUEST_CWD_MAX, "description",
                "the directory the command starts in, relative to the workspace, with no '..' (default: the "
                "directory this server was started in, when it is inside the workspace)", "id",
                "type", "string", "pattern", "^[a-z0-9][a-z0-9_-]{0,63}$", "description",
                "the request id (a fresh one when absent)", "wait_seconds", "type", "integer", "minimum", 1, "maximum",
                RESULT_WAIT_MAX, "description",
                "answer after this long even if the job has not ended (default: when it ends)", "apply", "type",
                "boolean", "description",
                "apply what the command changed in the workspace once it ended by itself (default false: its "
                "changes are listed, and the apply tool applies them)", "required", "argv",
                "additionalProperties", false);
        json_t *result = json_pack(
                "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:i, s:i, s:s}, s:{s:s, s:i, s:I, s:s}}, s:[s], s:b}}",
                "name", "result", "title", "Outcome of a request", "description",
                "The outcome of a request (status, exit code, the end of its log, its artifacts' paths), or where it "
                "is (pending, queued, running). With wait_seconds, wait up to that long for it to end. For a "
                "running job, its output so far from offset on (at most 64 KiB; next_offset says where to go on "
                "from); for an ended one, with offset, its log from there.",
                "inputSchema", "type", "object", "properties", "id", "type", "string", "pattern",
                "^[a-z0-9][a-z0-9_-]{0,63}$", "wait_seconds", "type", "integer", "minimum", 0, "maximum",
                RESULT_WAIT_MAX, "description", "wait up to this long for the request to end (default 0)", "offset",
                "type", "integer", "minimum", 0, "maximum", (json_int_t) LOG_OFFSET_MAX, "description",
                "the byte of the job's log to read from (default 0; a previous answer's next_offset)",
                "required", "id", "additionalProperties", false);
        json_t *list = json_pack(
                "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:i, s:i, s:s}}, s:b}}", "name", "list", "title",
                "This workspace's requests", "description",
                "The requests of this workspace: those in its inbox that no worker has taken yet, those pending, "
                "queued or running, and the most recent results (status, exit code, action class, the command in "
                "short).",
                "inputSchema", "type", "object", "properties", "recent", "type", "integer", "minimum", 0, "maximum",
                LIST_RECENT_MAX, "description", "how many recent results to include (default 20)",
                "additionalProperties", false);
        json_t *apply = json_pack(
                "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:s}, s:{s:s, s:s}}, s:[s], s:b}}", "name", "apply", "title",
                "Apply a request's changes", "description",
                "Write what a request's command changed under /work into this workspace: the whole changeset or "
                "nothing. It is refused when any file it touches changed since the command ran (each conflict is "
                "named), when it changes anything named .git or .gitmodules or leaves a directory that git would take "
                "for a repository (a HEAD beside objects/ and refs/: a person may take those with the command line's "
                "apply --allow-git), or when it is incomplete.",
                "inputSchema", "type", "object", "properties", "id", "type", "string", "pattern",
                "^[a-z0-9][a-z0-9_-]{0,63}$", "dry_run", "type", "boolean", "description", "only say what would change",
                "required", "id", "additionalProperties", false);
        json_t *cancel = json_pack(
                "{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:s}}, s:[s], s:b}}", "name", "cancel", "title",
                "Cancel a request", "description",
                "Stop a request of this workspace: withdrawn while it waits for an operator, dropped while queued, "
                "its capsule ended at once while it runs (as a timeout would). Answers with its outcome (status "
                "cancelled, error cancelled_by_controller), or why it could not be cancelled (an unknown id, a "
                "request that already ended: nothing changes).",
                "inputSchema", "type", "object", "properties", "id", "type", "string", "pattern",
                "^[a-z0-9][a-z0-9_-]{0,63}$", "required", "id", "additionalProperties", false);
        /* A task-augmented run (controller/mcp-task.h), for a client that negotiated tasks. */
        if (run && m->tasks && json_object_set_new(run, "execution", json_pack("{s:s}", "taskSupport", "optional")) < 0)
                run = (json_decref(run), NULL);
        return json_pack("{s:[o, o, o, o, o]}", "tools", run, result, list, apply, cancel);
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static void handle_initialize(Mcp *m, json_t *id, json_t *params) {
        json_t *v = json_object_get(params, "protocolVersion");
        if (!json_is_string(v)) {
                mcp_send_error(m, id, RPC_INVALID_PARAMS, "initialize: params.protocolVersion must be a string");
                return;
        }
        const char *chosen = MCP_LATEST_PROTOCOL;
        for (const char *const *p = mcp_protocol_versions; *p; p++)
                if (streq(*p, json_string_value(v)))
                        chosen = *p;
        snprintf(m->protocol, sizeof(m->protocol), "%s", chosen);
        json_t *caps = json_object_get(params, "capabilities");
        m->tasks = mcp_tasks_negotiated(chosen, caps);
        /* The words come from worker.json (controller/job-words.h): look again in case the
         * worker started since the server did. */
        TfwError ignored = {0};
        (void) mcp_site_ready(m, &ignored);
        _cleanup_free_ char *instructions = controller_job_words(&m->site, JOB_WORDS_INSTRUCTIONS);
        if (!instructions) {
                mcp_send_error(m, id, RPC_INTERNAL_ERROR, "out of memory");
                return;
        }
        json_t *result = json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", chosen, "capabilities",
                                   "tools", "listChanged", false, "serverInfo", "name", "tentaflake-worker", "title",
                                   "tentaflake-worker controller", "version", TFW_VERSION, "instructions", instructions);
        if (result && m->tasks &&
            json_object_set_new(json_object_get(result, "capabilities"), "tasks", mcp_tasks_capability()) < 0)
                result = (json_decref(result), NULL);
        if (!result)
                mcp_send_error(m, id, RPC_INTERNAL_ERROR, "out of memory");
        else
                mcp_send_result(m, id, result);
}

static void handle_tools_call(Mcp *m, json_t *id, json_t *params) {
        json_t *name = json_object_get(params, "name");
        json_t *args = json_object_get(params, "arguments");
        json_t *meta = json_object_get(params, "_meta");
        json_t *token = meta && json_is_object(meta) ? json_object_get(meta, "progressToken") : NULL;
        _cleanup_(json_decrefp) json_t *empty = NULL;
        bool deferred = false;
        json_t *r;

        if (!json_is_string(name)) {
                mcp_send_error(m, id, RPC_INVALID_PARAMS, "tools/call: params.name must be a string");
                return;
        }
        if (args && json_is_null(args))
                args = NULL;
        if (args && !json_is_object(args)) {
                mcp_send_error(m, id, RPC_INVALID_PARAMS, "tools/call: params.arguments must be an object");
                return;
        }
        if (meta && !json_is_object(meta)) {
                mcp_send_error(m, id, RPC_INVALID_PARAMS, "tools/call: params._meta must be an object");
                return;
        }
        if (token && !json_is_string(token) && !json_is_integer(token)) {
                mcp_send_error(m, id, RPC_INVALID_PARAMS, "tools/call: _meta.progressToken must be a string or an integer");
                return;
        }
        if (!args)
                args = empty = json_object();
        const char *n = json_string_value(name);
        /* A task-augmented call (controller/mcp-task.h); a client that did not negotiate tasks
         * has params.task ignored, as the spec says. */
        json_t *task = m->tasks ? json_object_get(params, "task") : NULL;
        TfwError e = {0};
        if (task && mcp_task_params_check(task, &e) < 0) {
                mcp_send_error(m, id, RPC_INVALID_PARAMS, "%s", e.message);
                return;
        }
        if (task && !streq(n, "run")) {
                char shown[80];
                mcp_send_error(m, id, RPC_METHOD_NOT_FOUND, "tool '%s' cannot be called as a task (only run can: its "
                           "execution.taskSupport is optional)", printable_name(n, shown, sizeof(shown)));
                return;
        }
        if (task)
                r = mcp_tool_run_task(m, args, token);
        else if (streq(n, "run"))
                r = tool_run(m, id, args, token, &deferred);
        else if (streq(n, "result"))
                r = tool_result_of(m, id, args, token, &deferred);
        else if (streq(n, "list"))
                r = tool_list(m, args);
        else if (streq(n, "apply"))
                r = tool_apply(m, args);
        else if (streq(n, "cancel"))
                r = tool_cancel(m, id, args, token, &deferred);
        else {
                char shown[80];
                mcp_send_error(m, id, RPC_INVALID_PARAMS, "unknown tool '%s'", printable_name(n, shown, sizeof(shown)));
                return;
        }
        if (deferred)
                return;
        if (!r)
                mcp_send_error(m, id, RPC_INTERNAL_ERROR, "out of memory");
        else
                mcp_send_result(m, id, r);
}

static void handle_cancelled(Mcp *m, json_t *params) {
        json_t *rid = json_object_get(params, "requestId");
        if (!rid)
                return;
        for (size_t i = 0; i < m->n_waiting; i++)
                if (json_equal(m->waiting[i].rpc_id, rid)) {
                        waiter_drop(m, i);
                        return;
                }
}

static void handle_message(Mcp *m, json_t *msg) {
        json_t *id = json_object_get(msg, "id");
        json_t *method = json_object_get(msg, "method");
        json_t *params = json_object_get(msg, "params");
        json_t *ver = json_object_get(msg, "jsonrpc");

        /* Ids are strings or integers (MCP forbids null); anything else cannot be answered by id. */
        bool id_ok = id && (json_is_string(id) || json_is_integer(id));
        if (!json_is_string(ver) || !streq(json_string_value(ver), "2.0")) {
                mcp_send_error(m, id_ok ? id : NULL, RPC_INVALID_REQUEST, "not a JSON-RPC 2.0 message (\"jsonrpc\": \"2.0\")");
                return;
        }
        if (id && !id_ok) {
                mcp_send_error(m, NULL, RPC_INVALID_REQUEST, "the id must be a string or an integer");
                return;
        }
        if (!method) {
                /* A response: this server sends no requests, so there is nothing to match. */
                if (json_object_get(msg, "result") || json_object_get(msg, "error"))
                        return;
                mcp_send_error(m, id, RPC_INVALID_REQUEST, "a request needs a method");
                return;
        }
        if (!json_is_string(method)) {
                if (id)
                        mcp_send_error(m, id, RPC_INVALID_REQUEST, "the method must be a string");
                return;
        }
        const char *name = json_string_value(method);
        if (params && !json_is_object(params)) {
                if (id)
                        mcp_send_error(m, id, RPC_INVALID_PARAMS, "params must be an object");
                return;
        }
        if (!id) {
                /* Notifications are never answered. */
                if (streq(name, "notifications/cancelled") && params)
                        handle_cancelled(m, params);
                return;
        }
        if (streq(name, "initialize"))
                handle_initialize(m, id, params);
        else if (streq(name, "ping"))
                mcp_send_result(m, id, json_object());
        else if (streq(name, "tools/list")) {
                json_t *cursor = params ? json_object_get(params, "cursor") : NULL;
                if (cursor && !json_is_string(cursor))
                        mcp_send_error(m, id, RPC_INVALID_PARAMS, "tools/list: params.cursor must be a string");
                else
                        mcp_send_result(m, id, tools_list(m));
        } else if (streq(name, "tools/call")) {
                if (!params)
                        mcp_send_error(m, id, RPC_INVALID_PARAMS, "tools/call needs params");
                else
                        handle_tools_call(m, id, params);
        } else if (m->tasks && strncmp(name, "tasks/", 6) == 0 &&
                   (streq(name, "tasks/get") || streq(name, "tasks/result") || streq(name, "tasks/cancel") ||
                    streq(name, "tasks/list")))
                mcp_handle_tasks(m, id, name, params);
        else {
                char shown[80];
                mcp_send_error(m, id, RPC_METHOD_NOT_FOUND, "method '%s' not found",
                           printable_name(name, shown, sizeof(shown)));
        }
}

static void handle_line(Mcp *m, const char *line, size_t len) {
        _cleanup_(json_decrefp) json_t *msg = NULL;
        TfwError e = {0};

        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
                len--;
        size_t skip = 0;
        while (skip < len && (line[skip] == ' ' || line[skip] == '\t'))
                skip++;
        if (skip == len)
                return; /* blank lines are not messages */
        if (json_load_object_strict(line + skip, len - skip, "message", &msg, &e) < 0) {
                if (e.code && streq(e.code, "bad_type"))
                        mcp_send_error(m, NULL, RPC_INVALID_REQUEST,
                                   "a message must be one JSON object (batches are not supported)");
                else
                        mcp_send_error(m, NULL, RPC_PARSE_ERROR, "parse error: %s", e.message);
                return;
        }
        handle_message(m, msg);
}

/* ---- the loop ----------------------------------------------------------------------------- */

static int next_timeout_ms(const Mcp *m) {
        usec_t now = now_monotonic(), next = 0;
        for (size_t i = 0; i < m->n_waiting; i++) {
                const Waiter *w = &m->waiting[i];
                if (w->deadline && (!next || w->deadline < next))
                        next = w->deadline;
                if (w->no_worker_at && (!next || w->no_worker_at < next))
                        next = w->no_worker_at;
                if (w->progress_token && (!next || w->next_progress < next))
                        next = w->next_progress;
                /* Output waiting for the rate, or a partial line waiting for its second. */
                int due = w->progress_token ? live_follow_due_ms(&w->live, now) : -1;
                usec_t live_at = w->live_more ? w->next_live : due >= 0 ? now + (usec_t) due * USEC_PER_MSEC : 0;
                if (live_at && live_at < w->next_live)
                        live_at = w->next_live;
                if (live_at && (!next || live_at < next))
                        next = live_at;
        }
        if (!next)
                return -1;
        if (next <= now)
                return 0;
        usec_t ms = (next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
        return ms > 60000 ? 60000 : (int) ms;
}

/* The job's new output lines, one notification's worth, when the rate allows (mcp.h). */
static void send_live(Mcp *m, Waiter *w, usec_t now) {
        char buf[MCP_LIVE_NOTIFY_BYTES];
        size_t n;
        if (!w->progress_token || now < w->next_live || (!w->live_more && live_follow_due_ms(&w->live, now) != 0))
                return;
        if (live_follow_next(&w->live, m->site.results_fd, w->id, m->watch.fd, buf, sizeof(buf), now, &n) < 0 || n == 0) {
                w->live_more = false; /* until the file changes, or a partial line is due */
                return;
        }
        _cleanup_(json_decrefp) json_t *text = live_json_text(buf, n);
        _cleanup_free_ char *msg = NULL;
        if (text && asprintf(&msg, "output:\n%s", json_string_value(text)) >= 0)
                mcp_send_progress(m, w, msg);
        w->next_live = now + MCP_LIVE_INTERVAL_USEC;
}

static void tick(Mcp *m) {
        usec_t now = now_monotonic();
        for (size_t i = 0; i < m->n_waiting; i++) {
                Waiter *w = &m->waiting[i];
                send_live(m, w, now);
                if (w->progress_token && w->next_progress <= now) {
                        char msg[128];
                        snprintf(msg, sizeof(msg), "%s, %" PRIu64 " s", w->last == CONTROLLER_UNKNOWN ? "submitted" :
                                 controller_state_to_string(w->last), (uint64_t) ((now - w->started) / USEC_PER_SEC));
                        mcp_send_progress(m, w, msg);
                }
        }
        /* Deadlines are answered by the check. */
        check_all(m, false);
}

int mcp_serve(int in_fd, int out_fd, const McpOptions *o, TfwError *e) {
        Mcp *m = calloc(1, sizeof(*m));
        char *buf = NULL;
        size_t len = 0, cap = 0;
        bool discarding = false, eof = false;
        int r = 0;

        if (!m)
                return tfw_error(e, ENOMEM, "internal", "out of memory");
        m->o = *o;
        m->out_fd = out_fd;
        m->site = (ControllerSite) CONTROLLER_SITE_NULL;
        m->watch = (ControllerWatch) CONTROLLER_WATCH_NULL;
        snprintf(m->protocol, sizeof(m->protocol), "%s", MCP_LATEST_PROTOCOL);
        TfwError ignored = {0};
        (void) mcp_site_ready(m, &ignored); /* a failure is reported by the first tool that needs it */

        while (!eof && !m->write_error) {
                struct pollfd p[2] = {{.fd = in_fd, .events = POLLIN}, {.fd = m->watch.fd, .events = POLLIN}};
                int n = poll(p, m->watch.fd >= 0 ? 2 : 1, next_timeout_ms(m));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = tfw_error(e, errno, "internal", "poll: %m");
                        break;
                }
                if (m->watch.fd >= 0 && p[1].revents) {
                        int mask = controller_watch_read(&m->watch);
                        if (mask < 0) {
                                /* The results directory went away: look again later, from scratch. */
                                controller_watch_close(&m->watch);
                                mask = CONTROLLER_WATCH_CHANGED | CONTROLLER_WATCH_REJECTED;
                        }
                        for (size_t i = 0; i < m->n_waiting; i++)
                                m->waiting[i].live_more = true; /* a live log may have grown */
                        if (mask)
                                check_all(m, mask & CONTROLLER_WATCH_REJECTED);
                }
                if (p[0].revents) {
                        if (cap - len < READ_CHUNK) {
                                size_t nc = cap ? cap * 2 : READ_CHUNK * 2;
                                if (nc > MCP_MESSAGE_MAX + READ_CHUNK * 2)
                                        nc = MCP_MESSAGE_MAX + READ_CHUNK * 2;
                                char *nb = realloc(buf, nc);
                                if (!nb) {
                                        r = tfw_error(e, ENOMEM, "internal", "out of memory");
                                        break;
                                }
                                buf = nb;
                                cap = nc;
                        }
                        ssize_t k = read(in_fd, buf + len, cap - len);
                        if (k < 0) {
                                if (errno == EINTR || errno == EAGAIN)
                                        continue;
                                r = tfw_error(e, errno, "internal", "cannot read the input: %m");
                                break;
                        }
                        if (k == 0)
                                eof = true;
                        size_t scan_from = len;
                        len += (size_t) k;
                        /* Every complete line is one message. */
                        size_t start = 0;
                        for (size_t i = scan_from; i < len; i++) {
                                if (buf[i] != '\n')
                                        continue;
                                if (discarding) {
                                        mcp_send_error(m, NULL, RPC_INVALID_REQUEST,
                                                   "message longer than %d bytes: discarded", MCP_MESSAGE_MAX);
                                        discarding = false;
                                } else
                                        handle_line(m, buf + start, i - start);
                                start = i + 1;
                        }
                        memmove(buf, buf + start, len - start);
                        len -= start;
                        if (len > MCP_MESSAGE_MAX) {
                                /* Too long to be a message: drop it up to its end. */
                                discarding = true;
                                len = 0;
                        }
                        if (eof && len > 0 && !discarding)
                                handle_line(m, buf, len); /* a last message without its newline */
                        else if (eof && discarding)
                                mcp_send_error(m, NULL, RPC_INVALID_REQUEST, "message longer than %d bytes: discarded",
                                           MCP_MESSAGE_MAX);
                }
                if (!eof)
                        tick(m);
        }
        if (r >= 0 && m->write_error)
                r = tfw_error(e, m->write_error, "internal", "cannot write to the client: %s", strerror(-m->write_error));
        while (m->n_waiting)
                waiter_drop(m, m->n_waiting - 1);
        mcp_tasks_clear(&m->task_tab);
        controller_watch_close(&m->watch);
        if (m->have_site)
                controller_site_close(&m->site);
        free(buf);
        free(m);
        return r;
}
