# Shared helpers for the integration tests (sourced). Root, real runsc.
#
# The tests run beside other workers on the same host (a real one from the package, other
# engineers' tests): they look only at what they started. Every process by its place below the
# test (own_procs: the test is a child subreaper, so a daemon's child that outlives the daemon
# comes back to the test, not to the host's init), every cgroup, runsc root and /run directory
# by its worker's name, which is unique to the test's directory (new_worker).

# Become a child subreaper (PR_SET_CHILD_SUBREAPER, 36; kept across execve), then run the test
# again from its start: bash keeps the script open on fd 255, so its path survives a cd.
if [ "${TFW_SUBREAPER:-}" != "$$" ]; then
        export TFW_SUBREAPER=$$
        _tfw_script=$(readlink /proc/$$/fd/255)
        [ -f "$_tfw_script" ] || { echo "lib.sh: not sourced from a test script (fd 255 is '$_tfw_script')" >&2; exit 1; }
        exec python3 -c 'import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:
    sys.exit("lib.sh: prctl(PR_SET_CHILD_SUBREAPER): " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[1], sys.argv[1:])' "$BASH" "$_tfw_script" "$@"
fi

BIN=${BIN:-${BUILD:-build}/tentaflake-worker}
passes=0 fails=0

check() { # check DESCRIPTION COMMAND...: the command must succeed
        local what=$1; shift
        if "$@"; then passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); fi
}

require_root() {
        if [ "$(id -u)" -ne 0 ]; then echo "SKIP: needs root"; exit 77; fi
}

# require_runsc_worker: root, runsc and the built worker, else SKIP (77) or FAIL; $BIN made
# absolute (the tests' daemons run from other directories).
require_runsc_worker() {
        require_root
        command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
        [ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
        BIN=$(realpath "$BIN")
}

# test_dir NAME: a fresh directory for a test's worker, below $TFW_TEST_ROOT (root's, 0755).
# Not /tmp: the worker refuses a state_dir or results_dir with an ancestor that anyone but root
# can write, a world-writable sticky /tmp included (common/root-dir.h).
TFW_TEST_ROOT=${TFW_TEST_ROOT:-/run/tentaflake-tests}
test_dir() {
        mkdir -p "$TFW_TEST_ROOT" && chown 0:0 "$TFW_TEST_ROOT" && chmod 0755 "$TFW_TEST_ROOT" &&
                mktemp -d "$TFW_TEST_ROOT/$1.XXXXXX"
}

# unique_name PREFIX PATH: PREFIX, then the lower-case letters and digits of PATH's last
# component (at most 20), then 8 hex digits of PATH's sha256. Two directories never share it,
# so nor do their workers' cgroup groups, runsc roots and /run directories (mktemp's own letters
# are half upper-case: without the hash two runs of one test could get one name).
unique_name() {
        printf '%s%s-%s' "$1" "$(basename "$2" | tr -cd 'a-z0-9' | head -c 20)" \
                "$(printf %s "$2" | sha256sum | cut -c1-8)"
}

# new_worker DIR [EXTRA_JSON]: a config for a worker in DIR (workspace DIR/ws, uid/gid 10000),
# named unique_name it- DIR.
# TFW_DRIVER=runc: the worker's capsules run with the runc driver (runtime.driver), the same
# tests on the other engine.
new_worker() {
        local dir=$1 extra=${2:-}
        if [ "${TFW_DRIVER:-runsc}" != runsc ]; then
                case $extra in
                *'"runtime": {'*) extra=${extra/'"runtime": {'/"\"runtime\": {\"driver\": \"$TFW_DRIVER\", "} ;;
                *) extra="$extra, \"runtime\": {\"driver\": \"$TFW_DRIVER\"}" ;;
                esac
        fi
        mkdir -p "$dir/ws"
        chown 10000:10000 "$dir/ws"
        cat >"$dir/config.json" <<JSON
{"version": 1, "name": "$(unique_name it- "$dir")",
 "workspace": "$dir/ws", "container_uid": 10000, "container_gid": 10000,
 "state_dir": "$dir/state", "results_dir": "$dir/results"$extra}
