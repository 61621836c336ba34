// The official MCP TypeScript SDK's client driving `tentaflake-worker mcp` (issue 15), run by
// tests/integration/test-controller-mcp.sh as the controller's uid. Usage:
//   node client.mjs BIN WORKSPACE
// Prints "ok: ..." per passed check, "FAIL: ..." per failed one, "PENDING <command>" when the
// pending request waits for the test to approve it, and exits 1 when any check failed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

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

const transport = new StdioClientTransport({ command: bin, args: ["mcp"], cwd: workspace, stderr: "inherit" });
const client = new Client({ name: "i15-sdk-client", version: "1.0.0" });
// What the server answered to initialize, seen on the wire (the SDK keeps no copy for stdio).
let negotiated = null;
// connect() keeps a handler set before it and calls it first.
transport.onmessage = (m) => {
  if (m && m.result && m.result.protocolVersion) negotiated = m.result.protocolVersion;
};
// A response to a cancelled call would arrive for an id the SDK no longer knows: an error here.
const strays = [];
client.onerror = (e) => strays.push(String(e));
try {
  await client.connect(transport); // initialize + notifications/initialized
  check("initialize: the server names itself", client.getServerVersion()?.name === "tentaflake-worker", client.getServerVersion());
  check("initialize: the SDK's latest protocol version is spoken", negotiated === "2025-11-25", negotiated);
  check("initialize: tools capability", client.getServerCapabilities()?.tools !== undefined, client.getServerCapabilities());
  await client.ping();
  check("ping answered", true);

  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  check("tools/list: run, result, list, apply, cancel",
    JSON.stringify(names) === JSON.stringify(["apply", "cancel", "list", "result", "run"]), names);
  const run = tools.find((t) => t.name === "run");
  check("run: argv is required", run?.inputSchema?.required?.includes("argv"), run?.inputSchema);

  // A job that writes output and an artifact, with progress asked for.
  let progress = [];
  const ok = await client.callTool(
    { name: "run", arguments: { argv: ["sh", "-c", "echo hello-from-mcp; mkdir -p artifacts; echo x >artifacts/out.txt"] } },
    undefined,
    { onprogress: (p) => progress.push(p), timeout: 300000, resetTimeoutOnProgress: true },
  );
  const s = ok.structuredContent || {};
  check("run: succeeded", s.status === "succeeded" && s.exit_status === 0 && ok.isError === false, ok);
  check("run: the log's tail in the text", text(ok).includes("hello-from-mcp"), text(ok));
  check("run: the log's tail in structuredContent", (s.log_tail || "").includes("hello-from-mcp"), s);
  check("run: the artifact's path", (s.artifacts || []).some((a) => a.endsWith("/artifacts/out.txt")), s.artifacts);
  check("run: progress notifications arrived", progress.length >= 1, progress);
  check("run: progress increases", progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), progress);

  const fail = await client.callTool({ name: "run", arguments: { argv: ["sh", "-c", "echo bad; exit 3"], timeout_seconds: 60 } },
    undefined, { timeout: 300000 });
  check("run: a failing job's exit code", fail.structuredContent?.exit_code === 3 && fail.structuredContent?.status === "failed", fail);

  // cwd (contract sections 4 and 9): the directory the command starts in, relative to the workspace.
  check("run: cwd is in the schema", run?.inputSchema?.properties?.cwd?.type === "string", run?.inputSchema);
  const inDir = await client.callTool({ name: "run", arguments: { argv: ["sh", "-c", "echo pwd=$(pwd)"], cwd: "mcpdir/sub" } },
    undefined, { timeout: 300000 });
  check("run: cwd: the job started there", (inDir.structuredContent?.log_tail || "").includes("pwd=/work/mcpdir/sub"), inDir);
  const noDir = await client.callTool({ name: "run", arguments: { argv: ["true"], cwd: "mcpdir/none" } },
    undefined, { timeout: 300000 });
  check("run: cwd missing from the snapshot: rejected, cwd_not_found",
    noDir.structuredContent?.status === "rejected" && noDir.structuredContent?.error === "cwd_not_found", noDir);
  const upDir = await client.callTool({ name: "run", arguments: { argv: ["true"], cwd: "../etc" } });
  check("run: cwd leaving the workspace: a tool error naming bad_cwd", upDir.isError === true && /bad_cwd|cwd/.test(text(upDir)), upDir);

  // Changes (issue 34): listed in the answer; applied with apply: true, or by the apply tool.
  const chg = await client.callTool({ name: "run", arguments: { argv: ["sh", "-c", "echo from-mcp >mcp-made.txt"] } },
    undefined, { timeout: 300000 });
  check("run: its changes are in the answer", chg.structuredContent?.changes?.added === 1 && /apply tool/.test(text(chg)), chg);
  const ap = await client.callTool({ name: "apply", arguments: { id: chg.structuredContent?.id } }, undefined, { timeout: 300000 });
  check("apply: the tool applies them", ap.isError === false && ap.structuredContent?.applied === true, ap);
  const again = await client.callTool({ name: "apply", arguments: { id: chg.structuredContent?.id } }, undefined, { timeout: 300000 });
  check("apply: a second time: a tool error naming the conflict", again.isError === true && /conflict: 'mcp-made.txt'/.test(text(again)), again);
  const git = await client.callTool({ name: "apply", arguments: { id: chg.structuredContent?.id, allow_git: true } });
  check("apply: the tool takes no allow_git (only a person's command line does)", git.isError === true && /allow_git/.test(text(git)), git);
  const auto = await client.callTool({ name: "run", arguments: { argv: ["sh", "-c", "echo auto >mcp-auto.txt"], apply: true } },
    undefined, { timeout: 300000 });
  check("run: apply: true applies what the job changed", auto.structuredContent?.applied === true, auto);

  // wait_seconds: an answer before the end, then the outcome through result.
  const early = await client.callTool({ name: "run", arguments: { argv: ["sh", "-c", "sleep 4; echo slept"], wait_seconds: 1 } },
    undefined, { timeout: 60000 });
  const es = early.structuredContent || {};
  check("run: wait_seconds answers before the job ends", ["unknown", "queued", "running"].includes(es.status) &&
        early.isError === false && /result tool/.test(text(early)), early);
  const end = await client.callTool({ name: "result", arguments: { id: es.id, wait_seconds: 120 } }, undefined, { timeout: 300000 });
  check("result: then the outcome", end.structuredContent?.status === "succeeded" && text(end).includes("slept"), end);

  const bad = await client.callTool({ name: "run", arguments: { argv: "not-an-array" } });
  check("run: bad arguments are a tool error", bad.isError === true && /argv/.test(text(bad)), bad);
  const unknownField = await client.callTool({ name: "run", arguments: { argv: ["true"], shell: true } });
  check("run: an unknown field is a tool error", unknownField.isError === true && /shell/.test(text(unknownField)), unknownField);
  const forbidden = await client.callTool({ name: "run", arguments: { argv: ["true"], action_class: "forbidden" } });
  check("run: forbidden is refused", forbidden.isError === true && /forbidden/.test(text(forbidden)), forbidden);

  let threw = null;
  try { await client.callTool({ name: "no-such-tool", arguments: {} }); } catch (e) { threw = e; }
  check("an unknown tool is a JSON-RPC error", threw && threw.code === -32602, String(threw));

  // Pending: answered at once with the approve command; the test approves it; result waits.
  const pend = await client.callTool({ name: "run", arguments: { argv: ["sh", "-c", "echo approved-mcp"],
    action_class: "irreversible", id: "i15mcppend", reason: "the MCP test" } });
  const ps = pend.structuredContent || {};
  check("run: pending answered at once", ps.status === "pending" && ps.id === "i15mcppend", pend);
  check("run: pending carries the approve command", /approve i15mcppend --expect-sha256 [0-9a-f]{64}/.test(ps.approve_command || ""), ps);
  // Waiting for a pending request: bounded by wait_seconds, answered with where it is.
  const still = await client.callTool({ name: "result", arguments: { id: "i15mcppend", wait_seconds: 1 } },
    undefined, { timeout: 60000 });
  check("result: wait_seconds ends with the state", still.structuredContent?.status === "pending" && !still.isError, still);
  // A waiting call cancelled by the client (notifications/cancelled) gets no answer; the server
  // goes on answering.
  const ac = new AbortController();
  const cancelled = client.callTool({ name: "result", arguments: { id: "i15mcppend", wait_seconds: 600 } },
    undefined, { signal: ac.signal });
  await client.ping();
  ac.abort("changed my mind");
  let aborted = false;
  try { await cancelled; } catch (e) { aborted = true; }
  check("result: a cancelled wait is abandoned", aborted);
  await client.ping();
  check("ping answered while and after a call waited", true);
  console.log(`PENDING ${ps.approve_command}`);
  const later = await client.callTool({ name: "result", arguments: { id: "i15mcppend", wait_seconds: 120 } },
    undefined, { timeout: 300000 });
  check("result: the approved job's outcome", later.structuredContent?.status === "succeeded" &&
        text(later).includes("approved-mcp"), later);

  const unknown = await client.callTool({ name: "result", arguments: { id: "i15-never-submitted" } });
  check("result: an unknown id is a tool error", unknown.isError === true, unknown);

  const list = await client.callTool({ name: "list", arguments: {} });
  const recent = list.structuredContent?.recent || [];
  check("list: the recent requests", recent.some((r) => r.id === "i15mcppend" && r.status === "succeeded"), list.structuredContent);

  await client.ping();
  check("still answering at the end", true);
  check("no stray message reached the client", strays.length === 0, strays);
} catch (e) {
  failed++;
  console.log(`FAIL: the client threw: ${e && e.stack ? e.stack : e}`);
} finally {
  await client.close().catch(() => {});
}
process.exit(failed ? 1 : 0);
