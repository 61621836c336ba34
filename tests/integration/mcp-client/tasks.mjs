// MCP tasks (protocol 2025-11-25; issue 35 item 2) through the official SDK's client, run by
// tests/integration/test-controller-mcp.sh as the controller's uid. Usage:
//   node tasks.mjs BIN WORKSPACE
// The capability and run's execution.taskSupport; a task-augmented run through the SDK's own
// callToolStream (created, polled with tasks/get, its result with tasks/result); a client that
// disconnects while its task runs and a new server that gives the same task's status and result;
// a job that exits non-zero (completed, its exit code in the result); tasks/cancel of a running
// job and of a pending request (working while it waits for the operator), refused once ended;
// tasks/list; an unknown task id. Prints "ok: ..." / "FAIL: ..." and exits 1 when any check failed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [bin, workspace] = process.argv.slice(2);
let failed = 0;
const check = (what, cond, detail) => {
  if (cond) console.log(`ok: ${what}`);
  else {
    failed++;
    console.log(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
  }
};
const text = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
const long = { timeout: 300000 };

async function connect(name) {
  const c = new Client({ name, version: "1.0.0" });
  await c.connect(new StdioClientTransport({ command: bin, args: ["mcp"], cwd: workspace, stderr: "inherit" }));
  return c;
}

// Poll tasks/get (at the task's pollInterval, as the SDK does) until the status is not working.
async function settle(c, taskId) {
  const t0 = Date.now();
  for (;;) {
    const t = await c.experimental.tasks.getTask(taskId);
    if (t.status !== "working" || Date.now() - t0 > 240000) return t;
    await new Promise((r) => setTimeout(r, t.pollInterval ?? 1000));
  }
}

// A task-augmented run sent as such (the SDK's client.request with params.task): the CreateTaskResult.
async function runAsTask(c, args) {
  return c.request({ method: "tools/call", params: { name: "run", arguments: args, task: { ttl: 600000 } } },
    CreateTaskResultSchema, long);
}

let client = await connect("i35-tasks-client");
let sleeping = null; // a sleep 300 task not cancelled yet: cancelled in the end whatever failed
try {
  const caps = client.getServerCapabilities();
  check("initialize: capabilities.tasks with requests.tools.call, cancel, list",
    caps?.tasks?.requests?.tools?.call !== undefined && caps?.tasks?.cancel !== undefined && caps?.tasks?.list !== undefined, caps);
  const { tools } = await client.listTools();
  const run = tools.find((t) => t.name === "run");
  check("tools/list: run's execution.taskSupport is optional", run?.execution?.taskSupport === "optional", run?.execution);
  check("tools/list: no other tool is a task",
    tools.filter((t) => t.name !== "run").every((t) => t.execution === undefined), tools.map((t) => t.execution));

  // The SDK's own task flow: created, polled, the result.
  const seen = [];
  let final = null, created = null;
  for await (const msg of client.experimental.tasks.callToolStream(
    { name: "run", arguments: { argv: ["sh", "-c", "echo task-out; sleep 2; echo task-end"] } }, undefined,
    { ...long, task: { ttl: 600000 } })) {
    seen.push(msg.type);
    if (msg.type === "taskCreated") created = msg.task;
    if (msg.type === "result") final = msg.result;
    if (msg.type === "error") check("callToolStream: no error", false, String(msg.error));
  }
  check("callToolStream: created a working task whose id is the request's",
    created?.status === "working" && /^mcp-/.test(created?.taskId || ""), created);
  check("callToolStream: ended with the result", seen[0] === "taskCreated" && seen[seen.length - 1] === "result", seen);
  check("tasks/result: run's answer (succeeded, the job's output)",
    final?.structuredContent?.status === "succeeded" && /task-out\ntask-end/.test(final?.structuredContent?.log_tail || ""),
    final);
  check("tasks/result: _meta names the task",
    final?._meta?.["io.modelcontextprotocol/related-task"]?.taskId === created?.taskId, final?._meta);
  const got = await client.experimental.tasks.getTask(created.taskId);
  check("tasks/get after the end: completed, createdAt and lastUpdatedAt",
    got.status === "completed" && got.createdAt <= got.lastUpdatedAt && got.ttl === null, got);

  // A job that exits 3: the call completed; the job's exit code is in its result.
  const three = await runAsTask(client, { argv: ["sh", "-c", "exit 3"] });
  const t3 = await settle(client, three.task.taskId);
  check("a job that exits 3: the task completed", t3.status === "completed" && /exit code 3/.test(t3.statusMessage || ""), t3);
  const r3 = await client.experimental.tasks.getTaskResult(three.task.taskId, CallToolResultSchema, long);
  check("... and tasks/result says failed, exit code 3", r3.structuredContent?.status === "failed" &&
    r3.structuredContent?.exit_code === 3 && r3.isError === false, r3);

  // The client goes away while its task runs; the job outlives it, and a new server knows the task.
  const away = await runAsTask(client, { argv: ["sh", "-c", "sleep 3; echo outlived"] });
  check("a task-augmented run answers at once, working", away.task?.status === "working", away);
  await client.close();
  client = await connect("i35-tasks-again");
  const back = await client.experimental.tasks.getTask(away.task.taskId);
  check("after reconnecting: tasks/get knows the task", ["working", "completed"].includes(back.status), back);
  const backRes = await client.experimental.tasks.getTaskResult(away.task.taskId, CallToolResultSchema, long);
  check("after reconnecting: tasks/result waits for the end and gives the job's output",
    backRes.structuredContent?.status === "succeeded" && /outlived/.test(backRes.structuredContent?.log_tail || ""), backRes);

  // tasks/cancel of a running job.
  const sleeper = await runAsTask(client, { argv: ["sleep", "300"] });
  const sid = sleeper.task.taskId;
  sleeping = sid;
  for (let i = 0; i < 100; i++) {
    const t = await client.experimental.tasks.getTask(sid);
    if (/^running/.test(t.statusMessage || "")) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const t0 = Date.now();
  const cancelled = await client.experimental.tasks.cancelTask(sid, long);
  check(`tasks/cancel: the task is cancelled (${(Date.now() - t0) / 1000} s)`, cancelled.status === "cancelled", cancelled);
  sleeping = null;
  const cres = await client.experimental.tasks.getTaskResult(sid, CallToolResultSchema, long);
  check("tasks/result of the cancelled task: cancelled_by_controller",
    cres.structuredContent?.status === "cancelled" && cres.structuredContent?.error === "cancelled_by_controller", cres);
  let again = null;
  try { await client.experimental.tasks.cancelTask(sid); } catch (e) { again = e; }
  check("tasks/cancel of an ended task: -32602", again?.code === -32602, String(again));

  // A pending request: working (the operator's act, not input the client gives), cancelled.
  const pend = await runAsTask(client, { argv: ["true"], action_class: "irreversible" });
  let pt = null;
  for (let i = 0; i < 100; i++) {
    pt = await client.experimental.tasks.getTask(pend.task.taskId);
    if (/^pending/.test(pt.statusMessage || "")) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  check("a pending request's task: working, the statusMessage names the approve command, bound to its bytes",
    pt?.status === "working" && /approve mcp-[a-z0-9-]+ --expect-sha256 [0-9a-f]{64}$/.test(pt?.statusMessage || ""), pt);
  const pc = await client.experimental.tasks.cancelTask(pend.task.taskId, long);
  check("tasks/cancel of a pending request: cancelled", pc.status === "cancelled", pc);

  const { tasks } = await client.experimental.tasks.listTasks();
  const ids = tasks.map((t) => t.taskId);
  check("tasks/list: every task of this workspace",
    [created.taskId, three.task.taskId, away.task.taskId, sid, pend.task.taskId].every((i) => ids.includes(i)), ids);
  let unknown = null;
  try { await client.experimental.tasks.getTask("no-such-task"); } catch (e) { unknown = e; }
  check("tasks/get of an unknown id: -32602", unknown?.code === -32602, String(unknown));
  // Without params.task, run answers as before.
  const plain = await client.callTool({ name: "run", arguments: { argv: ["echo", "plain"] } }, undefined, long);
  check("run without a task: answered when it ends, as before", plain.structuredContent?.status === "succeeded", plain);
} catch (e) {
  check("no exception", false, String(e && e.stack ? e.stack : e));
} finally {
  if (sleeping) await client.experimental.tasks.cancelTask(sleeping, long).catch(() => {});
  await client.close().catch(() => {});
}
process.exit(failed ? 1 : 0);
