/* SPDX-License-Identifier: MIT */
/* MCP tasks (protocol revision 2025-11-25, basic/utilities/tasks; issue 35 item 2;
 * docs/controller.md, "Tasks"): what the `mcp` server (controller/mcp.c) needs to answer a
 * task-augmented `run` and tasks/get, tasks/result, tasks/cancel and tasks/list.
 *
 * The task id is the request's id, and every request of this workspace is a task: a client that
 * disconnected and started the server again polls the same ids. A task's status is the
 * request's, as the spec names them: in the inbox, pending, queued or running is "working"
 * (pending too: the approval is an operator's act out of band, not input the requestor can
 * give through tasks/result, which is what "input_required" asks of it); an ended request is
 * "cancelled" when its status is cancelled, "failed" when run's answer would have had isError
 * (it did not run to an end of its own: rejected, denied, expired, error, interrupted; the
 * spec counts a tool result with isError as failed), else "completed" (a job that exited
 * non-zero completed the call: its exit code is in the result).
 *
 * Negotiated only with a client that speaks 2025-11-25 or later or declares capabilities.tasks;
 * any other client sees the server as before (no capability, no execution on tools, the tasks
 * methods not found, a params.task ignored).
 *
 * Below: the parts that need no server (negotiation, the status, the Task object, the table of
 * tasks this server created). controller/mcp-task.c also holds the server's task methods, whose
 * prototypes are in controller/mcp-internal.h. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/sha256.h"
#include "common/time-util.h"
#include "parser/request.h"

#define MCP_TASKS_PROTOCOL "2025-11-25"
#define MCP_TASK_POLL_MS 2000
/* Tasks this server created (their creation time, apply and final answer): at most this
 * many, the oldest ended one forgotten first. Any other request of the workspace is a task too,
 * known from the results directory. */
#define MCP_TASKS_MAX 256
#define MCP_META_RELATED_TASK "io.modelcontextprotocol/related-task"
#define MCP_META_IMMEDIATE "io.modelcontextprotocol/model-immediate-response"

typedef struct McpTask {
        char id[REQUEST_ID_MAX + 1];
        usec_t created_at;     /* realtime: when this server wrote the request */
        char sha256[SHA256_HEX_SIZE]; /* of the request's bytes, for the approve command */
        bool apply;            /* run's apply: applied once, when the job ended by itself */
        json_t *final;         /* the tools/call result once ended: tasks/result gives it again */
} McpTask;

typedef struct McpTasks {
        McpTask v[MCP_TASKS_MAX];
        size_t n;
} McpTasks;

/* Does this client get tasks? protocol: the version chosen at initialize; caps: the client's
 * capabilities (may be NULL). */
bool mcp_tasks_negotiated(const char *protocol, const json_t *caps);

/* The server's capabilities.tasks. */
json_t *mcp_tasks_capability(void);

/* params.task of a tools/call: an object whose ttl, when present, is a non-negative integer
 * (milliseconds); other members are ignored (later revisions may add some). */
int mcp_task_params_check(const json_t *task, TfwError *e);

/* The task status of an ended request from its result.json, as above. */
const char *mcp_task_status_of(const json_t *result);

/* A Task: {taskId, status, statusMessage?, createdAt, lastUpdatedAt, ttl, pollInterval}.
 * created and updated are RFC 3339 strings. ttl is always null, whatever the client asked:
 * this server deletes no task; a request is known for as long as the worker keeps its result
 * (retention_days), and tasks/get then says there is no such task. */
json_t *mcp_task_json(const char *id, const char *status, const char *message, const char *created,
                      const char *updated);

McpTask *mcp_tasks_find(McpTasks *t, const char *id);
/* A new entry for id (replacing one of the same id); the oldest ended one goes when full;
 * NULL when every one is still running. */
McpTask *mcp_tasks_add(McpTasks *t, const char *id, usec_t created_at, const char *sha256, bool apply);
void mcp_tasks_clear(McpTasks *t);
