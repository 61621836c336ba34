/* SPDX-License-Identifier: MIT */
/* `mcp` (contract section 9): a Model Context Protocol server on stdio, JSON-RPC 2.0, one
 * message per line, as the controller's own user.
 *
 * Protocol: initialize (the client's protocolVersion when this server speaks it, else the
 * newest one it speaks; MCP_PROTOCOL_VERSIONS), ping, tools/list, tools/call, the
 * notifications initialized and cancelled (a cancelled call gets no answer; its job, already
 * in the inbox, runs on). Tools:
 *   run     argv, action_class (default local-reversible), timeout_seconds, reason, id: submits
 *           like `submit` and answers when the job ends, or at once when it waits for an
 *           operator (status pending, its id and the approve command), or, as an error with
 *           the words of controller/no-worker.h, when no worker has taken it after
 *           CONTROLLER_NO_WORKER_SECONDS; wait_seconds (1..3600) answers with where it is when
 *           the job has not ended by then;
 *   result  id, wait_seconds (0..3600, default 0): the outcome or the current state (for a
 *           request still in the inbox, that no worker took it);
 *   list    recent (0..100, default 20): the controller's list (controller/list.h);
 *   apply   id, dry_run; cancel id.
 * With a client that negotiated tasks (controller/mcp-task.h): run called with params.task
 * answers a CreateTaskResult at once, and tasks/get, tasks/result, tasks/cancel and tasks/list
 * follow any request of the workspace by its id.
 * A final outcome carries status, exit code, the exit status `submit` would take, the log's
 * last 16 KiB and the artifacts' paths. With a progressToken in a call's _meta, the server
 * sends notifications/progress when the call starts waiting, at every change of state and every
 * MCP_PROGRESS_INTERVAL_SECONDS while it waits; and, while the job runs, its new output lines
 * (controller/live.h) as "output:\n<lines>", at most MCP_LIVE_NOTIFY_BYTES each and one per
 * MCP_LIVE_INTERVAL_USEC, in order, never a byte twice. `result` on a running job gives the log
 * so far from its `offset` (MCP_LOG_READ_BYTES at most) and the next offset; with an offset, an
 * ended job's job.log from there.
 *
 * Robustness (the input is the client's): a line longer than MCP_MESSAGE_MAX is discarded
 * whole and answered with an Invalid Request error; malformed JSON (duplicate keys and NUL
 * escapes included) gets Parse error, a message that is not a request Invalid Request, an
 * unknown method Method not found, malformed params Invalid params; a tool's bad arguments get
 * a result with isError and the reason (the same limits as the worker's parser, which judges
 * them). Calls wait concurrently (at most MCP_MAX_WAITING) while the server goes on answering;
 * nothing the client sends can make it crash or stop answering. It ends at end of input. */
#pragma once

#include "common/error.h"

#define MCP_MESSAGE_MAX (4 * 1024 * 1024)
#define MCP_MAX_WAITING 64
#define MCP_PROGRESS_INTERVAL_SECONDS 5
#define MCP_LOG_TAIL_BYTES (16 * 1024)
/* Live output (controller/live.h): at most this much of it in one progress notification, and
 * at most one such notification per MCP_LIVE_INTERVAL_USEC per call (4 a second). */
#define MCP_LIVE_NOTIFY_BYTES 4096
#define MCP_LIVE_INTERVAL_USEC (250 * USEC_PER_MSEC)
/* The result tool's log from an offset: at most this much per call. */
#define MCP_LOG_READ_BYTES (64 * 1024)
#define MCP_ARTIFACTS_MAX 1000
#define MCP_LATEST_PROTOCOL "2025-11-25"

extern const char *const mcp_protocol_versions[];

typedef struct McpOptions {
        const char *workspace;  /* NULL: the current directory or its nearest parent with the inbox */
        const char *results;    /* NULL: from worker.json */
} McpOptions;

/* Serve until end of input: 0, or a negative errno when the output cannot be written or the
 * input read. */
int mcp_serve(int in_fd, int out_fd, const McpOptions *o, TfwError *e);
