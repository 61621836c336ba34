#!/usr/bin/env bash
# Threat 13, issue 11 item 7 ("every ending ends the capsule"), inbox plane: a runtime whose
# sandbox hangs (stopped with SIGSTOP by the runsc wrapper of hung-runtime-lib.sh), at boot
# under `run` and during the job under `drain`, then SIGTERM twice to the daemon; and once, for
# the end of the grace period. The second signal and the grace timeout used to kill only the
# job's process group: `runsc run`, the gofer and the stopped sandbox stayed alive after the
# daemon exited, and so did the job's cgroup. Now the daemon exits having left no runsc process
# of the worker and no job cgroup. A daemon killed with SIGKILL cannot do that: its runsc
# processes die with its job process, and the next start removes the rest. Last (issue 46), a
# streamed workspace whose input channel's reader outlives the capsule: the job still ends.
# Real daemon, real runsc.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
. tests/integration/hung-runtime-lib.sh
require_root
[ -n "$REAL_RUNSC" ] || { echo "SKIP: runsc is not installed"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=$(test_dir i11t-hung)
ctl=$dir/ctl
mkdir "$ctl"
make_hung_runsc "$ctl"
trap 'kill_leftovers "$(runsc_root "$dir")" "$ctl"; worker_cleanup "$dir"' EXIT
new_worker "$dir" ', "concurrency": 1, "runtime": {"runsc": "'"$ctl/runsc"'"},
 "limits": {"memory": "256m", "memory_swap": "256m", "pids": 64}'
name=$(json_get "$dir/config.json" 'r["name"]')
group=tentaflake-worker-$name
root=$(runsc_root "$dir")
inbox="$dir/ws/.tentaflake-worker/inbox"
res="$dir/results"
drop() { # drop ID ARGV_JSON
        printf '{"version":1,"id":"%s","action_class":"local-reversible","argv":%s,"timeout_seconds":900}' "$1" "$2" \
                >"$inbox/.$1.tmp"
        mv "$inbox/.$1.tmp" "$inbox/$1.json"
}
gone() { ! kill -0 "$1" 2>/dev/null; }
reap_daemon() { # wait (bounded) for the daemon to exit by itself; its exit status
        local rc=0
        wait_for 120 gone "$TFW_DAEMON_PID" || { echo "FAIL: the daemon did not exit"; return 99; }
        wait "$TFW_DAEMON_PID" || rc=$?
        TFW_DAEMON_PID=
        return $rc
}
term_once() { # the first SIGTERM lets the job finish (for DAEMON_STOP_GRACE_DEFAULT, 60 s)
        local n
        n=$(_count_lines "$dir/daemon.log" "stopping: ")
        kill -TERM "$TFW_DAEMON_PID"
        t_signal=$(date +%s%N)
        wait_for 30 _more_lines "$dir/daemon.log" "stopping: " "$n"
}
term_twice() { # the second, once the first was taken (two pending ones would merge), ends it
        term_once
        kill -TERM "$TFW_DAEMON_PID"
        t_signal=$(date +%s%N)
}
took() { echo "   (the daemon exited $(( ($(date +%s%N) - t_signal) / 1000000 )) ms after the last signal)"; }
has_runsc_procs() { [ -n "$(runsc_procs "$root")" ]; }
no_runsc_procs() {
        local left
        left=$(runsc_procs "$root")
        [ -z "$left" ] || { echo "left: $left"; return 1; }
}
has_job_cgroup() { [ -n "$(job_cgroups "$group")" ]; }
no_job_cgroup() {
        local left
        left=$(job_cgroups "$group")
        [ -z "$left" ] || { echo "left: $left"; return 1; }
}
stopped_state() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = T ]; }
# The last pid the wrapper stopped is in the stopped state: waited for, as the wrapper's line
# may be half written when the file appears, and a loaded machine may not yet have run the
# sandbox since its SIGSTOP (the state says T only once it took the signal).
last_stopped() { stopped_state "$(tail -n1 "$ctl/stopped")"; }

echo "-- run: the sandbox hangs at boot; SIGTERM twice"
echo boot >"$ctl/mode"
start_daemon "$dir" run || exit 1
drop hang1 '["sh","-c","echo i11t-running; exec sleep 600"]'
check "the sandbox was stopped at boot" wait_file "$ctl/stopped" 120
check "  ... and stays stopped" wait_for 30 last_stopped
check "hang1 is running" wait_state "$dir" hang1 running
check "runsc processes of the job are alive" has_runsc_procs
term_twice
reap_daemon
rc=$?
took
check "the daemon exits 0 after the second signal (exit $rc)" test "$rc" = 0
check "hang1 is interrupted" test "$(json_get "$res/hang1/result.json" 'r["status"]')" = interrupted
check "hang1 never started its job (stopped at boot)" bash -c "! grep -q i11t-running '$res/hang1/job.log'"
check "no runsc process of the worker is left" no_runsc_procs
check "no job cgroup is left" no_job_cgroup
check "runsc keeps no state of the container" test -z "$(ls -A "$root" | grep -v '^runsc' || true)"

echo "-- drain: the sandbox hangs in the middle of the job; SIGTERM twice"
rm -f "$ctl/stopped"
echo run >"$ctl/mode"
drop hang2 '["sh","-c","echo i11t-running; exec sleep 600"]'
start_daemon "$dir" drain || exit 1
check "hang2's job runs (its output reached job.log)" \
        wait_for 60 grep -qs i11t-running "$res/.staging/hang2/job.log"
