#!/usr/bin/env bash
# Two capsules started ahead while requests come back to back (orchestrator/daemon.c,
# WARM_AHEAD_MAX; docs/performance.md, "A request's fixed cost"; threat 12), with the real
# daemon and runsc, concurrency 1 (two lanes of the generation store):
#   - a request alone: one capsule waits for the next;
#   - requests back to back (each within 2 s of the last one's start): two wait, so that the
#     next one finds the capsule started before the last request booted;
#   - never more than the lanes left: while a job runs on one of the two lanes, one waits, and
#     no job or capsule ever finds every lane taken (its workspace streamed);
#   - no request for 2 s: the newest goes, one waits until runtime.warm_seconds is over, then
#     none;
# then, restarted with concurrency 2 (three lanes), two requests given at once each run in a
# capsule of its own that waited for them (no capsule serves two jobs), and while a job runs with
# a capsule still waiting for the next request, the one after boots only once the job has ended.
# Every wait is a bounded harness timeout on an event, never a timing assertion.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-warmpair)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir"' EXIT
new_worker "$dir" ', "runtime": {"warm_seconds": 30}'
name=$(worker_name "$dir")
echo "workspace file" >"$dir/ws/ws.txt"
chown 10000:10000 "$dir/ws/ws.txt"
log=$dir/daemon.log

root=$(runsc_root "$dir")
# The capsules started ahead that wait: runsc's containers of the worker named warm-*, less those a
# job was given (a used one keeps its name until its record goes).
waiting() {
        local used
        used=$(grep -o "started in capsule 'warm-[0-9a-f]*'" "$log" | sed "s/.*'\(warm-[0-9a-f]*\)'/tfw-$name-\1/")
        runsc --root "$root" list -quiet 2>/dev/null | grep "^tfw-$name-warm-" | grep -cvxF -e "${used:-none}"
}
waiting_is() { [ "$(waiting)" -eq "$1" ]; }
# most_waiting_until ID: the most capsules seen waiting at once (sampled every 0.1 s) until ID's
# result is there.
most_waiting_until() {
        local most=0 n
        while [ ! -e "$dir/results/$1/result.json" ] && [ $SECONDS -lt 600 ]; do
                n=$(waiting)
                [ "$n" -gt "$most" ] && most=$n
                sleep 0.1
        done
        echo "$most"
}
no_lane_refused() { ! grep -q "every lane of the generation store is in use" "$log"; }

start_daemon "$dir" || exit 1

echo "-- [$SECONDS s] a request alone: one capsule waits"
submit "$dir" a1 local-reversible '["true"]'
check "a1 published" wait_result "$dir" a1
check "one capsule waits after a1, which came alone" wait_for 30 waiting_is 1

echo "-- [$SECONDS s] requests back to back: two wait"
submit "$dir" a2 local-reversible '["true"]'
check "a2 published" wait_result "$dir" a2
submit "$dir" a3 local-reversible '["cat","ws.txt"]'
check "a3 published" wait_result "$dir" a3
check "a3 succeeded" test "$(result_field "$dir" a3 status)" = succeeded
check "a3 ran in a capsule started ahead" grep -q "job 'a3': started in capsule 'warm-" "$log"
check "two capsules wait after requests back to back" wait_for 30 waiting_is 2

echo "-- [$SECONDS s] a job on one lane: one waits on the other, never two"
submit "$dir" a4 local-reversible '["sh","-c","sleep 4; echo ran-a4"]'
a4_started() { grep -q "job 'a4': started" "$log"; }
check "a4 started" wait_for 60 a4_started
most=$(most_waiting_until a4)
check "a4 published" wait_result "$dir" a4
check "a4 succeeded" test "$(result_field "$dir" a4 status)" = succeeded
check "a4 ran in a capsule started ahead" grep -q "job 'a4': started in capsule 'warm-" "$log"
check "while a4 ran at most one capsule waited (2 lanes; $most seen)" test "$most" -le 1
check "no job or capsule found every lane taken" no_lane_refused
check "a4 ran on a generation" grep -q "job 'a4': generation " "$log"

echo "-- [$SECONDS s] no request for 2 s: one waits, then none after the window"
check "two wait again once a4 (back to back) ended" wait_for 30 waiting_is 2
check "back to one capsule waiting well before warm_seconds (30 s)" wait_for 20 waiting_is 1
check "none after warm_seconds" wait_for 90 waiting_is 0
check "no job or capsule found every lane taken" no_lane_refused
check "the daemon is alive" daemon_alive
stop_daemon TERM

echo "-- [$SECONDS s] concurrency 2: two requests at once, each in a capsule of its own"
python3 - "$dir/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["concurrency"] = 2
json.dump(c, open(sys.argv[1], "w"))
PY
start_daemon "$dir" || exit 1
submit "$dir" b1 local-reversible '["true"]'
check "b1 published" wait_result "$dir" b1
submit "$dir" b2 local-reversible '["true"]'
check "b2 published" wait_result "$dir" b2
check "two capsules wait after b1 and b2" wait_for 30 waiting_is 2
inbox=$dir/ws/.tentaflake-worker/inbox
for i in 3 4; do
        printf '{"version":1,"id":"b%s","action_class":"local-reversible","argv":["sh","-c","echo ran-b%s"]}' "$i" "$i" >"$inbox/.b$i.tmp"
done
mv "$inbox/.b3.tmp" "$inbox/b3.json"
mv "$inbox/.b4.tmp" "$inbox/b4.json"
check "b3 published" wait_result "$dir" b3
check "b4 published" wait_result "$dir" b4
capsule_of() { grep -o "job '$1': started in capsule 'warm-[0-9a-f]*'" "$log" | grep -o "warm-[0-9a-f]*"; }
c3=$(capsule_of b3)
c4=$(capsule_of b4)
check "b3 ran in a capsule started ahead" test -n "$c3"
check "b4 ran in a capsule started ahead" test -n "$c4"
check "b3 and b4 each had a capsule of its own ($c3, $c4)" test "$c3" != "$c4"
check "b3's log is b3's" grep -qx "ran-b3" "$dir/results/b3/job.log"
check "b4's log is b4's" grep -qx "ran-b4" "$dir/results/b4/job.log"
check "no job or capsule found every lane taken" no_lane_refused

echo "-- [$SECONDS s] a job while another capsule waits: the next boots after it, not beside it"
check "two wait again after b3 and b4" wait_for 30 waiting_is 2
submit "$dir" b5 local-reversible '["sh","-c","sleep 3; echo ran-b5"]'
b5_started() { grep -q "job 'b5': started" "$log"; }
check "b5 started" wait_for 60 b5_started
most=$(most_waiting_until b5)
check "b5 published" wait_result "$dir" b5
check "b5 ran in a capsule started ahead" grep -q "job 'b5': started in capsule 'warm-" "$log"
check "while b5 ran one capsule waited, none booted beside it ($most seen)" test "$most" -eq 1
check "two wait once b5 ended" wait_for 30 waiting_is 2
stop_daemon TERM
check "nothing of the worker's runsc left" no_own_procs "argv=$root"
finish