JSON
}

# own_procs [comm=C] [uid=N] [argv=TEXT]...: "PID UID COMM ARGV" (a space in COMM shown as _)
# of each live process below this test that matches every filter (comm exactly, argv containing
# TEXT): its children, theirs, and the orphans of any of them, which come back to the test (the
# subreaper above). Nothing else on the host is looked at: another worker's proxies, capsules
# and hooks are not the test's.
own_procs() {
        python3 - "$$" "$@" <<'PY'
import os, sys
top, filters = int(sys.argv[1]), [a.split("=", 1) for a in sys.argv[2:]]
skip, seen, todo = {os.getpid(), os.getppid()}, set(), [top]
while todo:
    p = todo.pop()
    try:
        tasks = os.listdir(f"/proc/{p}/task")
    except OSError:
        continue
    for t in tasks:
        try:
            kids = open(f"/proc/{p}/task/{t}/children").read().split()
        except OSError:
            continue
        for k in map(int, kids):
            if k not in seen:
                seen.add(k)
                todo.append(k)
for p in sorted(seen - skip):
    try:
        stat = open(f"/proc/{p}/stat").read()
        uid = [l.split()[1] for l in open(f"/proc/{p}/status") if l.startswith("Uid:")][0]
        argv = open(f"/proc/{p}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, IndexError):
        continue
    comm, state = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2]
    if state in "ZX":  # dead, not yet reaped
        continue
    have = {"comm": comm, "uid": uid}
    if all(have[k] == v if k in have else v in argv for k, v in filters):
        print(p, uid, comm.replace(" ", "_"), argv)
PY
}
# no_own_procs FILTER...: none of them (as own_procs); else they are printed.
no_own_procs() {
        local left
        left=$(own_procs "$@")
        [ -z "$left" ] || { echo "left: $left"; return 1; }
}

# runsc_root DIR: the runsc root of DIR's worker (orchestrator/dirs.h: below /run, by name).
worker_name() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["name"])' "$1/config.json"; }
runsc_root() { echo "/run/tentaflake-worker-$(worker_name "$1")/runsc"; }

# submit DIR ID CLASS ARGV_JSON: write atomically as a controller would
submit() {
        local dir=$1 id=$2 cls=$3 argv=$4 inbox="$1/ws/.tentaflake-worker/inbox"
        printf '{"version":1,"id":"%s","action_class":"%s","argv":%s}' "$id" "$cls" "$argv" >"$inbox/.$id.tmp"
        mv "$inbox/.$id.tmp" "$inbox/$id.json"
}

# wait_file PATH [SECONDS]: wait for a path to appear (inotifywait-free: bounded poll of the
# file system, used only as a test harness timeout, never as a timing assertion)
wait_file() {
        local path=$1 limit=${2:-120} i=0
        while [ ! -e "$path" ]; do
                i=$((i + 1))
                [ $i -gt $((limit * 10)) ] && return 1
                sleep 0.1
        done
}

# ---- egress tests: a TCP port free now, and tests/integration/egress-server.py as an upstream
# (found from here, where it was sourced: a test may cd away after).
TFW_INTEGRATION_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# egress_upstream DIR ADDR PORT [PREFIX...]: the server on ADDR:PORT logging into DIR (made),
# run under PREFIX (e.g. ip netns exec NS); returns once it listens, its pid in UPSTREAM_PID.
egress_upstream() {
        local d=$1 addr=$2 port=$3
        shift 3
        mkdir -p "$d"
        "$@" python3 "$TFW_INTEGRATION_DIR/egress-server.py" "$addr" "$port" "$d" >"$d/out" 2>&1 &
        UPSTREAM_PID=$!
        wait_for 20 grep -q ready "$d/out" || { echo "egress_upstream: $addr:$port did not start:"; cat "$d/out"; return 1; }
}

result_field() { # result_field DIR ID FIELD
        python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print("null" if v is None else v)' \
                "$1/results/$2/result.json" "$3"
}

finish() {
        echo "$(basename "$0"): $passes passed, $fails failed"
        [ "$fails" -eq 0 ]
}

