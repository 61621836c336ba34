#!/usr/bin/env bash
# Every wall a job meets is named in its result (issue 49; contract section 7, "walls"; threat
# 24), with the real daemon and runsc, each job submitted by `submit` as the controller:
#   - a plain job, and a job that prints fake reports of walls (a forged trailer with full=, a
#     result's "walls" JSON, submit's own words), get an empty list and no wall line;
#   - one job meets the walls that do not interfere: job.log past limits.max_log_bytes, more
#     artifacts than limits.max_artifact_entries, more changes than limits.max_changes_entries,
#     /tmp and /work filled, a connection to a host
#     and port not on network.allow: each is an entry, and a line of submit's, and `list`,
#     `show` and the audit line carry them;
#   - a memory bomb: "memory", with the limit;
#   - forks past limits.pids: under runsc no entry (its own kernel refuses them, out of the
#     host's sight; docs/controller.md, "Walls in the result");
#   - a sleep past the timeout: "time", with its value;
#   - MCP's result tool carries them in structuredContent and in its text.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is needed in the capsule (scripts/install-deps)"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=$(test_dir i49-walls)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir"' EXIT
A=$(free_port)
B=$(free_port)
while [ "$B" = "$A" ]; do B=$(free_port); done
mounts='"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/alternatives"'
new_worker "$dir" ', "runtime": {"system_mounts": ['"$mounts"']},
 "limits": {"default_timeout_seconds": 60, "max_timeout_seconds": 120, "max_log_bytes": "64k",
            "memory": "256m", "pids": 64, "workspace_tmpfs": "16m", "tmp_tmpfs": "8m", "max_snapshot_bytes": "4m",
            "max_artifact_entries": 3, "max_changes_entries": 3},
 "network": {"allow": ["127.0.0.1:'"$A"'"]}'
ws="$dir/ws" res="$dir/results"
mkdir -p "$dir/bin" "$dir/out" "$dir/home"
install -m 0755 "${TFW_CONTROLLER_BIN:-$BIN}" "$dir/bin/tentaflake-worker"
chown 10000:10000 "$dir/out" "$dir/home"
as_ctl() {
        (cd "$ws" && setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs \
                env -i PATH=/usr/bin:/bin HOME="$dir/home" "$@")
}
ctl() { as_ctl "$dir/bin/tentaflake-worker" "$@"; }
# run ID [SUBMIT OPTIONS] -- ARGV...: submit as the controller, waited for; its stderr in ID.err
run() {
        local id=$1; shift
        ctl submit --id "$id" "$@" >"$dir/out/$id.out" 2>"$dir/out/$id.err"
        echo $? >"$dir/out/$id.rc"
}
walls() { json_get "$res/$1/result.json" "$2"; } # walls ID EXPR on the result (r)
n_walls() { walls "$1" "len(r['walls'])"; }
has_wall() { # has_wall ID WALL DETAIL_PART: an entry of WALL whose detail holds DETAIL_PART
        test "$(walls "$1" "len([w for w in r['walls'] if w['wall']=='$2' and '''$3''' in w['detail'] and w['count']>=1])")" = 1
}
said() { grep -qF -- "$2" "$dir/out/$1.err"; } # said ID TEXT: submit's stderr holds TEXT

start_daemon "$dir" || exit 1

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] a job that meets no wall, and one that prints fake reports of walls"
run plain -- /bin/true
check "plain: succeeded" test "$(result_field "$dir" plain status)" = succeeded
check "plain: walls is an empty list" test "$(walls plain "r['walls']")" = "[]"
check "plain: submit says no wall" sh -c "! grep -q 'by the sandbox' '$dir/out/plain.err'"
# The trailer's tag with a token of the job's guess and every disk full; the result's JSON;
# submit's words: all of it is log text.
run fake -- /bin/sh -c 'printf "\n\036tentaflake-capsule-status 00000000000000000000000000000000 exit=0 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=work_tmp\n"
echo "\"walls\": [{\"wall\": \"memory\", \"detail\": \"killed at the memory limit\", \"count\": 1}]"
echo "submit '"'"'fake'"'"': blocked by the sandbox: connect to evil.test:443 (not in network.allow)"; exit 0'
check "fake: succeeded" test "$(result_field "$dir" fake status)" = succeeded
check "fake: printing reports of walls adds no entry" test "$(walls fake "r['walls']")" = "[]"
check "fake: the job's words are in its log only" grep -q "evil.test" "$res/fake/job.log"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] log, artifacts, /tmp, /work and a refused connection in one job"
run several -- /bin/sh -c "
mkdir -p /work/artifacts && for i in 1 2 3 4 5; do echo \$i >/work/artifacts/a\$i; echo \$i >/work/c\$i; done
curl -s -o /dev/null -x \"\$http_proxy\" http://127.0.0.1:$B/ ; echo curl=\$?
head -c 200000 /dev/zero | tr '\\0' x
dd if=/dev/zero of=/tmp/fill bs=64k 2>/dev/null; echo tmp=\$?
dd if=/dev/zero of=/work/fill bs=64k 2>/dev/null; echo work=\$?
exit 0"
check "several: ended by itself" test "$(result_field "$dir" several status)" = succeeded
check "several: job.log cut at its bound" has_wall several output "job.log cut at limits.max_log_bytes (64k)"
check "several: the artifacts refused at their bound" has_wall several output "limits.max_artifact_entries (3)"
check "several: /tmp full" has_wall several disk "/tmp is full (limits.tmp_tmpfs, 8m)"
check "several: /work full" has_wall several disk "/work is full (limits.workspace_tmpfs, 16m)"
check "several: the refused connection" has_wall several network "connect to 127.0.0.1:$B (not in network.allow)"
check "several: the changeset cut at its bound" has_wall several output "limits.max_changes_entries (3)"
check "several: six walls" test "$(n_walls several)" = 6
check "submit: the connection, as the sandbox's decision" \
        said several "submit 'several': blocked by the sandbox: connect to 127.0.0.1:$B (not in network.allow): the worker's network policy refused it, the network itself is not broken"
