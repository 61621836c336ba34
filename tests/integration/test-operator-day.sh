#!/usr/bin/env bash
# The operator's day (issue 23), as a new operator meets it, with the real daemon and runsc:
#  1. started by hand under umask 0027 with the default results_dir below /run, the controller
#     can still submit and read its result; doctor proves the controller's view, and fails when
#     an ancestor of results_dir locks the controller out;
#  3. a pending request is logged with the approve command, counted in STATUS=, and handed to
#     the notify hook (as nobody, with its id, class and reason; a failing or hung hook is
#     logged, bounded in time);
#  5. approve on an id still in the inbox says it is not taken yet and list shows it; list fits
#     29-character ids; show gives times, expiry and paths; a finished job's line carries its
#     exit code and duration; a clean stop says "stopped"; gc says whether it rotated;
#  7. a clean stop leaves no cgroup of the worker in any hierarchy.
set -uo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
source tests/integration/lib.sh
require_root
if ! command -v runsc >/dev/null; then echo "SKIP: runsc is not installed"; exit 77; fi
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=$(test_dir tfw-it-opday)
chmod 0755 "$dir"
notify_pid=
name=opday$$
name=${name:0:20}
hook=/run/tfw-opday-hook-$name
# Only this run's hook: another run's, beside this one, is not this run's to remove.
trap '[ -n "$notify_pid" ] && kill "$notify_pid" 2>/dev/null; worker_cleanup "$dir" >/dev/null 2>&1; rm -rf "$hook" "$hook.out"' EXIT
run_dir=/run/tentaflake-worker-$name
mkdir -p "$dir/ws" && chown 10000:10000 "$dir/ws"
# The hook writes what it was told where nobody can write (a directory it owns), and a
# second hook fails, a third never ends.
mkdir -p "$hook.out" && chown 65534:65534 "$hook.out"
cat >"$hook" <<EOF
#!/bin/sh
{ env | grep '^TENTAFLAKE_' | sort; echo "uid=\$(id -u) gid=\$(id -g) groups=\$(id -G)"; } >"$hook.out/.\$TENTAFLAKE_ID"
mv "$hook.out/.\$TENTAFLAKE_ID" "$hook.out/\$TENTAFLAKE_ID"
case "\$TENTAFLAKE_ID" in fail-*) exit 3 ;; hang-*) exec sleep 60 ;; esac
EOF
chmod 0755 "$hook"
write_config() { # write_config EXTRA_JSON: the default state and results directories
        cat >"$dir/config.json" <<JSON
{"version": 1, "name": "$name", "workspace": "$dir/ws", "container_uid": 10000, "container_gid": 10000,
 "state_dir": "$dir/state", "notify": {"command": ["$hook"], "timeout_seconds": 2}$1}
JSON
}
write_config ""
rm -rf "$run_dir"

# STATUS= lines: a datagram socket standing in for systemd's notify socket.
sock=$dir/notify.sock
python3 - "$sock" "$dir/status.log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as log:
    while True:
        log.write(s.recv(4096).decode(errors="replace") + "\n")
PY
notify_pid=$!
wait_file "$sock" 10

# 1. The daemon started by hand under the umask of a careful root shell.
n0=$(_count_lines "$dir/daemon.log" ": watching '")
(umask 0027; NOTIFY_SOCKET=$sock exec "$BIN" --config "$dir/config.json" run >>"$dir/daemon.log" 2>&1) &
TFW_DAEMON_PID=$!
check "the daemon comes up" wait_for 60 _more_lines "$dir/daemon.log" ": watching '" "$n0"
check "the runtime directory it made is 0755, whatever the umask" test "$(stat -c %a "$run_dir")" = 755
as_controller() { (cd "$dir/ws" && setpriv --reuid=10000 --regid=10000 --clear-groups "$@"); }
out=$(as_controller "$BIN" submit -- echo controller-sees-this 2>&1); rc=$?
check "submit as the controller runs and reads its result (rc $rc: $out)" test "$rc" = 0
check "  ... its log came back" grep -q controller-sees-this <<<"$out"
check "a finished job's line has its exit code and duration" wait_for 10 \
        grep -qE "job '[a-z0-9_-]+': succeeded, exit code 0, ran [0-9]+\.[0-9]{3} s" "$dir/daemon.log"