touch "$ctl/stop-now"
check "the sandbox was stopped during the job" wait_file "$ctl/stopped" 60
check "runsc processes of the job are alive" has_runsc_procs
term_twice
reap_daemon
rc=$?
took
check "drain exits 0 after the second signal (exit $rc)" test "$rc" = 0
check "hang2 is interrupted" test "$(json_get "$res/hang2/result.json" 'r["status"]')" = interrupted
check "no runsc process of the worker is left" no_runsc_procs
check "no job cgroup is left" no_job_cgroup
check "the teardown is in the log" grep -q "job 'hang2': capsule torn down (" "$dir/daemon.log"

echo "-- run: the sandbox hangs at boot; one SIGTERM, the grace period runs out"
rm -f "$ctl/stopped" "$ctl/stop-now"
echo boot >"$ctl/mode"
start_daemon "$dir" run || exit 1
drop hang4 '["sh","-c","echo i11t-running; exec sleep 600"]'
check "the sandbox was stopped at boot" wait_file "$ctl/stopped" 120
check "hang4 is running" wait_state "$dir" hang4 running
term_once
reap_daemon
rc=$?
took
check "the daemon exits 0 after its grace period (exit $rc)" test "$rc" = 0
check "  ... having said so" grep -q "grace period over: killing 1 job(s)" "$dir/daemon.log"
check "hang4 is interrupted" test "$(json_get "$res/hang4/result.json" 'r["status"]')" = interrupted
check "no runsc process of the worker is left" no_runsc_procs
check "no job cgroup is left" no_job_cgroup

echo "-- kill -9 while the sandbox hangs at boot: the next start removes it all"
rm -f "$ctl/stopped" "$ctl/stop-now"
echo boot >"$ctl/mode"
start_daemon "$dir" run || exit 1
drop hang3 '["sh","-c","echo i11t-running; exec sleep 600"]'
check "the sandbox was stopped at boot" wait_file "$ctl/stopped" 120
check "hang3 is running" wait_state "$dir" hang3 running
kill -KILL "$TFW_DAEMON_PID"
reap_daemon
# They die with the job's process (PR_SET_PDEATHSIG), a stopped sandbox too; their record and
# cgroup stay for the next start. They used to outlive it.
wait_for 10 quiet no_runsc_procs
check "a daemon killed with SIGKILL takes the job's runsc processes with it" no_runsc_procs
check "  ... and leaves the job's cgroup for the next start" has_job_cgroup
rm -f "$ctl/mode"
# The store goes first: a worker that finds a kept generation starts a capsule ahead at once
# (docs/capsule.md), and the checks below look for what the killed daemon left, and nothing else.
check "the store is removed (no daemon runs)" quiet tfw "$dir" store remove
start_daemon "$dir" run || exit 1
check "hang3 is published as interrupted" wait_result "$dir" hang3
check "the start-up cleanup left no runsc process of the worker" no_runsc_procs
check "  ... and no job cgroup" no_job_cgroup
check "  ... and said so" grep -q "start-up cleanup: removed" "$dir/daemon.log"
check "the daemon stops" stop_daemon TERM

echo "-- a streamed workspace whose channel's reader outlives the capsule (issue 46)"
# Every lane of the generation store held by the test: the workspace is streamed, on the input
# thread. The sandbox stops at boot and so never reads it, and a process of the runtime that no
# kill ends (hung-runtime-lib.sh's "linger-boot") holds the channel's reader: once the job's
# timeout ended the capsule, the thread still sleeps in a write into the full pipe. The job
# process used to wait for it in the join forever, and stream5's result never came.
new_worker "$dir" ', "concurrency": 1, "runtime": {"runsc": "'"$ctl/runsc"'", "warm_seconds": 0},
 "limits": {"memory": "256m", "memory_swap": "256m", "pids": 64}'
rm -f "$ctl/stopped" "$ctl/lingering" "$ctl/let-go"
head -c 8M /dev/zero >"$dir/ws/big.bin" && chown 10000:10000 "$dir/ws/big.bin"
echo linger-boot >"$ctl/mode"
start_daemon "$dir" run || exit 1
for k in 0 1; do
        mkdir -p "$dir/state/store/lane-$k"
        flock -x "$dir/state/store/lane-$k/lock" sh -c "touch '$ctl/held-$k'; until [ -e '$ctl/let-go' ]; do sleep 0.05; done" &
done
check "the test holds every lane of the store" wait_for 60 test -e "$ctl/held-0" -a -e "$ctl/held-1"
printf '{"version":1,"id":"stream5","action_class":"local-reversible","argv":["true"],"timeout_seconds":5}' \
        >"$inbox/.stream5.tmp"
mv "$inbox/.stream5.tmp" "$inbox/stream5.json"
check "the sandbox was stopped at boot" wait_file "$ctl/stopped" 120
check "a process of the runtime lingers" wait_file "$ctl/lingering" 30
linger=$(head -n1 "$ctl/lingering")
check "stream5 ends at its timeout (its result is published)" wait_result "$dir" stream5 120
check "  ... timed out" test "$(json_get "$res/stream5/result.json" 'r["status"]')" = timed_out
check "  ... its workspace was streamed" grep -q "job 'stream5': no lane of the generation store" "$dir/daemon.log"
check "  ... while the lingering process still held the channel" kill -0 "$linger"
touch "$ctl/let-go"
rm -f "$ctl/mode"
check "the lingering process is gone once let go" wait_for 30 sh -c "! kill -0 $linger 2>/dev/null"
check "the daemon stops" stop_daemon TERM
check "no runsc process of the worker is left" no_runsc_procs
check "audit verify passes" quiet tfw "$dir" audit verify 2>/dev/null
finish