# ---- The real daemon (issue 5 tests). Every wait below is a bounded harness timeout on an
# ---- event (a file, a log line, a process ending), never a timing assertion.

TFW_DAEMON_PID=

quiet() { "$@" >/dev/null; } # a check on a command whose stdout is not wanted

tfw() { # tfw DIR ARGS...: the CLI on DIR's config
        local dir=$1; shift
        "$BIN" --config "$dir/config.json" "$@"
}

# wait_for SECONDS COMMAND...: poll until the command succeeds; 1 when the time is up.
wait_for() {
        local limit=$1 i=0; shift
        until "$@"; do
                i=$((i + 1))
                [ $i -gt $((limit * 20)) ] && return 1
                sleep 0.05
        done
}

_count_lines() { local n; n=$(grep -c -- "$2" "$1" 2>/dev/null); echo "${n:-0}"; }
_more_lines() { [ "$(_count_lines "$1" "$2")" -gt "$3" ]; }

# start_daemon DIR [VERB]: `run` (or VERB) in the background, stderr appended to
# DIR/daemon.log; TFW_DAEMON_PID is its pid. Returns once it has said it is watching the
# inbox (its watch is in place), 1 when it died or never got there.
start_daemon() {
        local dir=$1 verb=${2:-run} n
        n=$(_count_lines "$dir/daemon.log" ": watching '")
        "$BIN" --config "$dir/config.json" "$verb" >>"$dir/daemon.log" 2>&1 &
        TFW_DAEMON_PID=$!
        if ! wait_for 60 _more_lines "$dir/daemon.log" ": watching '" "$n"; then
                echo "start_daemon: the daemon did not come up; its log ends:"
                tail -n 20 "$dir/daemon.log"
                return 1
        fi
        if ! kill -0 "$TFW_DAEMON_PID" 2>/dev/null; then
                echo "start_daemon: the daemon exited at once; its log ends:"
                tail -n 20 "$dir/daemon.log"
                return 1
        fi
}

daemon_alive() { [ -n "$TFW_DAEMON_PID" ] && kill -0 "$TFW_DAEMON_PID" 2>/dev/null; }

# stop_daemon [SIGNAL]: signal the daemon (TERM by default) and reap it; returns its exit
# status (128+N for a signal).
stop_daemon() {
        local sig=${1:-TERM} rc=0
        [ -n "$TFW_DAEMON_PID" ] || return 0
        kill -"$sig" "$TFW_DAEMON_PID" 2>/dev/null
        wait "$TFW_DAEMON_PID" || rc=$?
        TFW_DAEMON_PID=
        return $rc
}

# wait_result DIR ID [SECONDS]: the published result of ID.
# The capsules' scratch as the running daemon sees it: a tmpfs in its own mount namespace
# (orchestrator/scratch.h), reached through its /proc/PID/root. Fails when there is none.
daemon_scratch() { # daemon_scratch DIR: its entries, one a line
        grep -q " $1/state/scratch .* - tmpfs tentaflake-scratch " "/proc/$TFW_DAEMON_PID/mountinfo" &&
                { ls -A "/proc/$TFW_DAEMON_PID/root$1/state/scratch"; true; }
}
# no_scratch_mount DIR: no scratch tmpfs of DIR's worker is mounted in this (the host's)
# namespace (another worker's, in its own namespace or not, is not the test's).
no_scratch_mount() { ! grep -q " $1/[^ ]* .* - tmpfs tentaflake-scratch " /proc/self/mountinfo; }

wait_result() { wait_file "$1/results/$2/result.json" "${3:-120}"; }

_state_is() {
        [ -e "$1/results/$2.state.json" ] &&
                python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["state"] != sys.argv[2])' \
                        "$1/results/$2.state.json" "$3" 2>/dev/null
}
# wait_state DIR ID STATE [SECONDS]: <id>.state.json says STATE (pending, queued, running).
wait_state() { wait_for "${4:-60}" _state_is "$1" "$2" "$3"; }

