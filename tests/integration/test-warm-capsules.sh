#!/usr/bin/env bash
# Capsules started ahead of the next request (issue 12 item 3; contract sections 2 and 6;
# threats 12 and 13), with the real daemon and runsc:
#   - after a request, one capsule waits for the next, its lane seeded from the first lane's
#     while it waits (docs/snapshot.md); the next request runs in it; each
#     capsule serves one job and is destroyed (threat 12: the second job sees none of the
#     first's files in /work or /tmp and none of its processes, and the first's leftover
#     process is gone with its capsule);
#   - after runtime.warm_seconds without a request the waiting capsule is removed: no sandbox;
#   - warm_seconds 0: never one;
#   - drain uses one while its queue is not empty, and leaves none;
#   - a stop (SIGTERM) while one waits leaves no container, no runsc process, no cgroup;
#   - a state file runsc was cut writing (empty) goes at the start-up cleanup.
# Every wait is a bounded harness timeout on an event, never a timing assertion.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-i12warm)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir"' EXIT
new_worker "$dir" ', "runtime": {"warm_seconds": 15}'
name=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$dir/config.json")
echo "workspace file" >"$dir/ws/ws.txt"
chown 10000:10000 "$dir/ws/ws.txt"
res=$dir/results

root=$(runsc_root "$dir") # once: the waits below poll these many times
containers() { runsc --root "$root" list -quiet 2>/dev/null; }
warm_listed() { containers | grep -q "^tfw-$name-warm-"; }
none_listed() { [ -z "$(containers)" ]; }
no_runsc_procs() { no_own_procs "argv=$root" >/dev/null; } # the front process, gofer and sandbox
no_job_cgroups() { [ -z "$(find /sys/fs/cgroup -maxdepth 3 -type d -path "*tentaflake-worker-$name/*" 2>/dev/null | head -1)" ]; }
idle() { none_listed && no_runsc_procs; }
# The capsule waiting longest (the next request's): two may wait while requests come back to back
# (test-warm-pair.sh), and a request takes the one started first: the one whose record in runsc's
# root was made first (its lock file's birth; pids wrap on a busy host).
oldest_warm() {
        local c used
        used=$(grep -o "started in capsule 'warm-[0-9a-f]*'" "$dir/daemon.log" | sed "s/.*'\(warm-[0-9a-f]*\)'/tfw-$name-\1/")
        for c in $(containers | grep "^tfw-$name-warm-" | grep -vxF -e "${used:-none}"); do
                stat -c "%.9W $c" "$root/${c}_sandbox:$c.lock" 2>/dev/null
        done | sort -n | awk 'NR == 1 { print $2 }'
}

# What a runsc front killed while writing its container's state leaves (it truncates the file,
# then writes it): an empty state file, which `runsc list` lists and `runsc delete --force`
# cannot remove ("unexpected end of JSON input"). A stop that ended a capsule still being made
# left one in a full CI run, and every later check failed on it; the start-up cleanup removes it.
cut=tfw-$name-warm-0123456789ab
install -d -m 0755 "${root%/*}" && install -d -m 0700 "$root"
: >"$root/${cut}_sandbox:$cut.state"
: >"$root/${cut}_sandbox:$cut.lock"
check "a cut state file is listed by runsc before the start" sh -c "runsc --root '$root' list -quiet | grep -qx '$cut'"
start_daemon "$dir" || exit 1
check "the start-up cleanup removed the cut state file" test ! -e "$root/${cut}_sandbox:$cut.state"

echo "-- [$SECONDS s] no request yet: no capsule waits"
check "no container before the first request" none_listed

echo "-- [$SECONDS s] a request, then one capsule waits for the next"
submit "$dir" w1 local-reversible \
        '["sh","-c","echo one >/work/left.txt; echo one >/tmp/left.txt; m=i12; setsid sh -c \"trap \\\"\\\" TERM HUP; while :; do sleep 1; done\" ${m}leftover </dev/null >/dev/null 2>&1 & echo started"]'
check "w1 published" wait_result "$dir" w1
check "w1 succeeded" test "$(result_field "$dir" w1 status)" = succeeded
check "a capsule waits for the next request" wait_for 30 warm_listed
warm1=$(containers | grep "^tfw-$name-warm-" | head -1)
# Its lane had no generation (a fresh store): seeded from w1's while it waits, not by w2's walk.
seeded_ahead() { grep -qE "warm capsule '${warm1#"tfw-$name-"}': lane-[0-9]+ seeded from lane-[0-9]+( \(its mirror taken\))? ahead of its request" "$dir/daemon.log"; }
check "the waiting capsule's lane is seeded from w1's before its request" wait_for 30 seeded_ahead

submit "$dir" w2 local-reversible \
        '["sh","-c","cat ws.txt; ls /work/left.txt /tmp/left.txt >/dev/null 2>&1 && echo leftovers=yes || echo leftovers=no; echo procs=$(for p in /proc/[0-9]*; do tr \"\\\\0\" \" \" <$p/cmdline; echo; done 2>/dev/null | grep -c \"i12leftove[r]\"); echo job=$TENTAFLAKE_JOB"]'
check "w2 published" wait_result "$dir" w2
check "w2 succeeded" test "$(result_field "$dir" w2 status)" = succeeded
check "w2 ran in the capsule started ahead" grep -q "job 'w2': started in capsule 'warm-" "$dir/daemon.log"
check "w2 saw the workspace" grep -qx "workspace file" "$res/w2/job.log"
check "w2 saw none of w1's files in /work or /tmp" grep -qx "leftovers=no" "$res/w2/job.log"
check "w2 saw none of w1's processes" grep -qx "procs=0" "$res/w2/job.log"
check "w2 had its own id" grep -qx "job=w2" "$res/w2/job.log"
warm1_gone() { ! containers | grep -qx "$warm1"; }
# Its record goes once w2's result is out (ExecPlan.defer_record): waited for, bounded.
check "w2's capsule served one job and is gone" wait_for 30 warm1_gone
grep -q "leftovers=no" "$res/w2/job.log" || { echo "job.log of w2:"; cat "$res/w2/job.log"; }

echo "-- [$SECONDS s] no request for warm_seconds: the waiting capsule is removed"
check "back to no sandbox after the window" wait_for 60 idle
check "no job cgroup left" no_job_cgroups
check "the daemon is alive" daemon_alive

echo "-- [$SECONDS s] a waiting capsule whose sandbox died: the next request runs cold"
sandbox_pid() { own_procs argv=runsc-sandbox "argv=$dead" | awk -v id="$dead" '$NF == id { print $1; exit }'; }
have_sandbox() { [ -n "$(sandbox_pid)" ]; }
submit "$dir" w5 local-reversible '["true"]'
check "w5 published" wait_result "$dir" w5
check "a capsule waits after w5" wait_for 30 warm_listed
dead=$(oldest_warm)
check "its sandbox is found" wait_for 30 have_sandbox
kill -KILL "$(sandbox_pid)" 2>/dev/null
submit "$dir" w6 local-reversible '["sh","-c","echo ran-w6"]'
check "w6 published" wait_result "$dir" w6
check "w6 succeeded all the same" test "$(result_field "$dir" w6 status)" = succeeded
check "w6 ran once" test "$(grep -cx "ran-w6" "$res/w6/job.log")" = 1

# The same, with runsc's front process frozen first so the worker cannot see the death from
# it: only init's missing answer to the job record tells (capsule/protocol.h).
check "a capsule waits after w6" wait_for 30 warm_listed
dead=$(oldest_warm)
check "its sandbox is found" wait_for 30 have_sandbox
sandbox=$(sandbox_pid)
front=$(ps -o ppid= -p "$sandbox" | tr -d ' ')
check "its runsc front process is found" test -n "$front" -a "$front" != 1
kill -STOP "$front"
kill -KILL "$sandbox"
submit "$dir" w7 local-reversible '["sh","-c","echo ran-w7"]'
check "w7 published" wait_result "$dir" w7
check "w7 succeeded all the same" test "$(result_field "$dir" w7 status)" = succeeded
check "w7 ran once" test "$(grep -cx "ran-w7" "$res/w7/job.log")" = 1
check "the daemon says w7's capsule was lost before it took the job" \
        grep -q "job 'w7': the capsule started ahead ended before it took the job; it ran in a capsule of its own" "$dir/daemon.log"
check "the frozen front process is gone" sh -c "! kill -0 $front 2>/dev/null"

echo "-- [$SECONDS s] a job longer than warm_seconds: the window runs from its end"
# On a loaded machine every job may outlast a short window; the next request must still find a
# capsule ready behind it.
submit "$dir" w8 local-reversible '["sh","-c","sleep 18; echo ran-w8"]'
check "w8 published" wait_result "$dir" w8
submit "$dir" w9 local-reversible '["sh","-c","echo ran-w9"]'
check "w9 published" wait_result "$dir" w9
check "w9 ran in a capsule started ahead" grep -q "job 'w9': started in capsule 'warm-" "$dir/daemon.log"

echo "-- [$SECONDS s] a stop while a capsule waits leaves nothing"
submit "$dir" w3 local-reversible '["true"]'
check "w3 published" wait_result "$dir" w3
check "a capsule waits after w3" wait_for 30 warm_listed
# Its bundle is in memory, in the daemon's own mount namespace; nothing of it on the disk.
warm3=$(containers | grep "^tfw-$name-warm-" | head -1)
check "the waiting capsule's bundle is in the daemon's scratch tmpfs" \
        test -s "/proc/$TFW_DAEMON_PID/root$dir/state/scratch/${warm3#tfw-$name-}/$warm3/config.json"
check "  ... a tmpfs of the daemon's own" quiet daemon_scratch "$dir"
check "  ... and nothing of it is in scratch on the disk" test -z "$(ls -A "$dir/state/scratch")"
check "  ... and the tmpfs is not mounted in the host's namespace" no_scratch_mount "$dir"
stop_daemon TERM
check "the daemon stopped" test -z "$TFW_DAEMON_PID"
check "no container after the stop" none_listed
check "no runsc process after the stop" no_runsc_procs
check "no job cgroup after the stop" no_job_cgroups
check "no warm scratch left" test -z "$(find "$dir/state/scratch" -mindepth 1 -maxdepth 1 -name 'warm-*' | head -1)"
check "no scratch tmpfs left" no_scratch_mount "$dir"

echo "-- [$SECONDS s] drain: a capsule waits while the queue is not empty, none after"
inbox=$dir/ws/.tentaflake-worker/inbox
for i in 1 2 3 4; do
        printf '{"version":1,"id":"d%s","action_class":"local-reversible","argv":["sh","-c","echo d%s"]}' "$i" "$i" >"$inbox/.d$i.tmp"
        mv "$inbox/.d$i.tmp" "$inbox/d$i.json"
done
timeout 300 "$BIN" --config "$dir/config.json" drain >>"$dir/daemon.log" 2>&1
check "drain exited 0" test $? -eq 0
for i in 1 2 3 4; do
        check "d$i succeeded" test "$(result_field "$dir" "d$i" status 2>/dev/null)" = succeeded
done
check "drain ran queued requests in capsules started ahead" grep -q "job 'd[234]': started in capsule 'warm-" "$dir/daemon.log"
check "nothing left after drain" idle
check "no job cgroup after drain" no_job_cgroups

echo "-- [$SECONDS s] a restart of a worker in use: a capsule waits at once"
# The store outlived the drain with a generation in it: the worker was in use, so a capsule
# waits for the next request from the start, its lane walked ahead (issue 36 item 2).
start_daemon "$dir" || exit 1
check "a capsule waits after the restart, before any request" wait_for 30 warm_listed
check "... the kept lane walked at start" grep -q "at start: lane-[0-9]* of the generation store walked ahead" "$dir/daemon.log"
submit "$dir" r1 local-reversible '["cat","ws.txt"]'
check "r1 published" wait_result "$dir" r1
check "r1 ran in the capsule started at the restart" grep -q "job 'r1': started in capsule 'warm-" "$dir/daemon.log"
check "r1 saw the workspace" grep -qx "workspace file" "$res/r1/job.log"
stop_daemon TERM
check "nothing left after the stop" idle

echo "-- [$SECONDS s] warm_seconds 0: never a capsule ahead"
python3 - "$dir/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["runtime"] = {"warm_seconds": 0}
json.dump(c, open(sys.argv[1], "w"))
PY
start_daemon "$dir" || exit 1
submit "$dir" z1 local-reversible '["true"]'
check "z1 published" wait_result "$dir" z1
submit "$dir" z2 local-reversible '["true"]'
check "z2 published" wait_result "$dir" z2
check "z2 succeeded" test "$(result_field "$dir" z2 status)" = succeeded
check "no job started in a warm capsule" sh -c "! grep -q \"job 'z[12]': started in capsule\" '$dir/daemon.log'"
check "no capsule waits with warm_seconds 0" none_listed
stop_daemon
finish
