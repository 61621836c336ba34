#!/usr/bin/env bash
# Crash safety of the inbox daemon (issue 5; threat 10: a worker killed mid-job must not rerun
# an action on restart). Over at least 100 requests of mixed classes, some of them running
# real runsc jobs, the daemon is killed with SIGKILL at random moments (also during its
# start-up recovery) and restarted; requests arrive while it is up and while it is down, and
# the operator approves and denies meanwhile. At the end (after a `drain`):
#   - every request has exactly one final result, or is still pending; its state file agrees;
#   - no id has more than one `started` audit line, and a `started` without `finished` ended
#     as `interrupted` (result, record and audit line);
#   - no runsc container, bundle, snapshot, staging directory or job cgroup is left;
#   - `audit verify` passes.
# TFW_CRASH_SEED replays a run; TFW_CRASH_ROUNDS changes its length (default 12 x 9 requests).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

seed=${TFW_CRASH_SEED:-$(( $(date +%s) % 32768 ))}
rounds=${TFW_CRASH_ROUNDS:-12}
RANDOM=$seed
echo "seed $seed (TFW_CRASH_SEED=$seed replays this run), $rounds rounds"

dir=$(test_dir tfw-it-crash)
trap 'worker_cleanup "$dir"' EXIT

new_worker "$dir" ', "concurrency": 2,
 "limits": {"memory": "256m", "memory_swap": "256m", "pids": 64}'
name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$dir/config.json")
inbox="$dir/ws/.tentaflake-worker/inbox"
manifest="$dir/manifest" # one line per request: ID KIND
: >"$manifest"
approval_classes=(external-reversible irreversible financial production communicative privileged)

drop() { # drop NAME BYTES: as a controller, atomically
        printf '%s' "$2" >"$inbox/.$1.tmp"
        mv "$inbox/.$1.tmp" "$inbox/$1"
}
submit_batch() { # submit_batch ROUND: nine requests of mixed kinds
        local r=$1 k id
        for k in 0 1 2 3 4 5 6 7 8; do
                id="c$r-$k"
                case $k in
                0|1|2) drop "$id.json" "{\"version\":1,\"id\":\"$id\",\"action_class\":\"local-reversible\",\"argv\":[\"sleep\",\"0.2\"]}"
                        echo "$id run" >>"$manifest" ;;
                3) drop "$id.json" "{\"version\":1,\"id\":\"$id\",\"action_class\":\"local-reversible\",\"argv\":[\"true\"]}"
                        echo "$id run" >>"$manifest" ;;
                4|5) drop "$id.json" "{\"version\":1,\"id\":\"$id\",\"action_class\":\"${approval_classes[RANDOM % 6]}\",\"argv\":[\"sleep\",\"0.1\"]}"
                        echo "$id pending" >>"$manifest" ;;
                6) drop "$id.json" "{\"version\":1,\"id\":\"$id\",\"action_class\":\"forbidden\",\"argv\":[\"true\"]}"
                        echo "$id forbidden" >>"$manifest" ;;
                7) drop "$id.json" "{\"version\":1,\"id\":\"$id\",\"action_class\":\"local-reversible\",\"argv\":[\"true\"],\"env\":1}"
                        echo "$id invalid" >>"$manifest" ;;
                8) drop "C$r-$k.json" '{"version":1}' # cannot own an id: a .rejected record
                        echo "C$r-$k anon" >>"$manifest" ;;
                esac
        done
}
decide_some() { # approve or deny a few pending requests (the CLI works with or without the daemon)
        local id
        for id in $(awk '$2 == "pending" {print $1}' "$manifest"); do
                [ -e "$dir/results/$id.state.json" ] || continue
                case $((RANDOM % 4)) in
                0) SUDO_USER=op "$BIN" --config "$dir/config.json" approve "$id" >/dev/null 2>&1 ;;
                1) SUDO_USER=op "$BIN" --config "$dir/config.json" deny "$id" >/dev/null 2>&1 ;;
                esac
        done
}
rand_sleep() { # up to $1 ms: where the kill lands, not a timing assertion
        local ms=$((RANDOM % $1))
        sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
}

