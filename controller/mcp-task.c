/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "controller/cancel.h"
#include "controller/list.h"
#include "controller/mcp-internal.h"
#include "controller/mcp-task.h"
#include "controller/no-worker.h"
#include "controller/outcome.h"

bool mcp_tasks_negotiated(const char *protocol, const json_t *caps) {
        /* Revision dates compare as strings. */
        if (protocol && strcmp(protocol, MCP_TASKS_PROTOCOL) >= 0)
                return true;
        return json_is_object(caps) && json_is_object(json_object_get(caps, "tasks"));
}

json_t *mcp_tasks_capability(void) {
        return json_pack("{s:{}, s:{}, s:{s:{s:{}}}}", "list", "cancel", "requests", "tools", "call");
}

int mcp_task_params_check(const json_t *task, TfwError *e) {
        if (!json_is_object(task))
                return tfw_error(e, EINVAL, "bad_type", "tools/call: params.task must be an object");
        json_t *ttl = json_object_get(task, "ttl");
        if (ttl && !json_is_null(ttl) && (!json_is_number(ttl) || json_number_value(ttl) < 0))
                return tfw_error(e, EINVAL, "bad_type", "tools/call: params.task.ttl must be a number of milliseconds");
        return 0;
}

const char *mcp_task_status_of(const json_t *result) {
        const char *s = json_string_value(json_object_get(result, "status"));
        if (s && streq(s, "cancelled"))
                return "cancelled";
        return controller_exit_status(result) == CONTROLLER_EXIT_NOT_RUN ? "failed" : "completed";
}

json_t *mcp_task_json(const char *id, const char *status, const char *message, const char *created,
                      const char *updated) {
        json_t *m = message ? json_string(message) : NULL;
        if (message && !m)
                m = json_string("(not shown: not UTF-8)");
        return json_pack("{s:s, s:s, s:o*, s:s, s:s, s:O, s:i}", "taskId", id, "status", status, "statusMessage", m,
                         "createdAt", created, "lastUpdatedAt", updated ? updated : created, "ttl",
                         json_null(), "pollInterval", MCP_TASK_POLL_MS);
}

McpTask *mcp_tasks_find(McpTasks *t, const char *id) {
        for (size_t i = 0; i < t->n; i++)
                if (streq(t->v[i].id, id))
                        return &t->v[i];
        return NULL;
}

static void task_free(McpTask *k) {
        json_decref(k->final);
        *k = (McpTask){};
}

McpTask *mcp_tasks_add(McpTasks *t, const char *id, usec_t created_at, const char *sha256, bool apply) {
        McpTask *k = mcp_tasks_find(t, id);
        if (!k && t->n == MCP_TASKS_MAX) {
                /* The oldest ended one makes room (they are in creation order). */
                size_t i = 0;
                while (i < t->n && !t->v[i].final)
                        i++;
                if (i == t->n)
                        return NULL;
                task_free(&t->v[i]);
                memmove(&t->v[i], &t->v[i + 1], (t->n - i - 1) * sizeof(t->v[0]));
                t->n--;
        }
        if (!k)
                k = &t->v[t->n++];
        task_free(k);
        snprintf(k->id, sizeof(k->id), "%s", id);
        k->created_at = created_at;
        snprintf(k->sha256, sizeof(k->sha256), "%s", sha256 ? sha256 : "");
        k->apply = apply;
        return k;
}

void mcp_tasks_clear(McpTasks *t) {
        for (size_t i = 0; i < t->n; i++)
                task_free(&t->v[i]);
        t->n = 0;
}

/* ---- inside the server: a task now, its answer --------------------------------------------- */

/* The tools/call result of an ended request: the one kept for a task of this server (made once,
 * applying its changes when run asked), else made now. A new reference. */
static json_t *task_final(Mcp *m, const char *id, const ControllerStatus *st) {
        McpTask *t = mcp_tasks_find(&m->task_tab, id);
        if (t && t->final)
                return json_incref(t->final);
        json_t *r = mcp_outcome_result(m, id, st->result, st->anonymous, t && t->apply);
        if (t && r)
                t->final = json_incref(r);
        return r;
}

/* result with _meta's related-task, as tasks/result must answer. */
static json_t *with_related_task(json_t *result, const char *id) {
        json_t *meta = result ? json_object_get(result, "_meta") : NULL;
        if (result && !meta && json_object_set_new(result, "_meta", meta = json_object()) < 0)
                meta = NULL;
        if (!meta || json_object_set_new(meta, MCP_META_RELATED_TASK, json_pack("{s:s}", "taskId", id)) < 0) {
                json_decref(result);
                return NULL;
        }
        return result;
}

