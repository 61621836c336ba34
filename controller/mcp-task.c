/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "controller/mcp-task.h"
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
