#!/usr/bin/env bash
# Threat 13, issue 11 item 7 ("every ending ends the capsule"), validation plane: `serve` with a
# runtime whose sandbox hangs (stopped with SIGSTOP by the runsc wrapper of hung-runtime-lib.sh,
# given as --runsc), at boot and during the check, then SIGTERM twice. The second signal used to
# ask `runsc delete --force`, which waits on the lock the hung `runsc run` holds; after the
# shutdown grace serve exited leaving `runsc run`, the gofer, the sandbox and the job's cgroup.
# Now serve ends the capsule, hands the job back unsigned and exits 0, leaving no runsc process
# of the worker and no job cgroup. Real serve, real runsc, the test-double forge.
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
leftovers() {
        local n
        for n in i11tboot i11trun; do kill_leftovers "$tmp/state-$n/runsc" "$ctl"; done
        # the killed leave their cgroups once they are gone; then this run's groups, by name
        for n in i11tboot i11trun; do wait_for 10 no_runsc_procs "$tmp/state-$n/runsc" >/dev/null; done
        for n in i11tboot i11trun; do remove_cgroup_group "tentaflake-worker-serve-$n-$RUN"; done
        cleanup
}
trap leftovers EXIT
SERVE_FLAGS=(--system-mounts-identity debian-12 --runsc "$ctl/runsc" --shutdown-grace-secs 20)

gone() { ! kill -0 "$1" 2>/dev/null; }
has_runsc_procs() { [ -n "$(runsc_procs "$1")" ]; }
no_runsc_procs() {
        local left
        left=$(runsc_procs "$1")
        [ -z "$left" ] || { echo "left: $left"; return 1; }
}
no_job_cgroup() { # no_job_cgroup WORKER_NAME: the worker's label as serve names it
        local left
        left=$(job_cgroups "tentaflake-worker-serve-$1")
        [ -z "$left" ] || { echo "left: $left"; return 1; }
}
# hung_check NAME MODE: a check whose sandbox is stopped at MODE, then SIGTERM twice.
hung_check() {
        local name=$1 mode=$2 root="$tmp/state-$1/runsc" rc=0
        rm -f "$ctl/stopped" "$ctl/stop-now"
        echo "$mode" >"$ctl/mode"
        start_worker "$name"
        local w=$wpid
        wait_ready "$name"
        enqueue "$name" "$TREE" '{"argv":["sh","-c","echo i11t-running; exec sleep 600"],"timeout_secs":900}'
        if [ "$mode" = run ]; then
                # lane-1/, or lane-1-warm/ for a check that runs in the capsule the lane started
                # ahead (issue 12: after the previous worker's job handed back here).
                check "$name: the check runs (its output reached job.log)" \
                        wait_for 120 sh -c "grep -qs i11t-running '$tmp/state-$name/scratch/'lane-1*/job.log"
                touch "$ctl/stop-now"
        fi
        check "$name: the sandbox was stopped ($mode)" wait_file "$ctl/stopped" 120
        check "$name: runsc processes of the check are alive" has_runsc_procs "$root"
        kill -TERM "$w"
        wait_log "$name" "finishing the running checks"
        kill -TERM "$w"
        check "$name: serve exits by itself" wait_for 120 gone "$w"
        wait "$w" || rc=$?
        check "$name: serve exits 0 after the second signal (exit $rc)" [ "$rc" = 0 ]
        check "$name: the job was handed back unsigned (fail, retry)" \
                [ "$(q "(jobs['$name']['history'][-1]['event'], jobs['$name']['history'][-1]['permanent'])")" = "('fail', False)" ]
        check "$name: nothing was signed" no_attestation "$name"
        check "$name: no runsc process of the worker is left" no_runsc_procs "$root"
        check "$name: no job cgroup is left" no_job_cgroup "$name-$RUN"
        # Handed back, it would be claimed again by the next worker: make it fail for good there.
        curl -sf -X POST "$URL/test/switch" -d "{\"job\":\"$name\",\"switch\":\"dotdot\",\"on\":true}" >/dev/null
}

echo "-- the sandbox hangs at boot"
hung_check i11tboot boot
echo "-- the sandbox hangs during the check"
hung_check i11trun run
finish
