#!/usr/bin/env bash
# Threat 13, issue 33 finding 5 ("every ending bounded in time"): `serve` hung for 15 minutes in
# test-serve.sh on a loaded CI machine. After a checkout failure the lane ended its capsule
# started ahead with the teardown, which finds a container's processes by their argv and through
# its cgroup; the capsule's front process, spawned but not yet runsc, had neither. The teardown
# removed the empty job cgroup, the front became `runsc run`, made the cgroup again (the worker's
# descriptors then named "(deleted)" directories), booted its sandbox there and waited for its
# job forever; so did the lane, in waitpid.
#   A: `runsc delete` fails (hung-runtime-lib.sh's "delete-fails"): a teardown that fails is
#      tried again and said with the capsule's id, the lane goes on, and the worker's next start
#      removes what was left.
#   B: the front stays a process that names no container and is in no cgroup ("unnamed") while
#      jobs fail their checkout (the server's wrong_blob), a busy core beside: every attempt
#      ends, each front is killed by its pid and none ever becomes runsc.
#   C: the same front for a check in a capsule of its own (other limits: cold) whose lease is
#      lost: the cancellation kills it by its pid, the lane drops the check at once (the
#      teardown by name found nothing: the check ran once the front became runsc, 300 s on).
# Then SIGTERM: serve exits 0, leaving no runsc process and no job cgroup. Real serve, real
# runsc behind the wrapper, the test-double forge.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/hung-runtime-lib.sh"
require_root
[ -n "$REAL_RUNSC" ] || { echo "SKIP: runsc is not installed"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
. "$(dirname "$0")/serve-lib.sh"
ctl=$tmp/ctl
mkdir "$ctl"
make_hung_runsc "$ctl"
NAME=i33w
root=$tmp/state-$NAME/runsc
busy=
leftovers() {
        [ -n "$busy" ] && kill -KILL "$busy" 2>/dev/null
        local p
        for p in $(cut -d' ' -f1 "$ctl/unnamed" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        kill_leftovers "$root" "$ctl"
        sleep 0.2 # the killed leave their cgroups (a cleanup pause, not a timing assertion)
        find /sys/fs/cgroup -maxdepth 3 -depth -type d -name "*serve-$NAME-$RUN*" -exec rmdir {} + 2>/dev/null
        cleanup
}
trap leftovers EXIT
SERVE_FLAGS=(--system-mounts-identity debian-12 --runsc "$ctl/runsc" --shutdown-grace-secs 20)

gone() { ! kill -0 "$1" 2>/dev/null; }
# final_by_cond PYTHON_CONDITION SECONDS: the same for any condition on the server's state.
final_by_cond() {
        local end=$((SECONDS + $2))
        until [ "$(q "$1")" = True ]; do
                [ $SECONDS -lt $end ] || { echo "not within $2 s: $1"; return 1; }
                sleep 0.5
        done
}
# log_by NAME PATTERN SECONDS: serve's log has a line matching PATTERN within SECONDS.
log_by() {
        local end=$((SECONDS + $3))
        until grep -q "$2" "$1.log"; do
                [ $SECONDS -lt $end ] || { echo "no '$2' in $1.log within $3 s"; return 1; }
                sleep 0.25
        done
}
# final_by ID SECONDS: the job has ended within SECONDS of wall-clock time (a harness bound on
# the clock: under load each look at the server is slow, and a count of looks would stretch).
final_by() {
        local end=$((SECONDS + $2))
        until [ "$(q "jobs['$1']['state'] in ('done', 'failed')")" = True ]; do
                [ $SECONDS -lt $end ] || { echo "no end of '$1' within $2 s"; return 1; }
                sleep 0.5
        done
}
warm_states() { ls "$root" 2>/dev/null | grep -- '-warm-.*_sandbox:.*\.state$'; }
has_warm_state() { [ -n "$(warm_states)" ]; }
no_runsc_procs() {
        local left
        left=$(runsc_procs "$root")
        [ -z "$left" ] || { echo "left: $left"; return 1; }
}
no_job_cgroup() {
        local left
        left=$(job_cgroups "tentaflake-worker-serve-$NAME-$RUN")
        [ -z "$left" ] || { echo "left: $left"; return 1; }
}
# Every front the wrapper kept unnamed is gone: none outlived its capsule's end.
unnamed_all_gone() {
        local p
        for p in $(cut -d' ' -f1 "$ctl/unnamed" 2>/dev/null); do
                gone "$p" || {
                        echo "unnamed front $p left ($(awk '/^State/ {print $3}' "/proc/$p/status"), never reaped): $(tr '\0' ' ' <"/proc/$p/cmdline" | cut -c1-120)"
                        return 1
                }
        done
}
# front_gone JOB: the first front the wrapper kept unnamed for JOB's own capsule (its container
# id is the lane's hash of the job id) is gone.
front_gone() {
        local cid p
        cid=$(grep -- "-$(printf '%s' "$1" | sha256sum | cut -c1-16)\$" "$ctl/unnamed" | head -1)
        p=${cid%% *}
        [ -n "$p" ] || { echo "no front of '$1' in $ctl/unnamed"; return 1; }
        gone "$p" || { echo "front $p of '$1' still alive"; return 1; }
}
# Every capsule in $LEFT is gone from the root (else what is there, and what serve said).
left_removed() {
        local id left=
        for id in $LEFT; do
                ls "$root" | grep -q -- "^${id}_sandbox:" && left="$left $id"
        done
        [ -z "$left" ] || { echo "still in the root:$left"; ls -l "$root"; cat "$NAME.log"; return 1; }
}
# None became runsc: the root holds no record ("<id>_sandbox:...") of a container the wrapper
# kept unnamed.
unnamed_never_ran() {
        local id
        for id in $(cut -d' ' -f2 "$ctl/unnamed" 2>/dev/null); do
                [ -z "$(ls "$root" | grep -- "^${id}_sandbox:")" ] || { echo "$id ran: $(ls "$root")"; return 1; }
        done
}

start_worker "$NAME"
W=$wpid
enqueue pass1 "$TREE" '{"argv":["true"],"timeout_secs":60}'
final pass1
check "pass1 passed" [ "$(q "jobs['pass1']['history'][-1].get('status')")" = pass ]
# The lane starts a capsule ahead for the next job: booted whole (runsc's record written).
check "the lane's capsule started ahead has booted" wait_for 120 has_warm_state
A_CAPSULE=$(warm_states | head -1 | sed 's/_sandbox:.*//')

echo "-- A: a teardown that fails (runsc delete refuses)"
echo delete-fails >"$ctl/mode"
enqueue wrong_manifest "$TREE" '{"argv":["true"]}' '["wrong_manifest"]'
check "A: wrong_manifest ended" final_by wrong_manifest 240
check "A: failed after 5 attempts, each asking for a retry, nothing signed" \
        [ "$(q "(jobs['wrong_manifest']['state'], jobs['wrong_manifest']['attempt'], all(not h['permanent'] for h in jobs['wrong_manifest']['history'] if h['event']=='fail'))")" = "('failed', 5, True)" ]
check "A: serve said the capsule could not be ended, with its id, after two teardowns, and left it" \
        grep -q "capsule '$A_CAPSULE' (started ahead): 2 teardowns failed, the last: .*runsc still keeps its state.*; left for the next start's cleanup" "$NAME.log"
check "A: its record is left in the runsc root" [ -n "$(ls "$root" | grep -- "^$A_CAPSULE"_sandbox)" ]
check "A: nothing of it runs" bash -c "! ps -eo args | grep -v grep | grep -q -- '$A_CAPSULE'"

echo "-- B: checkout failures, each capsule's front not yet runsc, one core busy"
echo unnamed >"$ctl/mode"
(while :; do :; done) &
busy=$!
enqueue wrong_blob "$FRESH" '{"argv":["true"]}' '["wrong_blob"]'
check "B: wrong_blob ended (no lane waits forever)" final_by wrong_blob 240
kill -KILL "$busy" 2>/dev/null
wait "$busy" 2>/dev/null
busy=
check "B: failed after 5 attempts, nothing signed" \
        [ "$(q "(jobs['wrong_blob']['state'], jobs['wrong_blob']['attempt'], sum(1 for h in jobs['wrong_blob']['history'] if h.get('attestation')))")" = "('failed', 5, 0)" ]
check "B: the attempts ran beside capsules whose front was not yet runsc" \
        [ "$(wc -l <"$ctl/unnamed")" -ge 3 ]
check "B: the reason names the blob" [ "$(q "'does not hash to' in jobs['wrong_blob']['history'][-1]['reason']")" = True ]

echo "-- C: a cancellation reaches a front not yet runsc"
enqueue lostc "$TREE" '{"argv":["sh","-c","sleep 8; echo done"],"memory_mb":1024,"timeout_secs":120}' '["lease_lost"]'
check "C: the heartbeat met the lost lease" final_by_cond "'heartbeat_conflict' in [h['event'] for h in jobs['lostc']['history']]" 120
check "C: the lane stopped the check and dropped it within 60 s" \
        log_by "$NAME" "job 'lostc': lease lost, the check was stopped and its result dropped" 60
check "C: its front was killed before it became runsc" front_gone lostc
# Handed back, it would be claimed again: make it fail for good there, before any capsule.
curl -sf -X POST "$URL/test/switch" -d '{"job":"lostc","switch":"dotdot","on":true}' >/dev/null

echo "-- the end"
kill -TERM "$W"
check "serve exits by itself after SIGTERM" wait_for 120 gone "$W"
gone "$W" || kill -KILL "$W" # a serve that hangs fails the test, never hangs it
rc=0
wait "$W" || rc=$?
check "serve exits 0 (exit $rc)" [ "$rc" = 0 ]
check "every unnamed front was killed (none outlived its capsule)" unnamed_all_gone
check "none of them became runsc (no record of them in the root)" unnamed_never_ran
check "no runsc process of the worker is left" no_runsc_procs
LEFT=$(ls "$root" | grep '_sandbox:' | sed 's/_sandbox:.*//' | sort -u)
check "the teardowns that failed left records" [ -n "$LEFT" ]

echo "-- the next start removes what was left"
echo "" >"$ctl/mode"
start_worker "$NAME"
W=$wpid
wait_ready "$NAME"
check "the next start removed the capsules the teardown could not" left_removed
kill -TERM "$W"
check "serve exits by itself" wait_for 120 gone "$W"
gone "$W" || kill -KILL "$W"
wait "$W"
check "no runsc process of the worker is left" no_runsc_procs
check "no job cgroup is left" no_job_cgroup
finish