/* The Task of request id now, or NULL with *ret_error (a JSON-RPC message) when this workspace
 * has no such request. */
static json_t *task_now(Mcp *m, const char *id, char *ret_error, size_t size) {
        McpTask *t = mcp_tasks_find(&m->task_tab, id);
        ControllerStatus st;
        char created[RFC3339_MAX] = "", updated[RFC3339_MAX] = "";
        _cleanup_free_ char *msg = NULL;
        const char *status = "working";
        usec_t age = 0;

        if (t)
                format_rfc3339(t->created_at, created);
        /* The worker moves a request on between two looks (the state file written before the
         * inbox entry goes, the result before the state file goes): a request seen nowhere is
         * looked at again, a few times, before it is called unknown. */
        for (int look = 0; look < 3; look++) {
                if (controller_status(m->site.results_fd, id, t ? t->created_at : 0, t != NULL, &st) < 0)
                        st = (ControllerStatus){};
                if (st.state != CONTROLLER_UNKNOWN || controller_inbox_age(&m->site, id, &age) >= 0)
                        break;
        }
        if (st.state == CONTROLLER_FINAL) {
                const json_t *r = st.result;
                const char *sub = json_string_value(json_object_get(r, "submitted_at"));
                const char *end = json_string_value(json_object_get(r, "finished_at"))
                                          ?: json_string_value(json_object_get(r, "rejected_at"));
                status = mcp_task_status_of(r);
                if (!created[0] && sub)
                        snprintf(created, sizeof(created), "%s", sub);
                snprintf(updated, sizeof(updated), "%s", end ? end : created);
                const char *rs = json_string_value(json_object_get(r, "status")), *er = json_string_value(json_object_get(r, "error")),
                           *ms = json_string_value(json_object_get(r, "message"));
                json_t *code = json_object_get(r, "exit_code");
                char codes[48] = "";
                if (json_is_integer(code))
                        snprintf(codes, sizeof(codes), ", exit code %" JSON_INTEGER_FORMAT, json_integer_value(code));
                if (asprintf(&msg, "%s%s%s%s%s%s", rs ? rs : "ended", codes, er ? ": " : "", er ? er : "", ms ? ": " : "",
                             ms ? ms : "") < 0)
                        msg = NULL;
        } else if (st.state != CONTROLLER_UNKNOWN) {
                snprintf(updated, sizeof(updated), "%s", st.since);
                if (!created[0])
                        snprintf(created, sizeof(created), "%s", st.since);
                /* The digest binds the approval to the bytes: known for a request of this server. */
                _cleanup_free_ char *cmd = st.state == CONTROLLER_PENDING
                                                   ? controller_approve_command(&m->site, id, t && t->sha256[0] ? t->sha256
                                                                                                                : "<sha256>")
                                                   : NULL;
                if (asprintf(&msg, "%s%s%s", controller_state_to_string(st.state),
                             cmd ? ": an operator must approve it; as root: " : "", cmd ? cmd : "") < 0)
                        msg = NULL;
        } else if (controller_inbox_age(&m->site, id, &age) >= 0) {
                format_rfc3339(now_realtime() - age, updated);
                if (!created[0])
                        snprintf(created, sizeof(created), "%s", updated);
                msg = age >= CONTROLLER_NO_WORKER_SECONDS * USEC_PER_SEC ? controller_no_worker_words(&m->site, id)
                                                                        : strdup("in the inbox: no worker has taken it yet");
        } else if (t) {
                /* A request of this server seen nowhere, three times: it was moving on. */
                format_rfc3339(now_realtime(), updated);
                msg = strdup("taken by the worker");
        } else {
                controller_status_done(&st);
                snprintf(ret_error, size, "Failed to retrieve task: no request '%s' in this workspace (expired, or never "
                                          "submitted)", id);
                return NULL;
        }
        controller_status_done(&st);
        if (!created[0])
                snprintf(created, sizeof(created), "%s", updated[0] ? updated : "1970-01-01T00:00:00Z");
        json_t *task = mcp_task_json(id, status, msg, created, updated[0] ? updated : created);
        if (!task)
                snprintf(ret_error, size, "out of memory");
        return task;
}

static void send_task_status(Mcp *m, const char *id) {
        char err[256];
        _cleanup_(json_decrefp) json_t *task = task_now(m, id, err, sizeof(err));
        _cleanup_(json_decrefp) json_t *j =
                task ? json_pack("{s:s, s:s, s:O}", "jsonrpc", "2.0", "method", "notifications/tasks/status", "params", task)
                     : NULL;
        mcp_send_json(m, j);
}

