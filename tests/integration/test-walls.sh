#!/usr/bin/env bash
# Every wall a job meets is named in its result (issue 49; contract section 7, "walls"; threat
# 24), with the real daemon on each engine in turn (runsc, then the runc driver: a worker of its
# own on each, the same cases), each job submitted by `submit` as the controller:
#   - a plain job, and a job that prints fake reports of walls (a forged trailer with full=, a
#     result's "walls" JSON, submit's own words), get an empty list and no wall line;
#   - one job meets the walls that do not interfere: job.log past limits.max_log_bytes, more
#     artifacts than limits.max_artifact_entries, more changes than limits.max_changes_entries,
#     /tmp and /work filled, a connection to a host
#     and port not on network.allow: each is an entry, and a line of submit's, and `list`,
#     `show` and the audit line carry them;
#   - a memory bomb: "memory", with the limit;
#   - forks past limits.pids: under runsc no entry (its own kernel refuses them, out of the
#     host's sight; docs/controller.md, "Walls in the result"); under runc "pids", with the
#     limit (the job's cgroup refused them and counted them in pids.events);
#   - a sleep past the timeout: "time", with its value;
#   - writes into /usr, /etc, / and /proc/sys: refused, and no entry on either engine (neither
#     can tell them without a cost to every job: docs/controller.md);
#   - MCP's result tool carries them in structuredContent and in its text.
# Each check's description begins with the engine it ran on.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is needed in the capsule (scripts/install-deps)"; exit 77; }
engines=runsc
if command -v runc >/dev/null; then engines="runsc runc"; else echo "SKIP: runc is not installed: its cases are not run"; fi

A=$(free_port)
B=$(free_port)
while [ "$B" = "$A" ]; do B=$(free_port); done
dirs=()
cleanup() {
        local d
        for d in "${dirs[@]}"; do worker_cleanup "$d"; done
}
trap cleanup EXIT
mounts='"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/alternatives"'
# new_engine ENGINE: a worker of its own on ENGINE (runtime.driver, through TFW_DRIVER) and its
# controller's directories, its daemon started; dir, ws and res are its.
new_engine() {
        dir=$(test_dir "i49-walls-$1") || return 1
        dirs+=("$dir")
        chmod 0755 "$dir"
        TFW_DRIVER=$1 new_worker "$dir" ', "runtime": {"system_mounts": ['"$mounts"']},
 "limits": {"default_timeout_seconds": 60, "max_timeout_seconds": 120, "max_log_bytes": "64k",
            "memory": "256m", "pids": 64, "workspace_tmpfs": "16m", "tmp_tmpfs": "8m", "max_snapshot_bytes": "4m",
            "max_artifact_entries": 3, "max_changes_entries": 3},
 "network": {"allow": ["127.0.0.1:'"$A"'"]}'
        ws="$dir/ws" res="$dir/results"
        mkdir -p "$dir/bin" "$dir/out" "$dir/home"
        install -m 0755 "${TFW_CONTROLLER_BIN:-$BIN}" "$dir/bin/tentaflake-worker"
        chown 10000:10000 "$dir/out" "$dir/home"
        start_daemon "$dir"
}
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

# MCP's result tool, as a model's client asks it (a minimal JSON-RPC client over stdio).
MCP_PY=$(cat <<'PY'
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
)

