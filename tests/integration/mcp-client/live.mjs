// Live output through MCP (issue 35, item 1), with the official SDK's client, run by
// tests/integration/test-live-output.sh as the controller's uid. Usage:
//   node live.mjs BIN WORKSPACE RESULTS_DIR MAX_LOG_BYTES
// A run with a progress token gets the job's new lines in notifications/progress ("output:\n"
// then the lines), while the job runs, at most 4 KiB each and 4 a second; result on the running
// job gives the log so far and the offset to go on from; a 10 MB job's notifications carry the
// head of job.log and the final answer its tail, within the cap. Prints "ok: ..." / "FAIL: ...",
// exits 1 when any check failed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { existsSync, readFileSync } from "node:fs";

const [bin, workspace, results, maxLog] = process.argv.slice(2);
let failed = 0;
const check = (what, cond, detail) => {
  if (cond) console.log(`ok: ${what}`);
  else {
    failed++;
    console.log(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail).slice(0, 600)}`);
  }
};
const PREFIX = "output:\n";
const transport = new StdioClientTransport({ command: bin, args: ["mcp"], cwd: workspace, stderr: "inherit" });
const client = new Client({ name: "i35-live-client", version: "1.0.0" });

// run ID ARGV: call run with progress; the output notifications (text, when, and whether the
// result existed yet) and the answer.
async function run(id, argv, onOutput) {
  const outputs = [];
  const answer = await client.callTool({ name: "run", arguments: { id, argv } }, undefined, {
    timeout: 300000,
    resetTimeoutOnProgress: true,
    onprogress: (p) => {
      if (typeof p.message !== "string" || !p.message.startsWith(PREFIX)) return;
      const o = { text: p.message.slice(PREFIX.length), at: Date.now(), ended: existsSync(`${results}/${id}/result.json`) };
      outputs.push(o);
      if (onOutput) onOutput(o, outputs.length);
    },
  });
  return { outputs, answer };
}

try {
  await client.connect(transport);

  // Ticks: the first arrives while the job runs; result on the running job gives the log so far.
  let during = null;
  const ticks = await run("mcp-live-ticks", ["sh", "-c", "for i in 1 2 3 4 5; do echo tick$i; sleep 1; done"], (o, n) => {
    if (n === 1)
      during = client.callTool({ name: "result", arguments: { id: "mcp-live-ticks" } });
  });
  const t = ticks.outputs;
  check("ticks: output notifications arrived", t.length >= 1, ticks.answer);
  check("ticks: the first one is tick1", t.length >= 1 && t[0].text.startsWith("tick1\n"), t);
  check("ticks: it came while the job ran (no result.json yet)", t.length >= 1 && !t[0].ended, t);
  check("ticks: all five ticks, once each, in order", t.map((o) => o.text).join("") === "tick1\ntick2\ntick3\ntick4\ntick5\n", t);
  const mid = during ? await during : null;
  const ms = mid?.structuredContent || {};
  check("result while running: status running", ms.status === "running", mid);
  check("result while running: the log so far from offset 0", typeof ms.log === "string" && ms.log.startsWith("tick1\n") &&
        ms.offset === 0 && ms.next_offset === Buffer.byteLength(ms.log) && ms.log_complete === false, ms);
  const rest = await client.callTool({ name: "result", arguments: { id: "mcp-live-ticks", offset: ms.next_offset ?? 0 } });
  const rs = rest.structuredContent || {};
  check("result with offset after the end: the rest of job.log, complete",
        (ms.log || "") + (rs.log || "") === "tick1\ntick2\ntick3\ntick4\ntick5\n" && rs.log_complete === true, rs);
  check("ticks: the answer is the job's", ticks.answer.structuredContent?.status === "succeeded", ticks.answer);

  // 10 MB fast: bounded notifications, the head of job.log; the answer's tail is job.log's.
  const started = Date.now();
  const flood = await run("mcp-live-flood", ["sh", "-c", "seq 1 1400000; echo last line"]);
  const f = flood.outputs;
  const log = readFileSync(`${results}/mcp-live-flood/job.log`, "latin1");
  const sent = f.map((o) => o.text).join("");
  check("flood: output notifications arrived", f.length >= 1, flood.answer.structuredContent);
  check("flood: each at most 4 KiB", f.every((o) => Buffer.byteLength(o.text) <= 4096), f.map((o) => o.text.length));
  check("flood: at most 4 a second", f.every((o, i) => i === 0 || o.at - f[i - 1].at >= 200), f.map((o) => o.at - started));
  check("flood: all of it within the cap", Buffer.byteLength(sent) <= Number(maxLog), sent.length);
  check("flood: they are the head of job.log", sent.length > 0 && log.startsWith(sent), sent.slice(0, 100));
  const tail = flood.answer.structuredContent?.log_tail || "";
  check("flood: the answer's tail is job.log's", tail.length > 0 && log.endsWith(tail) && tail.endsWith("last line\n"), tail.slice(-100));
  check("flood: job.log was cut", /bytes omitted\]/.test(log), log.length);
} catch (e) {
  failed++;
  console.log(`FAIL: the client threw: ${e && e.stack ? e.stack : e}`);
} finally {
  await client.close().catch(() => {});
}
process.exit(failed ? 1 : 0);
