#!/usr/bin/env bash
# Graceful stop of the inbox daemon (issue 5, contract section 7): on SIGTERM it stops taking
# new work and lets the running job finish, then exits 0, leaving queued requests queued and
# new inbox entries in the inbox for the next start; a second signal (SIGINT here) kills the
# running job at once, which is then published as `interrupted`, never re-run, its capsule
# removed. Real daemon, real runsc.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-stop)
trap 'worker_cleanup "$dir"' EXIT
new_worker "$dir" ', "concurrency": 1, "limits": {"memory": "256m", "memory_swap": "256m", "pids": 64}'
inbox="$dir/ws/.tentaflake-worker/inbox"
res="$dir/results"
drop() { # drop ID ARGV_JSON
        printf '{"version":1,"id":"%s","action_class":"local-reversible","argv":%s,"timeout_seconds":900}' "$1" "$2" \
                >"$inbox/.$1.tmp"
        mv "$inbox/.$1.tmp" "$inbox/$1.json"
}
in_capsule() { # in_capsule ID: runsc lists the job's container as running (its own, or the
        # capsule started ahead that the daemon gave it, runtime.warm_seconds)
        local c
        c=$(sed -n "s/.*job '$1': started in capsule '\(warm-[0-9a-f]*\)'.*/\1/p" "$dir/daemon.log" | tail -1)
        runsc --root "$(runsc_root "$dir")" list 2>/dev/null | grep -q -- "-${c:-$1} .* running "
}
gone() { ! kill -0 "$1" 2>/dev/null; }

# runsc's root below a runtime directory others may write: the daemon refuses to start.
run_dir=$(dirname "$(runsc_root "$dir")")
mkdir -p "$run_dir" && chmod 0777 "$run_dir"
out=$(timeout 60 "$BIN" --config "$dir/config.json" run 2>&1); rc=$?
check "a runtime directory others may write: the daemon refuses to start (exit 1)" test "$rc" -eq 1
check "  ... naming the directory and its mode" grep -q "runtime directory '$run_dir' is owned by 0 with mode 0777" <<<"$out"
chmod 0755 "$run_dir"

# A container a worker before issue 12 left in runsc's old root, <state_dir>/runsc: removed
# at start, and the directory with it (orchestrator/job.c legacy_root_cleanup).
name=$(worker_name "$dir")
legacy=$dir/state/runsc
mkdir -p "$legacy" "$dir/legacy-bundle" && chmod 0700 "$dir/state" "$legacy"
runsc spec --bundle "$dir/legacy-bundle" -- /bin/sleep 1000
python3 - "$dir/legacy-bundle/config.json" "$name" <<'PY'
import json, sys
p, name = sys.argv[1], sys.argv[2]
c = json.load(open(p))
c["root"] = {"path": "/", "readonly": True}
c["process"]["terminal"] = False
c["annotations"] = {"org.tentaflake.worker": name}
json.dump(c, open(p, "w"))
PY
runsc --root "$legacy" --network=none --ignore-cgroups run --detach --bundle "$dir/legacy-bundle" \
        "tfw-$name-legacy" </dev/null >/dev/null 2>&1
check "a container of this worker runs in the old runsc root" \
        sh -c "runsc --root '$legacy' list -quiet 2>/dev/null | grep -qx 'tfw-$name-legacy'"

# reap_daemon: wait (bounded) for the daemon to exit by itself; its exit status.
reap_daemon() {
        local rc=0
        wait_for 120 gone "$TFW_DAEMON_PID" || { echo "FAIL: the daemon did not exit"; return 99; }
        wait "$TFW_DAEMON_PID" || rc=$?
        TFW_DAEMON_PID=
        return $rc
}

echo "-- SIGTERM: the running job finishes, the queue waits, the daemon exits 0"
start_daemon "$dir" || exit 1
check "the old runsc root's container was removed at start" \
        grep -q "start-up cleanup: removed 1 container(s) left in the old runsc root '$legacy'" "$dir/daemon.log"