# cases ENGINE: every case, on the worker new_engine started.
cases() {
        local engine=$1
        # -------------------------------------------------------------------------------------
        echo "-- [$SECONDS s] $engine: a job that meets no wall, and one that prints fake reports of walls"
        run plain -- /bin/true
        check "$engine: plain: succeeded" test "$(result_field "$dir" plain status)" = succeeded
        check "$engine: plain: walls is an empty list" test "$(walls plain "r['walls']")" = "[]"
        check "$engine: plain: submit says no wall" sh -c "! grep -q 'by the sandbox' '$dir/out/plain.err'"
        # The trailer's tag with a token of the job's guess and every disk full; the result's JSON;
        # submit's words: all of it is log text.
        run fake -- /bin/sh -c 'printf "\n\036tentaflake-capsule-status 00000000000000000000000000000000 exit=0 signal=0 init_error=none errno=0 skipped=0 artifacts=ok cache=none full=work_tmp\n"
        echo "\"walls\": [{\"wall\": \"memory\", \"detail\": \"killed at the memory limit\", \"count\": 1}]"
        echo "submit '"'"'fake'"'"': blocked by the sandbox: connect to evil.test:443 (not in network.allow)"; exit 0'
        check "$engine: fake: succeeded" test "$(result_field "$dir" fake status)" = succeeded
        check "$engine: fake: printing reports of walls adds no entry" test "$(walls fake "r['walls']")" = "[]"
        check "$engine: fake: the job's words are in its log only" grep -q "evil.test" "$res/fake/job.log"

        # -------------------------------------------------------------------------------------
        echo "-- [$SECONDS s] $engine: log, artifacts, /tmp, /work and a refused connection in one job"
        run several -- /bin/sh -c "
        mkdir -p /work/artifacts && for i in 1 2 3 4 5; do echo \$i >/work/artifacts/a\$i; echo \$i >/work/c\$i; done
        curl -s -o /dev/null -x \"\$http_proxy\" http://127.0.0.1:$B/ ; echo curl=\$?
        head -c 200000 /dev/zero | tr '\\0' x
        dd if=/dev/zero of=/tmp/fill bs=64k 2>/dev/null; echo tmp=\$?
        dd if=/dev/zero of=/work/fill bs=64k 2>/dev/null; echo work=\$?
        exit 0"
        check "$engine: several: ended by itself" test "$(result_field "$dir" several status)" = succeeded
        check "$engine: several: job.log cut at its bound" has_wall several output "job.log cut at limits.max_log_bytes (64k)"
        check "$engine: several: the artifacts refused at their bound" has_wall several output "limits.max_artifact_entries (3)"
        check "$engine: several: /tmp full" has_wall several disk "/tmp is full (limits.tmp_tmpfs, 8m)"
        check "$engine: several: /work full" has_wall several disk "/work is full (limits.workspace_tmpfs, 16m)"
        check "$engine: several: the refused connection" has_wall several network "connect to 127.0.0.1:$B (not in network.allow)"
        check "$engine: several: the changeset cut at its bound" has_wall several output "limits.max_changes_entries (3)"
        check "$engine: several: six walls" test "$(n_walls several)" = 6
        check "$engine: submit: the connection, as the sandbox's decision" \
                said several "submit 'several': blocked by the sandbox: connect to 127.0.0.1:$B (not in network.allow): the worker's network policy refused it, the network itself is not broken"
        check "$engine: submit: the log's bound" said several "submit 'several': cut by the sandbox: job.log cut at limits.max_log_bytes (64k)"
        check "$engine: submit: /work" said several "submit 'several': blocked by the sandbox: /work is full (limits.workspace_tmpfs, 16m)"
        check "$engine: submit: /tmp" said several "submit 'several': blocked by the sandbox: /tmp is full (limits.tmp_tmpfs, 8m)"
        check "$engine: submit: the artifacts" said several "submit 'several': cut by the sandbox: artifacts refused: more than limits.max_artifact_entries (3)"
        ctl list >"$dir/out/list.out" 2>&1
        check "$engine: list: the walls below the job's row" grep -qF "    blocked by the sandbox: connect to 127.0.0.1:$B (not in network.allow)" "$dir/out/list.out"
        ctl list --json >"$dir/out/list.json" 2>&1
        check "$engine: list --json: the walls in the row" \
                test "$(json_get "$dir/out/list.json" "len([w for x in r['recent'] if x['id']=='several' for w in x['walls']])")" = 6
        tfw "$dir" show several >"$dir/out/show.out" 2>&1
        check "$engine: show: the walls" grep -qF "wall: blocked by the sandbox: /tmp is full (limits.tmp_tmpfs, 8m)" "$dir/out/show.out"
        check "$engine: audit: the finished line carries the walls" \
                grep -qF '"network: connect to 127.0.0.1:'"$B"' (not in network.allow) (1)"' "$dir/state/audit/audit.jsonl"
        printf '%s\n' "$MCP_PY" >"$dir/out/mcp.py"
        chmod 0644 "$dir/out/mcp.py"
        as_ctl /usr/bin/python3 "$dir/out/mcp.py" "$dir/bin/tentaflake-worker" several >"$dir/out/mcp.json" 2>"$dir/out/mcp.err"
        mcp() { json_get "$dir/out/mcp.json" "$1"; }
        check "$engine: mcp: structuredContent carries the six walls" test "$(mcp "len(r['walls'])")" = 6
        check "$engine: mcp: each with its words" test "$(mcp "[w['words'] for w in r['walls'] if w['wall']=='network'][0].startswith('blocked by the sandbox: connect to 127.0.0.1:$B')")" = True
        check "$engine: mcp: the text says they are the sandbox's decisions" \
                test "$(mcp "'walls (the sandbox\'s decisions, not failures of the network or of a service):' in r['text'] and '(not in network.allow)' in r['text']")" = True

        # -------------------------------------------------------------------------------------
        echo "-- [$SECONDS s] $engine: a memory bomb"
        run membomb -- /bin/sh -c 'tail /dev/zero'
        if [ "$engine" = runsc ]; then
                # The kernel's kill takes the sandbox whole (its sentry): no word from init.
                check "$engine: membomb: killed" test "$(result_field "$dir" membomb status)" = killed
        else
                # The kernel killed tail alone; the shell ended by itself with 128 + 9.
                check "$engine: membomb: failed, tail killed" \
                        test "$(result_field "$dir" membomb status) $(result_field "$dir" membomb exit_code)" = "failed 137"
        fi
        check "$engine: membomb: the memory wall, with the limit" has_wall membomb memory "killed at the memory limit (limits.memory, 256m)"
        check "$engine: submit: the memory wall" said membomb "submit 'membomb': stopped by the sandbox: killed at the memory limit (limits.memory, 256m)"

        # -------------------------------------------------------------------------------------
        echo "-- [$SECONDS s] $engine: forks past the pids limit"
        run forks -- /usr/bin/python3 -c '
import os
for i in range(100):
    try:
        if os.fork() == 0:
            os.execv("/bin/sleep", ["sleep", "60"])
    except OSError as e:
        print("fork_error", e.errno, flush=True)
        break'
        check "$engine: forks: ended by itself" test "$(result_field "$dir" forks status)" = succeeded
        check "$engine: forks: a fork was refused in the capsule (EAGAIN)" grep -qx "fork_error 11" "$res/forks/job.log"
        if [ "$engine" = runsc ]; then
                # runsc refuses the forks in its own kernel (init's RLIMIT_NPROC), out of the host's
                # sight: no "pids" entry, as docs/controller.md says ("Walls in the result"); the host
                # cgroup's backstop (capsule_host_pids_limit) was not reached.
                check "$engine: forks: runsc does not tell the process limit" test "$(walls forks "r['walls']")" = "[]"
        else
                # The job's cgroup refused them (pids.max is the job's own there) and counted it.
                check "$engine: forks: the pids wall, with the limit" has_wall forks pids "a fork refused at the process limit (limits.pids, 64)"
                check "$engine: forks: nothing else" test "$(n_walls forks)" = 1
                check "$engine: submit: the pids wall" \
                        said forks "submit 'forks': blocked by the sandbox: a fork refused at the process limit (limits.pids, 64)"
                check "$engine: audit: the finished line carries the pids wall" \
                        grep -qF '"pids: a fork refused at the process limit (limits.pids, 64) (' "$dir/state/audit/audit.jsonl"
        fi

        # -------------------------------------------------------------------------------------
        echo "-- [$SECONDS s] $engine: past the timeout"
        run slow --timeout 2 -- /bin/sleep 60
        check "$engine: slow: timed out" test "$(result_field "$dir" slow status)" = timed_out
        check "$engine: slow: the time wall, with its value" has_wall slow time "stopped at the timeout (2 s)"
        check "$engine: slow: nothing else" test "$(n_walls slow)" = 1
        check "$engine: submit: the timeout" said slow "submit 'slow': stopped by the sandbox: stopped at the timeout (2 s)"

        # -------------------------------------------------------------------------------------
        # Neither engine can tell a write into a read-only path without a cost to every job
        # (docs/controller.md, "Why no engine reports a read-only path"): the writes are refused
        # (under runsc EACCES for a file of root's, the sentry's own check, EROFS for a
        # directory; under runc EROFS from the host's read-only mounts), /work and /tmp written,
        # and the list stays empty: no entry the worker did not see.
        echo "-- [$SECONDS s] $engine: writes into read-only paths"
        run readonly -- /usr/bin/python3 -c '
import errno, os
for p in ("/usr/tfw-w", "/etc/tfw-w", "/tfw-w", "/proc/sys/kernel/hostname", "/work/w", "/tmp/w"):
    try:
        with open(p, "w") as f:
            f.write("x")
        print("written", p)
    except OSError as e:
        print("refused", p, errno.errorcode[e.errno])
try:
    os.mkdir("/usr/tfw-d")
    print("written /usr/tfw-d")
except OSError as e:
    print("refused /usr/tfw-d", errno.errorcode[e.errno])'
        check "$engine: readonly: ended by itself" test "$(result_field "$dir" readonly status)" = succeeded
        for p in /usr/tfw-w /etc/tfw-w /tfw-w /proc/sys/kernel/hostname /usr/tfw-d; do
                check "$engine: readonly: a write into $p is refused" grep -q "^refused $p " "$res/readonly/job.log"
        done
        if [ "$engine" = runc ]; then
                for p in /usr/tfw-w /etc/tfw-w /tfw-w /proc/sys/kernel/hostname /usr/tfw-d; do
                        check "$engine: readonly: ... $p by a read-only mount (EROFS)" grep -qx "refused $p EROFS" "$res/readonly/job.log"
                done
        fi
        check "$engine: readonly: /work and /tmp are written" \
                test "$(grep -cxE 'written /(work|tmp)/w' "$res/readonly/job.log")" = 2
        check "$engine: readonly: the engine does not tell it: no entry" test "$(walls readonly "r['walls']")" = "[]"
        # runc keeps a container and its cgroup once its init ends (`run --keep`, so the cgroup's
        # records are read): the teardown deletes each, and none stays stopped in its root.
        if [ "$engine" = runc ]; then
                check "$engine: no ended container is left in runc's root" wait_for 10 no_stopped_container
        fi
}
no_stopped_container() {
        ! runc --root "$(runsc_root "$dir")" list 2>/dev/null | awk 'NR > 1 { print $3 }' | grep -qx stopped
}

for engine in $engines; do
        if new_engine "$engine"; then
                cases "$engine"
        else
                check "$engine: the daemon started" false
        fi
        stop_daemon
done
finish