/* A waiting task call (WAIT_TASK_*): true when it is done with. */
bool mcp_task_waiter_check(Mcp *m, Waiter *w, const ControllerStatus *st, const json_t *refusal) {
        char err[256];
        if (w->kind == WAIT_TASK_WATCH) {
                if (st->state == CONTROLLER_FINAL) {
                        json_decref(task_final(m, w->id, st)); /* kept, applied when asked */
                        send_task_status(m, w->id);
                        return true;
                }
                if (st->state != w->last && st->state != CONTROLLER_UNKNOWN)
                        mcp_send_progress(m, w, controller_state_to_string(st->state));
                w->last = st->state;
                return false;
        }
        if (w->kind == WAIT_TASK_RESULT) {
                if (st->state != CONTROLLER_FINAL)
                        return false;
                json_t *r = with_related_task(task_final(m, w->id, st), w->id);
                if (r)
                        mcp_send_result(m, w->rpc_id, r); /* takes r */
                else
                        mcp_send_error(m, w->rpc_id, RPC_INTERNAL_ERROR, "out of memory");
                return true;
        }
        /* WAIT_TASK_CANCEL */
        if (st->state == CONTROLLER_FINAL) {
                const char *status = mcp_task_status_of(st->result);
                json_decref(task_final(m, w->id, st));
                json_t *task = streq(status, "cancelled") ? task_now(m, w->id, err, sizeof(err)) : NULL;
                if (task)
                        mcp_send_result(m, w->rpc_id, task); /* takes task */
                else
                        mcp_send_error(m, w->rpc_id, RPC_INVALID_PARAMS, "task '%s' ended first, as %s (%s): not cancelled",
                                   w->id, status, json_string_value(json_object_get(st->result, "status")) ?: "?");
                return true;
        }
        if (refusal) {
                mcp_send_error(m, w->rpc_id, RPC_INVALID_PARAMS, "the worker refused the cancel of '%s': %s (%s)", w->id,
                           json_string_value(json_object_get(refusal, "message")) ?: "refused",
                           json_string_value(json_object_get(refusal, "error")) ?: "?");
                return true;
        }
        if (w->deadline && now_monotonic() >= w->deadline) {
                mcp_send_error(m, w->rpc_id, RPC_INTERNAL_ERROR,
                           "the cancel of '%s' was sent, but no result came within %u s; tasks/get says where it is",
                           w->id, CONTROLLER_CANCEL_WAIT_DEFAULT);
                return true;
        }
        return false;
}

/* run as a task (controller/mcp-task.h): the request written, a CreateTaskResult at once; the
 * job is watched (its answer kept, its changes applied with apply) while this server runs.
 * wait_seconds means nothing here: tasks/result waits. A refusal is run's tool error, as the
 * call's own result (nothing was created). */
json_t *mcp_tool_run_task(Mcp *m, json_t *args, json_t *token) {
        _cleanup_(controller_request_done) ControllerRequest req = {};
        usec_t submitted_at;
        bool apply;
        int64_t wait;
        char created[RFC3339_MAX];

        json_t *refused = mcp_run_submit(m, args, &req, &submitted_at, &apply, &wait);
        if (refused)
                return refused;
        (void) mcp_tasks_add(&m->task_tab, req.id, submitted_at, req.sha256, apply);
        WaitSpec ws = {.kind = WAIT_TASK_WATCH, .id = req.id, .sha256 = req.sha256, .apply = apply,
                       .submitted_at = submitted_at};
        mcp_waiter_add(m, NULL, token, &ws);
        format_rfc3339(submitted_at, created);
        _cleanup_free_ char *words = NULL;
        if (asprintf(&words, "The command was submitted as request '%s' and runs on its own; its outcome comes with "
                             "tasks/result (task id '%s'), or the result tool.", req.id, req.id) < 0)
                return NULL;
        return json_pack("{s:o, s:{s:s}}", "task",
                         mcp_task_json(req.id, "working", "submitted: in the inbox", created, created), "_meta",
                         MCP_META_IMMEDIATE, words);
}

/* ---- the tasks methods ------------------------------------------------------------------------ */