# First, deterministically: the daemon dies while a long job runs. The job process must die
# with it, and so must the capsule's runtime and the job in it (never run on unsupervised while
# the next daemon calls it interrupted), and the next start publishes it as interrupted and
# removes what is left of its capsule.
start_daemon "$dir" || exit 1
drop long1.json '{"version":1,"id":"long1","action_class":"local-reversible","argv":["sh","-c","echo long-started; exec sleep 600"],"timeout_seconds":900}'
check "long1 runs" wait_state "$dir" long1 running
check "long1's capsule is up" wait_for 60 sh -c "runsc --root '$(runsc_root "$dir")' list -quiet 2>/dev/null | grep -q long1"
jobpid=$(sed -n "s/.*job 'long1': started (pid \([0-9]*\)).*/\1/p" "$dir/daemon.log")
check "the job process is known ($jobpid)" test -n "$jobpid"
kill -KILL "$TFW_DAEMON_PID"
wait "$TFW_DAEMON_PID" 2>/dev/null
TFW_DAEMON_PID=
gone() { ! kill -0 "$1" 2>/dev/null; }
check "the job process died with the daemon" wait_for 10 gone "$jobpid"
capsule_idle() { # nothing of long1's capsule runs: its cgroup holds no process (or is gone)
        local f
        for f in "/sys/fs/cgroup/memory/tentaflake-worker-$name/tfw-$name-long1/cgroup.procs" \
                "/sys/fs/cgroup/tentaflake-worker-$name/tfw-$name-long1/cgroup.procs"; do
                [ -z "$(cat "$f" 2>/dev/null)" ] || return 1
        done
}
check "  ... and so did its capsule's processes (the job runs on unsupervised by no one)" wait_for 10 capsule_idle
# The store goes first: a worker that finds a kept generation starts a capsule ahead at once
# (docs/capsule.md), and the checks below look for what the killed daemon left, and nothing else.
check "the store is removed (no daemon runs)" quiet tfw "$dir" store remove
start_daemon "$dir" || exit 1
check "long1 published at the next start" wait_result "$dir" long1 30
check "long1 is interrupted" test "$(json_get "$dir/results/long1/result.json" 'r["status"]')" = interrupted
check "long1: its capsule is gone" test -z "$(runsc --root "$(runsc_root "$dir")" list -quiet 2>/dev/null)"
check "long1: nothing of it in scratch on the disk" test -z "$(ls -A "$dir/state/scratch")"
check "long1: nothing of it in the new daemon's scratch" test -z "$(daemon_scratch "$dir" || echo none)"
check "long1: audited started, interrupted and nothing else" \
        test "$(audit_count "$dir" started long1)$(audit_count "$dir" interrupted long1)$(audit_count "$dir" finished long1)$(audit_count "$dir" error long1)" = 1100
check "the daemon stops" stop_daemon TERM

kills=0 kills_running=0
for ((r = 0; r < rounds; r++)); do
        if [ $((r % 4)) = 3 ]; then
                submit_batch "$r" # arrives while the daemon is down: the start-up scan takes it
                "$BIN" --config "$dir/config.json" run >>"$dir/daemon.log" 2>&1 &
                TFW_DAEMON_PID=$!
                rand_sleep 300 # often inside start-up recovery and the first scan
        else
                start_daemon "$dir" || { fails=$((fails + 1)); break; }
                submit_batch "$r"
                decide_some
                rand_sleep 2500
        fi
        [ -n "$(daemon_scratch "$dir" 2>/dev/null)" ] && kills_running=$((kills_running + 1))
        kill -KILL "$TFW_DAEMON_PID"
        wait "$TFW_DAEMON_PID" 2>/dev/null
        TFW_DAEMON_PID=
        kills=$((kills + 1))
        decide_some
done
echo "$kills kills, $kills_running of them with a job in its capsule"
check "some kills landed while a job ran" test "$kills_running" -gt 0

# Restart; let every queued request run to its end and exit.
"$BIN" --config "$dir/config.json" drain >>"$dir/daemon.log" 2>&1 &
TFW_DAEMON_PID=$!
drain_rc=0
wait "$TFW_DAEMON_PID" || drain_rc=$?
TFW_DAEMON_PID=
check "drain exits 0 once idle (exit $drain_rc)" test "$drain_rc" = 0

