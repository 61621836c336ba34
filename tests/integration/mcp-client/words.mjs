// What `tentaflake-worker mcp` tells the model, driven by the official MCP TypeScript SDK's
// client (issue 35), run by tests/integration/test-controller-mcp.sh as the controller's uid.
// Usage:
//   node words.mjs BIN DIR EXPECT_JSON
// The server is started in DIR (inside the workspace). EXPECT_JSON says what to check:
//   "network": null or the allowlist, "cache": null or the cache paths, "cwd": the directory's
//   path below the workspace, "memory": limits.memory as the words say it ("512 MiB"),
//   "changes": whether changesets come back: the initialize instructions and the run tool's
//   description must say exactly that (item 5);
//   "no_worker": "NAME": no worker runs; run must answer within bounds with the words that
//   name worker NAME, and result must say the same (item 4).
// Prints "ok: ..." per passed check, "FAIL: ..." per failed one; exits 1 when any failed.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [bin, dir, expectJson] = process.argv.slice(2);
const expect = JSON.parse(expectJson);
let failed = 0;
const check = (what, cond, detail) => {
  if (cond) console.log(`ok: ${what}`);
  else {
    failed++;
    console.log(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
  }
};
const text = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

const transport = new StdioClientTransport({ command: bin, args: ["mcp"], cwd: dir, stderr: "inherit" });
const client = new Client({ name: "i35-words-client", version: "1.0.0" });
try {
  await client.connect(transport);

  if ("network" in expect) {
    const { tools } = await client.listTools();
    const texts = { instructions: client.getInstructions() || "", "run's description": tools.find((t) => t.name === "run")?.description || "" };
    for (const [where, t] of Object.entries(texts)) {
      if (expect.network === null) {
        check(`${where}: says there is no network`, t.includes("Network: none."), t);
        check(`${where}: names no proxy`, !t.includes("through the worker's proxy"), t);
      } else {
        check(`${where}: says the network is the allowlist`, t.includes("Network: only these host:port pairs, through the worker's proxy"), t);
        check(`${where}: names every allowed host:port`, expect.network.every((h) => t.includes(h)), t);
        check(`${where}: does not say there is no network`, !/network: none|no network/i.test(t), t);
      }
      if (expect.cache === null)
        check(`${where}: says nothing of a build cache`, !t.includes("Build cache"), t);
      else
        check(`${where}: names the build cache's paths`, t.includes(`leaves under ${expect.cache.join(", ")} (paths of /work)`), t);
      check(`${where}: says where a command starts`, t.includes(`'${expect.cwd}' (/work/${expect.cwd})`), t);
      check(`${where}: says the memory limit`, t.includes(`${expect.memory} of memory`), t);
      check(`${where}: says what becomes of the changes`, expect.changes ? t.includes("applied only with the apply tool") :
            t.includes("is lost when it ends"), t);
    }
  }

  if (expect.no_worker) {
    // Saying when nothing answers (item 4): run answers after CONTROLLER_NO_WORKER_SECONDS (5 s)
    // instead of waiting for a worker that does not run. The client's own timeout (60 s) bounds
    // the test: without the answer the call fails with a timeout.
    const t0 = Date.now();
    let r = null, threw = null;
    try {
      r = await client.callTool({ name: "run", arguments: { argv: ["true"], id: "i35mcpnone" } }, undefined, { timeout: 60000 });
    } catch (e) { threw = e; }
    const took = Date.now() - t0;
    check("no worker: run answers instead of waiting", r !== null, String(threw));
    r = r || {};
    check(`no worker: ... after the 5 s (${took} ms), not long after`, took >= 4900 && took < 30000, took);
    check("no worker: ... as an error: the command has not run", r.isError === true, r);
    check("no worker: ... saying no worker took it", /request 'i35mcpnone' is still in the inbox after 5 s: no worker has taken it/.test(text(r)), text(r));
    check("no worker: ... naming the worker from worker.json", text(r).includes(`This workspace's worker is '${expect.no_worker}'`), text(r));
    check("no worker: ... and what runs it", /no unit of the package runs it|tentaflake-worker@/.test(text(r)), text(r));
    check("no worker: structuredContent says it was not taken", r.structuredContent?.taken === false && r.structuredContent?.id === "i35mcpnone", r.structuredContent);
    const again = await client.callTool({ name: "result", arguments: { id: "i35mcpnone" } });
    check("no worker: result on it says the same words", again.isError === true && text(again).includes("no worker has taken it") &&
          text(again).includes(`'${expect.no_worker}'`), again);
  }
  await client.ping();
  check("still answering at the end", true);
} catch (e) {
  failed++;
  console.log(`FAIL: the client threw: ${e && e.stack ? e.stack : e}`);
} finally {
  await client.close().catch(() => {});
}
process.exit(failed ? 1 : 0);