static void tasks_list(Mcp *m, json_t *id, json_t *params) {
        _cleanup_(json_decrefp) json_t *l = NULL, *tasks = json_array();
        if (params && json_object_get(params, "cursor")) {
                /* This server hands out no cursor: it answers with every task at once. */
                mcp_send_error(m, id, RPC_INVALID_PARAMS, "tasks/list: invalid cursor (this server gives none)");
                return;
        }
        if (!tasks || controller_list(&m->site, CONTROLLER_LIST_RECENT_MAX, &l) < 0) {
                mcp_send_error(m, id, RPC_INTERNAL_ERROR, "cannot list this workspace's requests");
                return;
        }
        /* The same list as the list tool's and the command line's (controller/list.h), each one
         * as tasks/get says it. */
        const char *const parts[] = {"inbox", "active", "recent"};
        for (size_t p = 0; p < ELEMENTSOF(parts); p++) {
                size_t i;
                json_t *row;
                json_array_foreach(json_object_get(l, parts[p]), i, row) {
                        char err[256];
                        json_t *t = task_now(m, json_string_value(json_object_get(row, "id")), err, sizeof(err));
                        if (t)
                                json_array_append_new(tasks, t);
                }
        }
        mcp_send_result(m, id, json_pack("{s:O}", "tasks", tasks));
}

void mcp_handle_tasks(Mcp *m, json_t *id, const char *method, json_t *params) {
        TfwError e = {0};
        char err[1024];

        if (!mcp_site_ready(m, &e) || controller_site_need_results(&m->site, &e) < 0) {
                mcp_send_error(m, id, RPC_INTERNAL_ERROR, "%s: %s", method, e.message);
                return;
        }
        if (streq(method, "tasks/list")) {
                tasks_list(m, id, params);
                return;
        }
        json_t *tid = params ? json_object_get(params, "taskId") : NULL;
        if (!json_is_string(tid) || !request_id_is_valid(json_string_value(tid))) {
                mcp_send_error(m, id, RPC_INVALID_PARAMS, "%s: params.taskId must be a request id (^[a-z0-9][a-z0-9_-]{0,63}$)",
                           method);
                return;
        }
        const char *tname = json_string_value(tid);
        _cleanup_(json_decrefp) json_t *task = task_now(m, tname, err, sizeof(err));
        if (!task) {
                mcp_send_error(m, id, streq(err, "out of memory") ? RPC_INTERNAL_ERROR : RPC_INVALID_PARAMS, "%s", err);
                return;
        }
        const char *status = json_string_value(json_object_get(task, "status"));
        bool ended = !streq(status, "working");
        if (streq(method, "tasks/get")) {
                mcp_send_result(m, id, json_incref(task));
                return;
        }
        if (streq(method, "tasks/cancel") && ended) {
                mcp_send_error(m, id, RPC_INVALID_PARAMS, "tasks/cancel: task '%s' already ended (%s): nothing to cancel",
                           tname, status);
                return;
        }
        if (ended) { /* tasks/result of an ended task: the answer run would have given */
                ControllerStatus st;
                McpTask *t = mcp_tasks_find(&m->task_tab, tname);
                if (controller_status(m->site.results_fd, tname, t ? t->created_at : 0, t != NULL, &st) < 0 ||
                    st.state != CONTROLLER_FINAL) {
                        controller_status_done(&st);
                        mcp_send_error(m, id, RPC_INTERNAL_ERROR, "tasks/result: cannot read the result of '%s'", tname);
                        return;
                }
                json_t *r = with_related_task(task_final(m, tname, &st), tname);
                controller_status_done(&st);
                if (r)
                        mcp_send_result(m, id, r); /* takes r */
                else
                        mcp_send_error(m, id, RPC_INTERNAL_ERROR, "out of memory");
                return;
        }
        if (m->n_waiting >= MCP_MAX_WAITING || !mcp_watch_ready(m, &e)) {
                mcp_send_error(m, id, RPC_INTERNAL_ERROR, "%s: %s", method,
                           e.message[0] ? e.message : "too many calls are waiting already; try again when one has ended");
                return;
        }
        McpTask *t = mcp_tasks_find(&m->task_tab, tname);
        WaitSpec ws = {.kind = WAIT_TASK_RESULT, .id = tname, .submitted_at = t ? t->created_at : 0};
        if (streq(method, "tasks/cancel")) {
                usec_t sent_at;
                json_t *before = controller_cancel_refusals(&m->site, tname);
                if (!before) {
                        mcp_send_error(m, id, RPC_INTERNAL_ERROR, "out of memory");
                        return;
                }
                if (controller_cancel_send(&m->site, tname, &sent_at, &e) < 0) {
                        json_decref(before);
                        mcp_send_error(m, id, e.code && streq(e.code, "internal") ? RPC_INTERNAL_ERROR : RPC_INVALID_PARAMS,
                                   "tasks/cancel: %s (%s)", e.message, e.code ? e.code : "?");
                        return;
                }
                ws = (WaitSpec){.kind = WAIT_TASK_CANCEL, .id = tname, .submitted_at = ws.submitted_at,
                                .wait_seconds = CONTROLLER_CANCEL_WAIT_DEFAULT, .cancel_before = before};
        }
        mcp_waiter_add(m, id, NULL, &ws);
}