check "submit: the log's bound" said several "submit 'several': cut by the sandbox: job.log cut at limits.max_log_bytes (64k)"
check "submit: /work" said several "submit 'several': blocked by the sandbox: /work is full (limits.workspace_tmpfs, 16m)"
check "submit: /tmp" said several "submit 'several': blocked by the sandbox: /tmp is full (limits.tmp_tmpfs, 8m)"
check "submit: the artifacts" said several "submit 'several': cut by the sandbox: artifacts refused: more than limits.max_artifact_entries (3)"
ctl list >"$dir/out/list.out" 2>&1
check "list: the walls below the job's row" grep -qF "    blocked by the sandbox: connect to 127.0.0.1:$B (not in network.allow)" "$dir/out/list.out"
ctl list --json >"$dir/out/list.json" 2>&1
check "list --json: the walls in the row" \
        test "$(json_get "$dir/out/list.json" "len([w for x in r['recent'] if x['id']=='several' for w in x['walls']])")" = 6
tfw "$dir" show several >"$dir/out/show.out" 2>&1
check "show: the walls" grep -qF "wall: blocked by the sandbox: /tmp is full (limits.tmp_tmpfs, 8m)" "$dir/out/show.out"
check "audit: the finished line carries the walls" \
        grep -qF '"network: connect to 127.0.0.1:'"$B"' (not in network.allow) (1)"' "$dir/state/audit/audit.jsonl"
# MCP's result tool, as a model's client asks it (a minimal JSON-RPC client over stdio).
cat >"$dir/out/mcp.py" <<'PY'
import json, subprocess, sys
p = subprocess.Popen([sys.argv[1], "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def call(i, method, params):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    p.stdin.flush()
    return json.loads(p.stdout.readline())
call(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
r = call(2, "tools/call", {"name": "result", "arguments": {"id": sys.argv[2]}})["result"]
print(json.dumps({"walls": r["structuredContent"]["walls"], "text": r["content"][0]["text"]}))
p.stdin.close()
p.wait()
PY
chmod 0644 "$dir/out/mcp.py"
as_ctl /usr/bin/python3 "$dir/out/mcp.py" "$dir/bin/tentaflake-worker" several >"$dir/out/mcp.json" 2>"$dir/out/mcp.err"
mcp() { json_get "$dir/out/mcp.json" "$1"; }
check "mcp: structuredContent carries the six walls" test "$(mcp "len(r['walls'])")" = 6
check "mcp: each with its words" test "$(mcp "[w['words'] for w in r['walls'] if w['wall']=='network'][0].startswith('blocked by the sandbox: connect to 127.0.0.1:$B')")" = True
check "mcp: the text says they are the sandbox's decisions" \
        test "$(mcp "'walls (the sandbox\'s decisions, not failures of the network or of a service):' in r['text'] and '(not in network.allow)' in r['text']")" = True

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] a memory bomb"
run membomb -- /bin/sh -c 'tail /dev/zero'
check "membomb: killed" test "$(result_field "$dir" membomb status)" = killed
check "membomb: the memory wall, with the limit" has_wall membomb memory "killed at the memory limit (limits.memory, 256m)"
check "submit: the memory wall" said membomb "submit 'membomb': stopped by the sandbox: killed at the memory limit (limits.memory, 256m)"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] forks past the pids limit"
run forks -- /usr/bin/python3 -c '
import os
for i in range(100):
    try:
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "60"])
    except OSError as e:
        print("fork_error", e.errno, flush=True)
        break'
check "forks: ended by itself" test "$(result_field "$dir" forks status)" = succeeded
check "forks: a fork was refused in the capsule (EAGAIN)" grep -qx "fork_error 11" "$res/forks/job.log"
# runsc refuses the forks in its own kernel (init's RLIMIT_NPROC), out of the host's sight: no
# "pids" entry, as docs/controller.md says ("Walls in the result"); the host cgroup's backstop
# (capsule_host_pids_limit) was not reached.
check "forks: runsc does not tell the process limit" test "$(walls forks "r['walls']")" = "[]"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] past the timeout"
run slow --timeout 2 -- /bin/sleep 60
check "slow: timed out" test "$(result_field "$dir" slow status)" = timed_out
check "slow: the time wall, with its value" has_wall slow time "stopped at the timeout (2 s)"
check "slow: nothing else" test "$(n_walls slow)" = 1
check "submit: the timeout" said slow "submit 'slow': stopped by the sandbox: stopped at the timeout (2 s)"

finish
