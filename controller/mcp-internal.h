/* SPDX-License-Identifier: MIT */
/* Inside the `mcp` server (controller/mcp.h): its state, its waiting calls, and what
 * controller/mcp.c (the protocol, the tools, the loop) and controller/mcp-task.c (MCP tasks)
 * share. Nothing outside those two files includes this. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/macro.h"
#include "common/sha256.h"
#include "common/time-util.h"
#include "controller/live.h"
#include "controller/mcp-task.h"
#include "controller/mcp.h"
#include "controller/request.h"
#include "controller/site.h"
#include "controller/status.h"

/* JSON-RPC 2.0 error codes. */
#define RPC_PARSE_ERROR (-32700)
#define RPC_INVALID_REQUEST (-32600)
#define RPC_METHOD_NOT_FOUND (-32601)
#define RPC_INVALID_PARAMS (-32602)
#define RPC_INTERNAL_ERROR (-32603)

/* What a waiting call answers. */
typedef enum WaitKind {
        WAIT_TOOL,         /* a tool call: its result */
        WAIT_TASK_WATCH,   /* a task-augmented run, answered at once: keeps its final answer (and
                            * applies its changes) when it ends, tells notifications/tasks/status */
        WAIT_TASK_RESULT,  /* tasks/result: the final answer once it ended */
        WAIT_TASK_CANCEL,  /* tasks/cancel: the Task once cancelled, or why not */
} WaitKind;

typedef struct Waiter {
        WaitKind kind;
        json_t *rpc_id;           /* NULL for WAIT_TASK_WATCH */
        json_t *progress_token;   /* NULL: the client asked for no progress */
        char id[REQUEST_ID_MAX + 1];
        char sha256[SHA256_HEX_SIZE];
        bool answer_pending;      /* run: answer as soon as an operator is needed */
        bool apply;               /* run: apply the job's changes when it ended by itself */
        bool scan_rejected;
        usec_t submitted_at;      /* realtime, for .rejected/ records */
        usec_t started;           /* monotonic */
        usec_t deadline;          /* monotonic; 0: until final */
        usec_t no_worker_at;      /* monotonic: answer with the no-worker words when no worker has
                                   * taken it by then (controller/no-worker.h); 0: not looked at */
        usec_t next_progress;     /* monotonic */
        uint64_t progress;
        ControllerState last;
        LiveFollow live;          /* with a progress token: the job's output, as it comes */
        usec_t next_live;         /* monotonic: no output notification before then (the rate) */
        bool live_more;           /* the live log may hold more than was sent */
        json_t *cancel_before;    /* cancel: the worker's refusals before this cancel (else NULL) */
} Waiter;

typedef struct Mcp {
        McpOptions o;
        int out_fd;
        ControllerSite site;
        bool have_site;
        ControllerWatch watch;
        char protocol[16];
        Waiter waiting[MCP_MAX_WAITING];
        size_t n_waiting;
        int write_error;
        bool tasks;               /* negotiated at initialize (controller/mcp-task.h) */
        McpTasks task_tab;
} Mcp;

/* What a call waits for. */
typedef struct WaitSpec {
        WaitKind kind;
        const char *id;
        const char *sha256;       /* NULL when not known (result) */
        bool answer_pending;      /* run: answer as soon as an operator is needed */
        bool apply;
        usec_t submitted_at;      /* realtime, for .rejected/ records; 0: any */
        unsigned wait_seconds;    /* 0: until final */
        json_t *cancel_before;    /* cancel: the refusals before it (taken over) */
        usec_t no_worker_in;      /* answer with the no-worker words when no worker has taken it
                                   * this long from now; 0: never */
} WaitSpec;

/* controller/mcp.c */
void mcp_send_json(Mcp *m, json_t *msg);
/* Takes result (NULL: an empty object). */
void mcp_send_result(Mcp *m, json_t *id, json_t *result);
void mcp_send_error(Mcp *m, json_t *id, int code, const char *fmt, ...) _printf_(4, 5);
void mcp_send_progress(Mcp *m, Waiter *w, const char *message);
/* The tool result of an ended request (res its result.json), as run answers it. */
json_t *mcp_outcome_result(Mcp *m, const char *id, json_t *res, bool anonymous, bool apply);
bool mcp_site_ready(Mcp *m, TfwError *e);
bool mcp_watch_ready(Mcp *m, TfwError *e);
/* run's request written: NULL, or the tool error to answer with (nothing written). */
json_t *mcp_run_submit(Mcp *m, json_t *args, ControllerRequest *req, usec_t *ret_submitted_at, bool *ret_apply,
                       int64_t *ret_wait);
void mcp_waiter_add(Mcp *m, json_t *rpc_id, json_t *token, const WaitSpec *ws);

/* controller/mcp-task.c */
/* A waiting task call (WAIT_TASK_*): true when it is done with. */
bool mcp_task_waiter_check(Mcp *m, Waiter *w, const ControllerStatus *st, const json_t *refusal);
/* run called as a task: the CreateTaskResult, or run's tool error. */
json_t *mcp_tool_run_task(Mcp *m, json_t *args, json_t *token);
/* tasks/get, tasks/result, tasks/cancel, tasks/list. */
void mcp_handle_tasks(Mcp *m, json_t *id, const char *method, json_t *params);
