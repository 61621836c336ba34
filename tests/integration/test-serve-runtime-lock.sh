#!/usr/bin/env bash
# Threat 13, issue 46 item 4: `serve`'s runtime processes hold the lock its next start waits for
# (<state_dir>/runtime.lock, as the inbox daemon's jobs.lock). serve is killed with SIGKILL while
# a check runs; one process of its runtime outlives it (hung-runtime-lib.sh's "linger", as a
# front in an uninterruptible wait does). Then:
#   - the next start waits for it, saying so, and starts nothing meanwhile; while it still lives
#     after the bound (30 s) the start fails (exit 1), naming the lock, having removed nothing:
#     the killed check's container is still in runsc's root;
#   - the start after that, once the process is gone, takes the lock, removes the container the
#     killed worker left (its record, its processes, its job cgroup) and only then claims.
# On the previous binary the next start did not wait: its cleanup ran at once, while a process
# of its predecessor's runtime still lived. Real serve, real runsc behind the wrapper, the
# test-double forge.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hung-runtime-lib.sh"
require_root
[ -n "$REAL_RUNSC" ] || { echo "SKIP: runsc is not installed"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
. "$(dirname "$0")/serve-lib.sh"
ctl=$tmp/ctl
mkdir "$ctl"
make_hung_runsc "$ctl"
NAME=i46k
root=$tmp/state-$NAME/runsc
leftovers() {
        touch "$ctl/let-go"
        kill_leftovers "$root" "$ctl"
        wait_for 10 no_runsc_procs >/dev/null
        remove_cgroup_group "tentaflake-worker-serve-$NAME-$RUN"
        cleanup
}
trap leftovers EXIT
# No capsule started ahead: the runsc processes and containers looked for below are the killed
# worker's only.
SERVE_FLAGS=(--system-mounts-identity debian-12 --runsc "$ctl/runsc" --warm-secs 0 --shutdown-grace-secs 20)

gone() { ! kill -0 "$1" 2>/dev/null; }
alive() { kill -0 "$1" 2>/dev/null; }
# log_by PATTERN SECONDS: serve's log has a line matching PATTERN within SECONDS.
log_by() {
        local end=$((SECONDS + $2))
        until grep -q -- "$1" "$NAME.log" 2>/dev/null; do
                [ $SECONDS -lt $end ] || { echo "no '$1' in $NAME.log within $2 s"; return 1; }
                sleep 0.25
        done
}
container_states() { ls "$root" 2>/dev/null | grep -- '_sandbox:.*\.state$'; }
has_container_state() { [ -n "$(container_states)" ]; }
no_container_state() {
        local left
        left=$(container_states)
        [ -z "$left" ] || { echo "left: $left"; return 1; }
}
no_runsc_procs() {
        local left
        left=$(runsc_procs "$root" | grep -v -- "$ctl/runsc")
        [ -z "$left" ] || { echo "left: $left"; return 1; }
}
no_job_cgroup() {
        local left
        left=$(job_cgroups "tentaflake-worker-serve-$NAME-$RUN")
        [ -z "$left" ] || { echo "left: $left"; return 1; }
}
# exit_of PID SECONDS: $rc, the worker's exit status once it exited by itself (bounded; not in
# a subshell, which could not wait for it)
exit_of() {
        rc=0
        wait_for "$2" gone "$1" || { rc="still running after $2 s"; kill -KILL "$1"; wait "$1"; return 0; }
        wait "$1" || rc=$?
}

echo "-- a check runs; one process of its runtime lingers; serve is killed"
echo linger >"$ctl/mode"
start_worker "$NAME"
W1=$wpid
wait_ready "$NAME" || { cat "$NAME.log"; exit 1; }
enqueue "$NAME" "$TREE" '{"argv":["sh","-c","echo i46-running; exec sleep 600"],"timeout_secs":900}'
check "the check runs (its output reached job.log)" \
        wait_for 120 sh -c "grep -qs i46-running '$tmp/state-$NAME/scratch/'lane-1*/job.log"
check "a process of its runtime lingers" wait_file "$ctl/lingering" 30
linger=$(head -n1 "$ctl/lingering")
rm -f "$ctl/mode"
# Handed back by the lease's end, it is claimed again by the last worker below: it fails there
# for good (its tree cannot be materialised) rather than run for 600 s.
curl -sf -X POST "$URL/test/switch" -d "{\"job\":\"$NAME\",\"switch\":\"dotdot\",\"on\":true}" >/dev/null
kill -KILL "$W1"
wait "$W1" 2>/dev/null
check "the killed worker left its container's record in runsc's root" has_container_state
check "the lingering process outlived it" alive "$linger"
mv "$NAME.log" "$NAME-1.log"

echo "-- the next start, while it lingers: waits, bounded, then fails having removed nothing"
start_worker "$NAME"
W2=$wpid
check "the next start says it waits for the previous run's runtime processes" \
        log_by "waiting up to 30 s for the runtime processes of a previous run (they hold '$tmp/state-$NAME/runtime.lock')" 60
exit_of "$W2" 120
check "it fails once its bound is over (exit $rc)" test "$rc" = 1
check "  ... naming the lock" \
        grep -qF "runtime processes of a previous run on --state-dir '$tmp/state-$NAME' are still running after 30 s (they hold '$tmp/state-$NAME/runtime.lock'); nothing was removed" "$NAME.log"
check "  ... while the lingering process still lived" alive "$linger"
check "  ... having started no lane" bash -c "! grep -q 'claiming from' '$NAME.log'"
check "  ... and removed nothing" has_container_state
mv "$NAME.log" "$NAME-2.log"

echo "-- the start after: waits until the last runtime process is gone, then cleans up"
start_worker "$NAME"
W3=$wpid
check "it waits too" log_by "waiting up to 30 s for the runtime processes of a previous run" 60
check "  ... having started no lane" bash -c "! grep -q 'claiming from' '$NAME.log'"
check "  ... and removed nothing yet" has_container_state
touch "$ctl/let-go"
check "once the lingering process is gone it starts" wait_ready "$NAME"
check "  ... the lingering process is gone" gone "$linger"
check "its start-up cleanup removed the killed worker's container" \
        grep -q "removed [1-9][0-9]* container(s) left by a previous run" "$NAME.log"
check "  ... its record" no_container_state
check "  ... every runsc process of it" no_runsc_procs
check "  ... its job cgroup" no_job_cgroup
check "the killed check, claimed again, ends (for good: its tree was switched to one that escapes)" final "$NAME" 120
kill -TERM "$W3"
exit_of "$W3" 60
check "serve exits 0 on SIGTERM (exit $rc)" test "$rc" = 0
finish