_gone() { [ ! -e "$1" ] && [ ! -L "$1" ]; }
# wait_gone PATH [SECONDS]: the path (also a dangling symlink) no longer exists.
wait_gone() { wait_for "${2:-60}" _gone "$1"; }

# json_get FILE PY_EXPR: print a value of a JSON file, r being the document, e.g.
# json_get f 'r["approval"]["by"]'; null prints as "null".
json_get() {
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); v=eval(sys.argv[2]); print("null" if v is None else v)' \
                "$1" "$2"
}

# rejected_record DIR NAME: the .rejected/ record whose "name" is NAME (newest), or fail.
rejected_record() {
        python3 - "$1/results/.rejected" "$2" <<'PY'
import json, os, sys
d, name = sys.argv[1], sys.argv[2]
best = None
for f in sorted(os.listdir(d)):
    p = os.path.join(d, f)
    try:
        r = json.load(open(p))
    except Exception:
        continue
    if r.get("name") == name and (best is None or os.stat(p).st_mtime_ns >= os.stat(best).st_mtime_ns):
        best = p
if best is None:
    sys.exit(1)
print(best)
PY
}

# audit_count DIR EVENT [ID]: how many audit lines of EVENT (for ID) across every audit file.
audit_count() {
        python3 - "$1/state/audit" "$2" "${3:-}" <<'PY'
import json, os, sys
d, ev, ident = sys.argv[1:4]
n = 0
for f in sorted(os.listdir(d)):
    if not f.endswith(".jsonl"):
        continue
    for line in open(os.path.join(d, f), encoding="utf-8", errors="replace"):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("event") == ev and (not ident or r.get("id") == ident):
            n += 1
print(n)
PY
}

# remove_cgroup_group GROUP: the (empty) cgroups of GROUP, in every hierarchy (a container's
# systemd-nspawn payload too): each directory of that exact name and what is below it, never a
# directory of another name.
remove_cgroup_group() {
        local g
        while read -r g; do
                find "$g" -depth -type d -exec rmdir {} + 2>/dev/null
        done < <(find /sys/fs/cgroup -maxdepth 3 -type d -name "$1" 2>/dev/null)
        return 0
}

# worker_cleanup DIR: the EXIT trap of a daemon test: kill the daemon if it still runs, delete
# what runsc still lists in DIR's runsc root, remove the (empty) cgroups of the worker's group
# and those runsc would have made by itself for its containers (/tfw-NAME-ID), and DIR itself
# (kept when TFW_KEEP is set, for a post-mortem).
worker_cleanup() {
        local dir=$1 name c
        [ -n "$TFW_DAEMON_PID" ] && kill -KILL "$TFW_DAEMON_PID" 2>/dev/null
        wait 2>/dev/null
        name=$(worker_name "$dir" 2>/dev/null)
        local root=/run/tentaflake-worker-$name/runsc
        if [ -n "$name" ] && [ -d "$root" ]; then
                for c in $(runsc --root "$root" list -quiet 2>/dev/null); do
                        runsc --root "$root" delete -force "$c" >/dev/null 2>&1
                done
                if command -v runc >/dev/null; then
                        for c in $(runc --root "$root" list -q 2>/dev/null); do
                                runc --root "$root" delete --force "$c" >/dev/null 2>&1
                        done
                fi
                rm -rf "/run/tentaflake-worker-$name"
        fi
        if [ -n "$name" ]; then
                remove_cgroup_group "tentaflake-worker-$name"
                find /sys/fs/cgroup -maxdepth 3 -depth -type d -name "tfw-$name-*" -exec rmdir {} + 2>/dev/null
        fi
        # The generation store outlives the daemon (orchestrator/store-tmpfs.h): unmounted here,
        # wherever below DIR a config of the test put its state_dir.
        local m
        awk -v d="$dir/" '$1 == "tentaflake-store" && $3 == "tmpfs" && index($2, d) == 1 { print $2 }' /proc/self/mounts |
                while read -r m; do umount -l "$m"; done
        if [ -n "${TFW_KEEP:-}" ]; then echo "kept $dir"; else rm -rf "$dir"; fi
}
