#!/usr/bin/env bash
# The controller's side, `mcp` (issue 15; contract section 9; threat 14), against the real
# daemon and real runsc capsules, as the controller's unprivileged uid (10000, no groups):
#  - the official MCP TypeScript SDK's client (@modelcontextprotocol/sdk, installed here with
#    `npm ci` from the committed package-lock.json into a temporary directory, run with the
#    machine's node): initialize, list the tools, call run (output, artifacts, progress), a
#    failing job, bad arguments, an unknown tool, a pending request that the test approves while
#    the client waits in `result`, and list;
#  - a malformed-message corpus (mcp-malformed.py: truncated JSON, wrong types, unknown methods,
#    huge strings and lines, bad framing) after each entry of which the server still answers;
#  - issue 35 (words.mjs): the instructions and the run tool's description say what worker.json
#    says a job gets (no network and no cache here; an allowlist and a cache for a second worker's
#    config), and with no worker running, run answers after 5 s with the words that name the
#    worker, and result says the same;
#  - issue 35 item 3 (cancel.mjs): the cancel tool on a running job (sleep 300) and a pending
#    request, refused for an ended one, an unknown id and a path; the capsule gone, audited;
#  - issue 35 item 2 (tasks.mjs): run as an MCP task (2025-11-25) through the SDK's own task
#    flow, tasks/get, tasks/result, a client that disconnects and a new server that knows its
#    task, tasks/cancel of a running job and a pending request, tasks/list.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIP: node and npm are not installed"; exit 77; }
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 18 ] || { echo "SKIP: node $node_major is older than the SDK's 18"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=$(test_dir i15-mcp)
# A second worker, never running, whose config has network.allow and a cache (issue 35).
dir2=$(test_dir i35-words)
chmod 0755 "$dir" "$dir2"
trap 'worker_cleanup "$dir"; worker_cleanup "$dir2"' EXIT
new_worker "$dir" ', "pending_ttl_hours": 1, "limits": {"memory": "512m", "memory_swap": "512m"}'
ws="$dir/ws"
mkdir -p "$dir/bin" "$dir/home" "$dir/client"
# TFW_CONTROLLER_BIN: the controller side from another build (an ASan one, say).
install -m 0755 "${TFW_CONTROLLER_BIN:-$BIN}" "$dir/bin/tentaflake-worker"
chown 10000:10000 "$dir/home"
mkdir -p "$dir/ws/mcpdir/sub" && chown -R 10000:10000 "$dir/ws/mcpdir" # the client's run with a cwd
CTL_BIN="$dir/bin/tentaflake-worker"
as_ctl() { setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs env -i PATH=/usr/bin:/bin HOME="$dir/home" "$@"; }

echo "-- [$SECONDS s] npm ci of the SDK client"
cp tests/integration/mcp-client/package.json tests/integration/mcp-client/package-lock.json \
        tests/integration/mcp-client/client.mjs tests/integration/mcp-client/words.mjs tests/integration/mcp-client/cancel.mjs \
        tests/integration/mcp-client/tasks.mjs \
        tests/integration/mcp-malformed.py \
        "$dir/client/"
if ! (cd "$dir/client" && npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error) >"$dir/npm.log" 2>&1; then
        cat "$dir/npm.log"
        echo "SKIP: cannot install @modelcontextprotocol/sdk from the npm registry"
        exit 77
fi
chmod -R a+rX "$dir/client"

start_daemon "$dir" || exit 1

# count_lines FILE: add the ok:/FAIL: lines of a driver's output to this test's totals.
count_lines() {
        local ok bad
        ok=$(grep -c '^ok: ' "$1"); bad=$(grep -c '^FAIL: ' "$1")
        passes=$((passes + ok)); fails=$((fails + bad))
        grep '^FAIL: ' "$1" | cut -c1-600
}

echo "-- [$SECONDS s] the SDK client"
(cd "$ws" && as_ctl node "$dir/client/client.mjs" "$CTL_BIN" "$ws") >"$dir/client.out" 2>"$dir/client.err" &
client_pid=$!
_pending_or_gone() { grep -q '^PENDING ' "$dir/client.out" || ! kill -0 "$client_pid" 2>/dev/null; }
wait_for 240 _pending_or_gone
if grep -q '^PENDING ' "$dir/client.out"; then
        cmd=$(sed -n 's/^PENDING //p' "$dir/client.out")
        check "the approve command the client got works" eval "\"$BIN\" ${cmd#tentaflake-worker } >/dev/null"
else
        check "the client reached its pending request" false
fi
wait "$client_pid"; client_rc=$?
count_lines "$dir/client.out"
check "the SDK client's checks all passed (exit $client_rc)" test "$client_rc" = 0
[ "$client_rc" = 0 ] || { tail -n 30 "$dir/client.out" "$dir/client.err"; }
check "the client's run reached the worker's audit log" test "$(audit_count "$dir" started)" -ge 3
check "the apply tool wrote the job's file into the workspace, the controller's own" \
        test "$(cat "$ws/mcp-made.txt" 2>/dev/null) $(stat -c %u "$ws/mcp-made.txt" 2>/dev/null)" = "from-mcp 10000"
check "run with apply: true too" test "$(cat "$ws/mcp-auto.txt" 2>/dev/null)" = auto

echo "-- [$SECONDS s] the cancel tool (issue 35 item 3)"
(cd "$ws" && as_ctl node "$dir/client/cancel.mjs" "$CTL_BIN" "$ws") >"$dir/cancel.out" 2>"$dir/cancel.err"
cancel_rc=$?
count_lines "$dir/cancel.out"
check "cancel.mjs passed (exit $cancel_rc)" test "$cancel_rc" = 0
[ "$cancel_rc" = 0 ] || tail -n 20 "$dir/cancel.out" "$dir/cancel.err"
check "the cancelled job's capsule is gone" no_own_procs argv="tfw-$(worker_name "$dir")-mcp-"
check "the cancel was audited" test "$(audit_count "$dir" cancel-requested)" -ge 1

echo "-- [$SECONDS s] MCP tasks (issue 35 item 2)"
(cd "$ws" && as_ctl node "$dir/client/tasks.mjs" "$CTL_BIN" "$ws") >"$dir/tasks.out" 2>"$dir/tasks.err"
tasks_rc=$?
count_lines "$dir/tasks.out"
check "tasks.mjs passed (exit $tasks_rc)" test "$tasks_rc" = 0
[ "$tasks_rc" = 0 ] || tail -n 20 "$dir/tasks.out" "$dir/tasks.err"
check "the task-cancelled job's capsule is gone" no_own_procs argv="tfw-$(worker_name "$dir")-mcp-"

echo "-- [$SECONDS s] the malformed-message corpus"
(cd "$ws" && as_ctl python3 "$dir/client/mcp-malformed.py" "$CTL_BIN" "$ws") >"$dir/corpus.out" 2>"$dir/corpus.err"
corpus_rc=$?
count_lines "$dir/corpus.out"
check "the corpus driver passed (exit $corpus_rc)" test "$corpus_rc" = 0
[ "$corpus_rc" = 0 ] || tail -n 20 "$dir/corpus.err"
check "no malformed message reached the inbox" test -z "$(ls -A "$ws/.tentaflake-worker/inbox")"

# words DIR EXPECT_JSON NAME: words.mjs against the server started in DIR, its lines counted.
words() {
        (cd "$1" && as_ctl node "$dir/client/words.mjs" "$CTL_BIN" "$1" "$2") >"$dir/words-$3.out" 2>"$dir/words-$3.err"
        local rc=$?
        count_lines "$dir/words-$3.out"
        check "words.mjs ($3) passed (exit $rc)" test "$rc" = 0
        [ "$rc" = 0 ] || tail -n 20 "$dir/words-$3.err"
}

# True words (issue 35, item 5): this worker has no network.allow and no cache; the server was
# "no network" for every worker before, whatever its config said.
echo "-- [$SECONDS s] the words follow worker.json: no network, no cache"
words "$ws/mcpdir/sub" '{"network": null, "cache": null, "cwd": "mcpdir/sub", "memory": "512 MiB", "changes": true}' closed
check "daemon alive" daemon_alive
stop_daemon || true

echo "-- [$SECONDS s] no worker runs: run answers with the words that say so (issue 35, item 4)"
words "$ws" '{"no_worker": "'"$(worker_name "$dir")"'"}' none
check "no worker: the request stays in the inbox" test -f "$ws/.tentaflake-worker/inbox/i35mcpnone.json"
rm -f "$ws/.tentaflake-worker/inbox/i35mcpnone.json"

# The other worker: an allowlist and a cache. `drain` with an empty inbox writes its
# worker.json and exits, so no worker runs for that workspace afterwards.
echo "-- [$SECONDS s] the words follow worker.json: network.allow and cache.paths, no worker"
new_worker "$dir2" ', "limits": {"memory": "768m", "memory_swap": "768m"},
 "network": {"allow": ["registry.npmjs.org:443", "*.pythonhosted.org:443"]}, "cache": {"paths": ["node_modules"]}'
mkdir -p "$dir2/ws/pkg" && chown 10000:10000 "$dir2/ws/pkg"
check "the other worker's drain wrote its worker.json" tfw "$dir2" drain 2>>"$dir2/daemon.log"
words "$dir2/ws/pkg" '{"network": ["registry.npmjs.org:443", "*.pythonhosted.org:443"], "cache": ["node_modules"],
 "cwd": "pkg", "memory": "768 MiB", "changes": true, "no_worker": "'"$(worker_name "$dir2")"'"}' open

finish
