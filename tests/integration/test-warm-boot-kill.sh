#!/usr/bin/env bash
# A daemon killed with SIGKILL while a capsule was booting ahead (runtime.warm_seconds; threats
# 12 and 13; attack review: 2 workers in ~15 kept a "stopped" container). The warm child read
# the end of its socket when the daemon died and began tearing its capsule down, and the
# SIGKILL it gets with its parent (FORK_DEATHSIG) cut that short after the processes, before
# runsc's record and the cgroup. Now it leaves the capsule alone, and the next start removes
# it whole, even when its `runsc run` hangs (runsc would not list a container whose creation it
# never finished, and `runsc list`/`delete` wait on a lock such a process holds). Here the
# runtime hangs at boot deterministically: a runsc wrapper turns the warm capsule's `run` into
# `create`, then blocks before `start`, as a hung front process does, until it is killed.
#   - the daemon is killed once the container is created: the container, its sandbox
#     processes and its cgroup are left (nothing tore them down half-way); the front process
#     died with the warm child (every runsc is started with PR_SET_PDEATHSIG);
#   - doctor, with no daemon, names it (leftover_containers ✗, its id and state);
#   - the next start of the same worker removes it all: runsc lists nothing, no process names
#     the worker's runsc root, no job cgroup; a request then runs;
#   - doctor with the live daemon does not call the daemon's own waiting capsule a leftover;
#     after a clean stop it finds none.
# Then a front that has not yet made anything (CI once kept five containers after test-crash.sh:
# a `runsc run` left running by a killed daemon made its container after the next start's
# cleanup had looked, and nothing removed it): the wrapper holds the warm capsule's `run` back
# until it is released, as a slow front is before runsc writes its first file.
#   - the held front holds the daemon's jobs.lock (the next start waits for it);
#   - killed with the daemon's warm child, never released into runsc;
#   - the next start leaves no container, process or cgroup behind.
# Then a front that emptied its state file and hung, as one killed between runsc's truncation of
# the file and its write leaves it (`runsc delete` fails on it for good): a stop (SIGTERM) leaves
# no file of it in runsc's root, no process, no cgroup.
# Real daemon, real runsc. Every wait is a bounded harness timeout on an event.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
. tests/integration/hung-runtime-lib.sh
require_root
[ -n "$REAL_RUNSC" ] || { echo "SKIP: runsc is not installed"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=$(test_dir i13-warm-kill)
chmod 0755 "$dir"
ctl=$dir/ctl
mkdir "$ctl"
new_worker "$dir" ', "runtime": {"warm_seconds": 600, "runsc": "'"$ctl/runsc"'"}'
name=$(worker_name "$dir")
root=$(runsc_root "$dir")
group=tentaflake-worker-$name
trap 'kill_leftovers "$root" "$ctl"; worker_cleanup "$dir"' EXIT

# The wrapper, for a warm capsule's `run` in this worker's root: with CTL/mode "hang", the
# real `create`, CTL/created, then a hang (this process keeps run's argv: the root and the
# id); with "cut", the same with the state file emptied first, its id in CTL/cut; with "hold",
# its pid in CTL/held, then the real `run` once CTL/release exists.
{
        printf '#!/bin/bash\n# runsc that hangs between create and start (tests/integration/test-warm-boot-kill.sh)\n'
        printf 'ctl=%q\nreal=%q\nroot=%q\n' "$ctl" "$REAL_RUNSC" "$root"
        cat <<'EOF'
args=("$@") n=${#args[@]} mode=
[ -e "$ctl/mode" ] && mode=$(<"$ctl/mode")
if [ -n "$mode" ] && [ "$n" -ge 5 ] && [ "${args[0]}" = --root ] && [ "${args[1]}" = "$root" ] &&
        [ "${args[n-4]}" = run ] && [ "${args[n-3]}" = --bundle ] && [[ ${args[n-1]} == *-warm-* ]]; then
        if [ "$mode" = cut ]; then
                "$real" "${args[@]:0:n-4}" create --bundle "${args[n-2]}" "${args[n-1]}" || exit
                # runsc writes its state file in place (truncated, then written): a front killed
                # between the two leaves it empty. This one hangs after that, until it is killed.
                for f in "$root/${args[n-1]}_sandbox:"*.state; do : >"$f"; done
                echo "${args[n-1]}" >"$ctl/cut"
                while :; do sleep 1; done
        fi
        if [ "$mode" = hold ]; then
                echo $$ >"$ctl/held"
                until [ -e "$ctl/release" ]; do sleep 0.05; done
                exec "$real" "$@"
        fi
        "$real" "${args[@]:0:n-4}" create --bundle "${args[n-2]}" "${args[n-1]}" || exit
        echo "${args[n-1]}" >"$ctl/created"
        while :; do sleep 1; done
fi
exec "$real" "$@"
EOF
} >"$ctl/runsc"
chmod 755 "$ctl/runsc"

procs_of() { # procs_of ID: argv[0] and argv[1] of each process whose argv names the root and ID
        python3 - "$root" "$1" <<'PY'
import os, sys
root, ident = sys.argv[1].encode(), sys.argv[2].encode()
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) in (os.getpid(), os.getppid()):
        continue
    try:
        argv = open(f"/proc/{p}/cmdline", "rb").read().split(b"\0")
    except OSError:
        continue
    if ident in argv and (root in argv or b"--root=" + root in argv):
        print(b" ".join(argv[:2]).decode(errors="replace"))
PY
}
containers() { "$REAL_RUNSC" --root "$root" list 2>/dev/null | tail -n +2; }
none_listed() { [ -z "$(containers)" ]; }
no_runsc_procs() { [ -z "$(runsc_procs "$root")" ]; }
no_job_cgroup() { [ -z "$(job_cgroups "$group")" ]; }
doctor_line() { # doctor_line FILE: "ok<TAB>detail" of its leftover_containers check
        python3 -c 'import json,sys
for c in json.load(open(sys.argv[1])):
    if c["check"] == "leftover_containers":
        print("%s\t%s" % (c["ok"], c["detail"]))' "$1"
}

echo "-- [$SECONDS s] kill -9 while a capsule boots ahead and its runtime hangs"
echo hang >"$ctl/mode"
start_daemon "$dir" || exit 1
submit "$dir" k1 local-reversible '["true"]'
check "k1 published" wait_result "$dir" k1
check "k1 succeeded" test "$(result_field "$dir" k1 status)" = succeeded
check "a capsule booting ahead was created" wait_file "$ctl/created" 60
warm=$(cat "$ctl/created" 2>/dev/null)
kill -KILL "$TFW_DAEMON_PID"
wait "$TFW_DAEMON_PID" 2>/dev/null
TFW_DAEMON_PID=
# What the daemon's death left, once its children (the warm one dies with it) are gone.
warm_child_gone() { no_own_procs "argv=$dir/config.json" >/dev/null; }
check "the daemon's children died with it" wait_for 10 warm_child_gone
check "its container is left ($warm)" sh -c "'$REAL_RUNSC' --root '$root' list 2>/dev/null | grep -q '^$warm .* created '"
procs=$(procs_of "$warm")
check "  ... its sandbox is alive ($(tr '\n' ';' <<<"$procs"))" grep -q '^runsc-sandbox ' <<<"$procs"
hung_front_gone() { ! procs_of "$warm" | grep -qx "/bin/bash $ctl/runsc"; }
check "  ... but not its hung front process: it died with the warm child" wait_for 10 hung_front_gone
check "  ... and its job cgroup" grep -q "/$group/$warm\$" <<<"$(job_cgroups "$group")"
cg_procs=$(cat "$(job_cgroups "$group" | grep "/memory/$group/$warm\$" | head -n 1)/cgroup.procs" 2>/dev/null | wc -l)
check "  ... holding the sandbox and the gofer ($cg_procs processes)" test "$cg_procs" -ge 2

echo "-- [$SECONDS s] doctor, no daemon: the container is named as a leftover"
out=$dir/doctor.json
"$BIN" --config "$dir/config.json" doctor --json >"$out" 2>"$dir/doctor.err"
line=$(doctor_line "$out")
check "doctor reports leftover_containers ✗ ($line)" grep -q "^False" <<<"$line"
check "  ... naming the container and its state" grep -qF "$warm (created)" <<<"$line"
check "  ... and that the next start removes it" grep -q "the next start of the worker removes them" <<<"$line"
check "  ... and removed nothing" sh -c "'$REAL_RUNSC' --root '$root' list 2>/dev/null | grep -q '^$warm '"

echo "-- [$SECONDS s] the next start removes it whole"
rm -f "$ctl/mode"
# The store goes first: a worker that finds a kept generation starts a capsule ahead at once
# (docs/capsule.md), and these checks look for what the killed daemon left, and nothing else.
check "the store is removed (no daemon runs)" "$BIN" --config "$dir/config.json" store remove
start_daemon "$dir" || exit 1
check "runsc lists no container in the worker's root" none_listed
check "no process names the worker's runsc root ($(runsc_procs "$root" | tr '\n' ';'))" no_runsc_procs
check "no job cgroup is left ($(job_cgroups "$group" | tr '\n' ' '))" no_job_cgroup
check "the start-up cleanup said so" grep -q "start-up cleanup: removed" "$dir/daemon.log"
submit "$dir" k2 local-reversible '["sh","-c","echo k2-ran"]'
check "k2 published" wait_result "$dir" k2
check "k2 succeeded" test "$(result_field "$dir" k2 status)" = succeeded
check "k2 ran" grep -qx k2-ran "$dir/results/k2/job.log"

echo "-- [$SECONDS s] doctor with the live daemon: its own capsule is not a leftover"
warm_listed() { containers | grep -q "^tfw-$name-warm-"; }
check "a capsule of the live daemon waits" wait_for 60 warm_listed
"$BIN" --config "$dir/config.json" doctor --json >"$out" 2>"$dir/doctor.err"
line=$(doctor_line "$out")
check "doctor: leftover_containers ✓ while a worker runs ($line)" grep -q "^True	a worker runs" <<<"$line"
check "  ... and the daemon's capsule is still there" warm_listed

echo "-- [$SECONDS s] a clean stop, then doctor finds none"
check "the daemon stops" stop_daemon TERM
check "the stop left no container" none_listed
"$BIN" --config "$dir/config.json" doctor --json >"$out" 2>"$dir/doctor.err"
line=$(doctor_line "$out")
check "doctor: leftover_containers ✓ none ($line)" grep -q "^True	none in '$root'" <<<"$line"
echo "-- [$SECONDS s] kill -9 while a front has made nothing yet"
echo hold >"$ctl/mode"
start_daemon "$dir" || exit 1
submit "$dir" k3 local-reversible '["true"]'
check "k3 published" wait_result "$dir" k3
check "a capsule's front is held back before runsc" wait_file "$ctl/held" 60
held=$(cat "$ctl/held" 2>/dev/null)
holds_lock() { ls -l "/proc/$held/fd" 2>/dev/null | grep -q " -> $dir/state/jobs.lock\$"; }
check "  ... and it holds the daemon's jobs.lock" holds_lock
kill -KILL "$TFW_DAEMON_PID"
wait "$TFW_DAEMON_PID" 2>/dev/null
TFW_DAEMON_PID=
gone() { ! kill -0 "$1" 2>/dev/null; }
check "the held front died with the daemon's warm child" wait_for 10 gone "$held"
: >"$ctl/release" # a front that lived on would now make its container
rm -f "$ctl/mode"
check "the store is removed (no daemon runs)" "$BIN" --config "$dir/config.json" store remove
start_daemon "$dir" || exit 1
check "after the next start runsc lists no container" none_listed
check "  ... no process names the worker's runsc root ($(runsc_procs "$root" | tr '\n' ';'))" no_runsc_procs
check "the daemon stops" stop_daemon TERM
check "  ... and leaves no container" none_listed
check "  ... and no job cgroup ($(job_cgroups "$group" | tr '\n' ' '))" no_job_cgroup

echo "-- [$SECONDS s] a stop while a capsule's state file is cut (its front killed as it wrote it)"
# CI once found such a record after a stop that came while the second of two capsules booted:
# `runsc delete` fails on it for good, and the next start's cleanup failed on it too.
echo cut >"$ctl/mode"
start_daemon "$dir" || exit 1
submit "$dir" k4 local-reversible '["true"]'
check "k4 published" wait_result "$dir" k4
check "a capsule's state file was cut" wait_file "$ctl/cut" 60
cut=$(cat "$ctl/cut" 2>/dev/null)
files_of() { ls -A "$root" 2>/dev/null | grep -F -- "$1"; }
check "  ... and runsc lists it" sh -c "'$REAL_RUNSC' --root '$root' list -quiet 2>/dev/null | grep -qx '$cut'"
check "the daemon stops" stop_daemon TERM
check "  ... and leaves no file of it in runsc's root ($(files_of "$cut" | tr '\n' ' '))" test -z "$(files_of "$cut")"
check "  ... no container runsc lists" test -z "$("$REAL_RUNSC" --root "$root" list -quiet 2>/dev/null)"
check "  ... no process names the worker's runsc root ($(runsc_procs "$root" | tr '\n' ';'))" no_runsc_procs
check "  ... and no job cgroup ($(job_cgroups "$group" | tr '\n' ' '))" no_job_cgroup
rm -f "$ctl/mode"
if [ "$fails" -ne 0 ]; then echo "daemon log (end):"; tail -n 30 "$dir/daemon.log"; fi
finish