out=$(python3 - "$dir" "$manifest" <<'PY'
import json, os, sys
d, manifest = sys.argv[1], sys.argv[2]
res, req = f"{d}/results", f"{d}/state/requests"
fail = lambda m: print("FAIL: " + m)
events = {}
for f in sorted(os.listdir(f"{d}/state/audit")):
    if f.endswith(".jsonl"):
        for line in open(f"{d}/state/audit/{f}"):
            r = json.loads(line)
            if "id" in r:
                events.setdefault(r["id"], []).append(r["event"])
rejected = [json.load(open(f"{res}/.rejected/{f}")) for f in os.listdir(f"{res}/.rejected")]
want = {"run": {"succeeded", "interrupted"}, "pending": {"succeeded", "denied", "interrupted"},
        "forbidden": {"rejected"}, "invalid": {"rejected"}}
n = final = pending = interrupted = never_began = 0
daemon_log = open(f"{d}/daemon.log", errors="replace").read()
for line in open(manifest):
    i, kind = line.split()
    n += 1
    if os.path.lexists(f"{d}/ws/.tentaflake-worker/inbox/{i}.json"):
        fail(f"{i}: still in the inbox")
    if kind == "anon":
        if not any(r["name"] == f"{i}.json" and r["error"] == "bad_name" for r in rejected):
            fail(f"{i}: no .rejected record")
        continue
    has_res = os.path.exists(f"{res}/{i}/result.json")
    has_state = os.path.exists(f"{res}/{i}.state.json")
    rec = json.load(open(f"{req}/{i}/state.json"))
    ev = events.get(i, [])
    if ev.count("started") > 1:
        fail(f"{i}: started {ev.count('started')} times: {ev}")
    if has_res:
        final += 1
        r = json.load(open(f"{res}/{i}/result.json"))
        st = r["status"]
        if has_state:
            fail(f"{i}: final but its state file is still there")
        if rec["state"] != "final" or rec["status"] != st:
            fail(f"{i}: the record says {rec['state']}/{rec.get('status')}, the result {st}")
        if st not in want[kind]:
            fail(f"{i} ({kind}): status {st} ({r['error']}: {r['message']})")
        if kind == "pending" and st == "succeeded" and (r["approval"] or {}).get("decision") != "approved":
            fail(f"{i}: ran without an approval")
        if "started" in ev and "finished" not in ev:
            if st != "interrupted" or "interrupted" not in ev:
                fail(f"{i}: started, never finished, yet {st}; audit {ev}")
        if st == "interrupted":
            interrupted += 1
            # Marked running, then killed before its "started" line: legal (docs/operator.md)
            # only if nothing of the job began, and the daemon forks after that line.
            if "started" not in ev and f"job '{i}': started" in daemon_log:
                fail(f"{i}: interrupted, forked, yet no started line in the audit")
            if "started" not in ev:
                never_began += 1
        finals = [e for e in ev if e in ("finished", "interrupted", "error", "denied", "expired")]
        if len(finals) > 1:
            fail(f"{i}: more than one ending in the audit: {ev}")
        if st == "succeeded" and not os.path.exists(f"{res}/{i}/job.log"):
            fail(f"{i}: succeeded without its log")
    elif has_state:
        s = json.load(open(f"{res}/{i}.state.json"))["state"]
        if kind != "pending" or s != "pending" or rec["state"] != "pending":
            fail(f"{i} ({kind}): left {s}, record {rec['state']}, after drain")
        if "started" in ev:
            fail(f"{i}: pending yet started")
        pending += 1
    else:
        fail(f"{i} ({kind}): neither a result nor a state file")
print(f"SUMMARY {n} requests: {final} final ({interrupted} interrupted, {never_began} of them before their start), {pending} still pending")
PY
)
grep -v '^SUMMARY' <<<"$out"
grep '^SUMMARY' <<<"$out"
check "every request ended exactly once or is still pending" sh -c "! grep -q '^FAIL' <<'EOF'
$out
EOF"
n=$(wc -l <"$manifest")
check "at least 100 requests ($n)" test "$n" -ge 100

# A final record whose result was lost (its directory removed while the worker was down) is
# published again at start with the status it had.
lost=$(awk '$2 == "forbidden" {print $1; exit}' "$manifest")
rm -rf "$dir/results/$lost"
"$BIN" --config "$dir/config.json" drain >>"$dir/daemon.log" 2>&1
check "drain republishes a lost result" test -e "$dir/results/$lost/result.json"
check "  ... with its status" test "$(json_get "$dir/results/$lost/result.json" 'r["status"]')" = rejected
check "  ... and the record keeps it" test "$(json_get "$dir/state/requests/$lost/state.json" 'r["status"]')" = rejected
check "  ... and so does the audit line" test "$(python3 -c 'import json,sys; print([json.loads(l).get("outcome") for l in open(sys.argv[1]) if json.loads(l).get("id")==sys.argv[2]][-1])' "$dir/state/audit/audit.jsonl" "$lost")" = rejected

check "no runsc container is left" test -z "$(runsc --root "$(runsc_root "$dir")" list -quiet 2>/dev/null)"
check "no bundle or snapshot is left in scratch/ ($(ls -A "$dir/state/scratch" | tr '\n' ' '))" \
        test -z "$(ls -A "$dir/state/scratch")"
check "no scratch tmpfs is left mounted after $kills kills" no_scratch_mount "$dir"
check "no staging directory is left" test -z "$(ls -A "$dir/results/.staging")"
check "no half-made capture is left" test -z "$(ls -A "$dir/state/requests" | grep '^\.capture-')"
cg=$(find /sys/fs/cgroup -maxdepth 6 -type d -name "tfw-$name-*" 2>/dev/null)
check "no job cgroup is left ${cg:+($cg)}" test -z "$cg"
check "no process of the worker is left" no_own_procs "argv=$dir/config.json"
out=$("$BIN" --config "$dir/config.json" audit verify 2>&1)
check "audit verify passes: $out" test $? = 0
if [ "$fails" -ne 0 ]; then echo "daemon log (end):"; tail -n 40 "$dir/daemon.log"; fi
finish