check "  ... and the old root with it" test ! -e "$legacy"
check "  ... and no process of it is left" no_own_procs "argv=tfw-$name-legacy"
drop stop1 '["sh","-c","echo begun; sleep 3; echo finished-ok"]'
drop stop2 '["echo","second"]'
check "stop1 runs in its capsule" wait_for 60 in_capsule stop1
check "stop2 waits its turn" _state_is "$dir" stop2 queued
kill -TERM "$TFW_DAEMON_PID"
drop late1 '["echo","late"]'
check "the daemon is still up while stop1 finishes" daemon_alive
reap_daemon
rc=$?
check "the daemon exits 0 after SIGTERM (exit $rc)" test "$rc" = 0
check "stop1 was published" test -e "$res/stop1/result.json"
check "stop1 finished normally" test "$(json_get "$res/stop1/result.json" 'r["status"]')" = succeeded
check "stop1's log is complete" grep -q finished-ok "$res/stop1/job.log"
check "stop2 was not started" test "$(audit_count "$dir" started stop2)" = 0
check "stop2 is still queued" _state_is "$dir" stop2 queued
check "late1 was not taken while stopping" test -e "$inbox/late1.json"
check "the stop was audited" test "$(audit_count "$dir" worker-stop)" = 1
check "no capsule is left" test -z "$(runsc --root "$(runsc_root "$dir")" list -quiet 2>/dev/null)"

echo "-- the next start runs what was left"
start_daemon "$dir" || exit 1
check "stop2 published" wait_result "$dir" stop2
check "late1 published" wait_result "$dir" late1
check "stop2 succeeded" test "$(json_get "$res/stop2/result.json" 'r["status"]')" = succeeded
check "late1 succeeded" test "$(json_get "$res/late1/result.json" 'r["status"]')" = succeeded

echo "-- a second signal kills the running job: interrupted"
drop stop3 '["sh","-c","echo begun; exec sleep 600"]'
check "stop3 runs in its capsule" wait_for 60 in_capsule stop3
kill -TERM "$TFW_DAEMON_PID"
check "after one SIGTERM the daemon waits for the job" daemon_alive
check "  ... whose capsule is still there" in_capsule stop3
kill -INT "$TFW_DAEMON_PID"
reap_daemon
rc=$?
check "the daemon exits 0 after the second signal (exit $rc)" test "$rc" = 0
check "stop3 was published" test -e "$res/stop3/result.json"
check "stop3 is interrupted" test "$(json_get "$res/stop3/result.json" 'r["status"]')" = interrupted
check "stop3 audited as interrupted" test "$(audit_count "$dir" interrupted stop3)" = 1
check "stop3 started once" test "$(audit_count "$dir" started stop3)" = 1
check "no capsule is left" test -z "$(runsc --root "$(runsc_root "$dir")" list -quiet 2>/dev/null)"
check "no scratch is left" test -z "$(ls -A "$dir/state/scratch")"
check "no staging directory is left" test -z "$(ls -A "$res/.staging")"

echo "-- and it is never re-run"
start_daemon "$dir" || exit 1
check "the daemon stops" stop_daemon TERM
check "stop3 still started once" test "$(audit_count "$dir" started stop3)" = 1
check "stop3 is still interrupted" test "$(json_get "$res/stop3/result.json" 'r["status"]')" = interrupted

echo "-- kill -9 mid-job: interrupted at the next start, with the output it had written"
start_daemon "$dir" || exit 1
drop stop4 '["sh","-c","echo begun-stop4; exec sleep 600"]'
check "stop4 runs in its capsule" wait_for 60 in_capsule stop4
# The running job's output reaches its job.log every 2 s (a harness wait, bounded).
check "stop4's output so far is in its job.log while it runs" \
        wait_for 30 grep -qs begun-stop4 "$res/.staging/stop4/job.log"
kill -KILL "$TFW_DAEMON_PID"
reap_daemon
start_daemon "$dir" || exit 1
check "stop4 published" wait_result "$dir" stop4
check "stop4 is interrupted" test "$(json_get "$res/stop4/result.json" 'r["status"]')" = interrupted
check "stop4's job.log keeps what it wrote before the worker died" grep -q begun-stop4 "$res/stop4/job.log"
check "the daemon stops" stop_daemon TERM
check "audit verify passes" quiet tfw "$dir" audit verify 2>/dev/null
finish
