// The MCP cancel tool (issue 35 item 3) through the official SDK's client, run by
// tests/integration/test-controller-mcp.sh as the controller's uid. Usage:
//   node cancel.mjs BIN WORKSPACE
// A running job (sleep 300) and a pending request cancelled; a cancel of an ended request and of
// an unknown id refused. Prints "ok: ..." / "FAIL: ..." and exits 1 when any check failed.
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
const long = { timeout: 300000 };

const client = new Client({ name: "i35-cancel-client", version: "1.0.0" });
try {
  await client.connect(new StdioClientTransport({ command: bin, args: ["mcp"], cwd: workspace, stderr: "inherit" }));
  const { tools } = await client.listTools();
  const cancel = tools.find((t) => t.name === "cancel");
  check("tools/list: cancel, id required", cancel?.inputSchema?.required?.includes("id"), tools.map((t) => t.name));

  // A running job: run answers after wait_seconds with where it is and its id.
  const started = await client.callTool({ name: "run", arguments: { argv: ["sleep", "300"], wait_seconds: 1 } },
    undefined, long);
  const id = started.structuredContent?.id;
  check("run sleep 300: not ended after 1 s", typeof id === "string" && started.structuredContent?.status !== "succeeded", started);
  const t0 = Date.now();
  const c = await client.callTool({ name: "cancel", arguments: { id } }, undefined, long);
  const secs = (Date.now() - t0) / 1000;
  check("cancel: status cancelled, cancelled_by_controller",
    c.structuredContent?.status === "cancelled" && c.structuredContent?.error === "cancelled_by_controller", c);
  check(`cancel: answered within 120 s (${secs} s)`, secs < 120, secs);
  const again = await client.callTool({ name: "result", arguments: { id } });
  check("result: the job stays cancelled", again.structuredContent?.status === "cancelled", again);

  const twice = await client.callTool({ name: "cancel", arguments: { id } });
  check("cancel of an ended request: a tool error saying so",
    twice.isError === true && /already ended as cancelled/.test(text(twice)), twice);
  const unknown = await client.callTool({ name: "cancel", arguments: { id: "no-such-request" } });
  check("cancel of an unknown id: a tool error saying so",
    unknown.isError === true && /no request with that id/.test(text(unknown)), unknown);
  const bad = await client.callTool({ name: "cancel", arguments: { id: "../x" } });
  check("cancel of a path: a tool error (bad_id)", bad.isError === true && /bad_id/.test(text(bad)), bad);
  const extra = await client.callTool({ name: "cancel", arguments: { id, force: true } });
  check("cancel with an unknown field: a tool error", extra.isError === true, extra);

  // A pending request: withdrawn.
  const pend = await client.callTool({ name: "run", arguments: { argv: ["true"], action_class: "irreversible" } },
    undefined, long);
  check("run irreversible: pending", pend.structuredContent?.status === "pending", pend);
  const w = await client.callTool({ name: "cancel", arguments: { id: pend.structuredContent?.id } }, undefined, long);
  check("cancel of a pending request: withdrawn",
    w.structuredContent?.status === "cancelled" && /withdrawn/.test(w.structuredContent?.message || ""), w);
} catch (e) {
  check("no exception", false, String(e && e.stack ? e.stack : e));
} finally {
  await client.close().catch(() => {});
}
process.exit(failed ? 1 : 0);