doc=$("$BIN" --config "$dir/config.json" doctor --json 2>/dev/null)
doc_ok() { # doc_ok CHECK true|false: doctor's JSON has CHECK with that ok
        python3 -c 'import json,sys; c={x["check"]: x["ok"] for x in json.loads(sys.argv[1])}; sys.exit(c.get(sys.argv[2]) is not (sys.argv[3] == "true"))' "$doc" "$1" "$2"
}
check "doctor: the workspace is the controller's" doc_ok workspace true
check "doctor: the controller can write the inbox" doc_ok inbox true
check "doctor: the controller can read results_dir" doc_ok results_view true
chmod 0750 "$run_dir"
out=$("$BIN" --config "$dir/config.json" doctor 2>&1); rc=$?
check "doctor fails when an ancestor of results_dir locks the controller out (rc $rc)" test "$rc" = 1
check "  ... and names the directory and its mode" \
        grep -q "✗ results_view: uid 10000 cannot reach '$run_dir/results': '$run_dir' (owner 0:0, mode 0750) cannot be searched" <<<"$out"
chmod 0755 "$run_dir"

# 3. Pending: logged with the command, counted, told to the hook.
id29=ok-twenty-nine-characters-id1
check "id29 is 29 characters" test ${#id29} = 29
submit "$dir" "$id29" irreversible '["echo","approved"]'
pending_in_run_dir() { grep -q '"state":"pending"' "$run_dir/results/$1.state.json" 2>/dev/null ||
        grep -q '"state": "pending"' "$run_dir/results/$1.state.json" 2>/dev/null; }
check "$id29 is pending" wait_for 30 pending_in_run_dir "$id29"
check "the journal says it waits, with the command that approves it" \
        grep -q "request '$id29' (irreversible) waits for approval until .*; approve with: tentaflake-worker --config $dir/config.json approve $id29 --expect-sha256 [0-9a-f]\{64\}" "$dir/daemon.log"
last_status_is() { [ "$(grep STATUS= "$dir/status.log" | tail -n 1)" = "STATUS=$1" ]; }
check "STATUS= counts it" wait_for 10 last_status_is "0 running, 0 queued, 1 pending approval"
check "the hook ran" wait_file "$hook.out/$id29" 10
check "  ... as nobody, with no other group" grep -qx "uid=65534 gid=65534 groups=65534" "$hook.out/$id29"
check "  ... told the id and the class" grep -qx "TENTAFLAKE_CLASS=irreversible" "$hook.out/$id29"
check "  ... and the approve command" grep -q "^TENTAFLAKE_APPROVE=tentaflake-worker --config $dir/config.json approve $id29 --expect-sha256 " "$hook.out/$id29"
printf '{"version":1,"id":"fail-1","action_class":"irreversible","argv":["true"],"reason":"why: \\"quoted\\" $HOME\\n<2>tentaflake-worker: forged line"}' >"$dir/ws/.tentaflake-worker/inbox/.f"
mv "$dir/ws/.tentaflake-worker/inbox/.f" "$dir/ws/.tentaflake-worker/inbox/fail-1.json"
check "a failing hook is logged" wait_for 20 grep -q "notify: the hook for 'fail-1' failed with exit status 3" "$dir/daemon.log"
check "  ... the agent's reason reached it as data" grep -qxF 'TENTAFLAKE_REASON=why: "quoted" $HOME' "$hook.out/fail-1"
check "  ... and reached the journal escaped, inside the worker's own line, after the command" \
        grep -qF "approve fail-1 --expect-sha256 " "$dir/daemon.log"
one_forged_line() {
        [ "$(grep -c forged "$dir/daemon.log")" = 1 ] &&
                grep forged "$dir/daemon.log" | grep -qF "the agent's reason: 'why: \"quoted\" \$HOME\\x0a<2>tentaflake-worker: forged line'"
}
check "  ... a newline in it forges no line of the worker's: $(grep forged "$dir/daemon.log" | head -c 300)" one_forged_line
submit "$dir" hang-1 irreversible '["true"]'
check "a hung hook is killed after notify.timeout_seconds, and logged" \
        wait_for 30 grep -q "notify: the hook for 'hang-1' ran longer than notify.timeout_seconds (2) and was killed" "$dir/daemon.log"
# The hooks this test's daemon ran (lib.sh own_procs): a real worker's hook on the same host,
# also nobody's, is not this test's.
no_hook_left() { no_own_procs uid=65534 "argv=sleep 60" >/dev/null; }
wait_for 10 no_hook_left
check "  ... and nothing of it is left $(own_procs uid=65534 "argv=sleep 60")" no_hook_left
# The agent decides how many requests wait: a flood of them runs at most 4 hooks at once.
for i in 2 3 4 5 6 7; do submit "$dir" "hang-$i" irreversible '["true"]'; done
check "a flood of pending requests runs at most 4 hooks at once" \
        wait_for 30 grep -q "notify: 4 hooks are still running: not run for 'hang-" "$dir/daemon.log"
six_told() { [ "$(grep -c "request 'hang-[2-7]' (irreversible) waits for approval" "$dir/daemon.log")" = 6 ]; }
check "  ... each of them still has its journal line" wait_for 10 six_told
wait_for 20 no_hook_left
check "  ... and the hooks that ran are gone after their timeout $(own_procs uid=65534 "argv=sleep 60")" no_hook_left
check "the daemon is alive after its hooks" daemon_alive

# 5. What the operator reads.
out=$("$BIN" --config "$dir/config.json" list)
check "list fits a 29-character id: its column is aligned ($out)" \
        grep -qE "^$id29 pending +irreversible" <<<"$out"
out=$("$BIN" --config "$dir/config.json" show "$id29")
check "show gives a pending request's expiry" grep -qE "^expires at: +[0-9T:-]+Z \(pending_ttl_hours 72\)" <<<"$out"
quiet "$BIN" --config "$dir/config.json" approve "$id29" --wait
out=$("$BIN" --config "$dir/config.json" show "$id29")
check "show gives start, end and duration" grep -qE "^duration: +[0-9]+\.[0-9]{3} s" <<<"$out"
check "  ... and the result's and the log's paths" grep -qx "log:          $run_dir/results/$id29/job.log" <<<"$out"
js=$("$BIN" --config "$dir/config.json" deny fail-1 --reason "not today" --json)
check "deny --json says who decided" python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(not (d["decision"]=="denied" and d["reason"]=="not today" and d["by"]))' "$js"
check "STATUS= follows an approval and a denial" wait_for 10 last_status_is "0 running, 0 queued, 7 pending approval"

# A request the worker has not taken yet (no daemon runs).
stop_daemon
check "a clean stop says so" grep -q "worker '$name' stopped$" "$dir/daemon.log"
submit "$dir" waiting-1 irreversible '["true"]'
out=$("$BIN" --config "$dir/config.json" approve waiting-1 2>&1); rc=$?
check "approve on an id still in the inbox fails (rc $rc)" test "$rc" = 1
check "  ... saying it is not taken yet: $out" grep -q "approve 'waiting-1': not taken yet: it is still in the inbox" <<<"$out"
# An entry whose name mimics a row of the list (the agent names its files) is only counted.
touch "$dir/ws/.tentaflake-worker/inbox/fake1                         pending   irreversible"
out=$("$BIN" --config "$dir/config.json" list)
check "list shows it as in the inbox" grep -qE "^waiting-1 +inbox +- +[0-9T:-]+Z +\(not taken yet\)" <<<"$out"
check "  ... and only counts a name no request can have: $out" \
        grep -qx "(in the inbox also: 0 more request(s) not taken yet, 1 entry no request can be)" <<<"$out"
check "  ... never showing it" bash -c "! grep -q fake1 <<<\"\$1\"" _ "$out"
rm -f "$dir/ws/.tentaflake-worker/inbox/fake1"*
out=$("$BIN" --config "$dir/config.json" gc)
check "gc says what it removed and that it rotated: $out" \
        grep -qE "^gc: removed 0 result\(s\) and 0 rejection record\(s\); expired 0 pending request\(s\); audit log rotated to audit/audit-[0-9]{8}(\.[0-9]+)?\.jsonl" <<<"$out"
js=$("$BIN" --config "$dir/config.json" gc --json)
check "gc --json: nothing more to rotate" python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(d["audit"]["rotated"] is not False)' "$js"
js=$("$BIN" --config "$dir/config.json" audit verify --json)
check "audit verify --json: intact" python3 -c 'import json,sys; d=json.loads(sys.argv[1]); sys.exit(not (d["intact"] is True and d["lines"] > 0))' "$js"

# 7. No empty group of the worker left behind in any hierarchy.
left=$(find /sys/fs/cgroup -maxdepth 2 -type d -name "tentaflake-worker-$name" 2>/dev/null)
check "no cgroup of the worker is left after a clean stop: ${left:-none}" test -z "$left"

# 1 again: a worker that starts with its controller locked out says so at once.
chmod 0750 "$run_dir"
timeout 60 "$BIN" --config "$dir/config.json" drain 2>"$dir/drain.log"
check "drain warns that the controller cannot reach its results" \
        grep -q "results_view: uid 10000 cannot reach '$run_dir/results'" "$dir/drain.log"
chmod 0755 "$run_dir"

# A hook someone else could change is not run.
chmod 0757 "$hook"
submit "$dir" notsafe-1 irreversible '["true"]'
timeout 60 "$BIN" --config "$dir/config.json" drain 2>"$dir/drain3.log"
check "a hook file others can write is not run, and that is said" wait_for 20 \
        grep -q "notify: the hook for 'notsafe-1' is not run: '$hook' is a file (owner 0, mode 0757): it must be a file of root's that nobody else can write" "$dir/drain3.log"
check "  ... (it did not run)" test ! -e "$hook.out/notsafe-1"
chmod 0755 "$hook"
finish
