#!/usr/bin/env bash
# The controller stops its own job (issue 35 item 3; docs/controller.md "Stopping a job";
# threat 20), against the real daemon and real runsc capsules, every cancel written as the
# controller's own uid (10000): `submit --cancel ID` on a running job (cold, caught while its
# capsule boots; and started ahead, while `sleep 300` runs), a queued one and a pending one (its
# later `deny` refused); refusals that change nothing: an unknown id, a finished job (by submit,
# and by a cancel file written past submit, which the worker itself refuses), a cancel that is
# not an empty regular file; and a cancel that reaches the inbox before its request is read.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=$(test_dir i35-cancel)
chmod 0755 "$dir" # the controller (uid 10000) must reach its results, as on a real host
trap 'worker_cleanup "$dir"' EXIT
new_worker "$dir" ', "pending_ttl_hours": 1, "runtime": {"warm_seconds": 600},
 "limits": {"default_timeout_seconds": 600, "max_timeout_seconds": 900, "memory": "512m", "memory_swap": "512m"}'
ws="$dir/ws" inbox="$dir/ws/.tentaflake-worker/inbox" res="$dir/results"
name=$(worker_name "$dir") root=$(runsc_root "$dir")
mkdir -p "$dir/bin" "$dir/out" "$dir/home"
install -m 0755 "$BIN" "$dir/bin/tentaflake-worker"
chown 10000:10000 "$dir/out" "$dir/home"

# as_ctl CMD...: as the controller, in the workspace, no privilege.
as_ctl() { (cd "$ws" && setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs \
        env -i PATH=/usr/bin:/bin HOME="$dir/home" "$@"); }
# run NAME ARGS...: tentaflake-worker ARGS as the controller; out, err, rc in $dir/out/NAME.*
run() {
        local n=$1; shift
        as_ctl "$dir/bin/tentaflake-worker" "$@" >"$dir/out/$n.out" 2>"$dir/out/$n.err"
        echo $? >"$dir/out/$n.rc"
}
rc_is() { local got; got=$(cat "$dir/out/$1.rc"); [ "$got" = "$2" ] || { echo "  $1: rc $got, want $2:"; cat "$dir/out/$1.err"; return 1; }; }
err_has() { grep -q -- "$2" "$dir/out/$1.err" || { echo "  $1: no '$2' in:"; cat "$dir/out/$1.err"; return 1; }; }
status_is() { [ "$(result_field "$dir" "$1" status)" = "$2" ] && [ "$(result_field "$dir" "$1" error)" = "${3:-cancelled_by_controller}" ]; }
in_sandbox() { "${TFW_DRIVER:-runsc}" --root "$root" ps "$1" 2>/dev/null | grep -q "$2"; }
cid_of() { # the container a job runs in: its own, or the capsule started ahead that took it
        local w; w=$(grep -o "job '$1': started in capsule '[^']*'" "$dir/daemon.log" | sed "s/.*capsule '\(.*\)'/\1/")
        echo "tfw-$name-${w:-$1}"
}
submit_as_ctl() { # submit_as_ctl ID CLASS ARGV_JSON: a request written by the controller
        as_ctl sh -c "printf '%s' '{\"version\":1,\"id\":\"$1\",\"action_class\":\"$2\",\"argv\":$3}' >'$inbox/.$1.tmp' && mv '$inbox/.$1.tmp' '$inbox/$1.json'"
}
nothing_in_inbox() { [ -z "$(ls -A "$inbox")" ]; }
record_has() { local f; f=$(rejected_record "$dir" "$1") && grep -q -- "$2" "$f"; }

start_daemon "$dir" || exit 1

echo "-- a running job, cold, cancelled as soon as it is running (its capsule still booting)"
submit_as_ctl run1 local-reversible '["sleep","300"]'
check "run1 runs" wait_state "$dir" run1 running
t0=$SECONDS
run c-run1 submit --cancel run1 --wait-timeout 120
check "submit --cancel run1: exit 0" rc_is c-run1 0
check "submit --cancel run1 says cancelled" err_has c-run1 "cancelled: cancelled_by_controller"
check "run1 ends within 120 s of the cancel ($((SECONDS - t0)) s)" test $((SECONDS - t0)) -lt 120
check "run1: status cancelled, error cancelled_by_controller" status_is run1 cancelled
check "run1: no state file left" test ! -e "$res/run1.state.json"
check "run1: its capsule's processes are gone" no_own_procs argv="tfw-$name-run1"
check "run1: runsc lists no container of it" sh -c "! runsc --root '$root' list -quiet 2>/dev/null | grep -qx 'tfw-$name-run1'"
check "run1: audited cancel-requested once" test "$(audit_count "$dir" cancel-requested run1)" = 1
check "run1: its ending audited once, as cancelled" python3 - "$dir/state/audit" run1 <<'PY'
import json, os, sys
d, ident = sys.argv[1:3]
ends = [r for f in sorted(os.listdir(d)) if f.endswith(".jsonl") for r in map(json.loads, open(os.path.join(d, f)))
        if r.get("id") == ident and r.get("event") == "finished"]
sys.exit(not (len(ends) == 1 and ends[0].get("outcome") == "cancelled"))
PY

echo "-- a running job in a capsule started ahead, cancelled while sleep 300 runs"
submit_as_ctl run2 local-reversible '["sleep","300"]'
check "run2 runs" wait_state "$dir" run2 running
check "run2 was given a capsule started ahead" wait_for 30 grep -q "job 'run2': started in capsule 'warm-" "$dir/daemon.log"
cid2=$(cid_of run2)
check "run2: sleep runs in its capsule ($cid2)" wait_for 120 in_sandbox "$cid2" sleep
t0=$SECONDS
run c-run2 submit --cancel run2 --wait-timeout 120
check "submit --cancel run2: exit 0" rc_is c-run2 0
check "run2 ends within 120 s of the cancel ($((SECONDS - t0)) s)" test $((SECONDS - t0)) -lt 120
check "run2: status cancelled" status_is run2 cancelled
check "run2: the message says it ran" grep -q "while it ran" "$res/run2/result.json"
check "run2: its log is there" test -f "$res/run2/job.log"
check "run2: its capsule's processes are gone" no_own_procs argv="$cid2"
check "run2: runsc lists no container of it" sh -c "! runsc --root '$root' list -quiet 2>/dev/null | grep -qx '$cid2'"

echo "-- a queued request (behind a running one) and a pending one"
submit_as_ctl busy local-reversible '["sleep","300"]'
check "busy runs" wait_state "$dir" busy running
submit_as_ctl queued1 local-reversible '["true"]'
check "queued1 is queued" wait_state "$dir" queued1 queued
submit_as_ctl pend1 irreversible '["true"]'
check "pend1 is pending" wait_state "$dir" pend1 pending
run c-q submit --cancel queued1 --wait-timeout 60
check "submit --cancel queued1: exit 0" rc_is c-q 0
check "queued1: status cancelled" status_is queued1 cancelled
check "queued1: the message says it was queued" grep -q "while it was queued" "$res/queued1/result.json"
check "queued1 never started" test "$(audit_count "$dir" started queued1)" = 0
check "queued1: audited cancelled once" test "$(audit_count "$dir" cancelled queued1)" = 1
run c-p submit --cancel pend1 --wait-timeout 60
check "submit --cancel pend1: exit 0" rc_is c-p 0
check "pend1: status cancelled, withdrawn" sh -c "grep -q withdrawn '$res/pend1/result.json'"
check "pend1: status cancelled" status_is pend1 cancelled
check "pend1: audited cancelled once" test "$(audit_count "$dir" cancelled pend1)" = 1
check "deny pend1 afterwards: refused, naming the ending" sh -c "! tfw_deny=\$('$BIN' --config '$dir/config.json' deny pend1 2>&1) && echo \"\$tfw_deny\" | grep -q 'already ended as cancelled'"
check "busy is still running" _state_is "$dir" busy running

echo "-- refusals: nothing changes"
run c-unknown submit --cancel nosuch --wait-timeout 10
check "unknown id: exit 1" rc_is c-unknown 1
check "unknown id: says so" err_has c-unknown "this workspace has no request with that id"
check "unknown id: nothing written into the inbox" nothing_in_inbox
sha=$(sha256sum "$res/run1/result.json")
run c-done submit --cancel run1 --wait-timeout 10
check "finished id: exit 1" rc_is c-done 1
check "finished id: says how it ended" err_has c-done "already ended as cancelled"
check "finished id: result unchanged" test "$(sha256sum "$res/run1/result.json")" = "$sha"
run c-bad submit --cancel ../x --wait-timeout 10
check "a path as id: exit 1" rc_is c-bad 1
check "a path as id: not an id" err_has c-bad "not a request id"

echo "-- the worker's own refusals (cancel files written past submit)"
n_ref=$(audit_count "$dir" cancel-refused)
as_ctl touch "$inbox/other-ws-id.cancel"
check "unknown id: a .rejected/ record" quiet wait_for 30 rejected_record "$dir" other-ws-id.cancel
check "unknown id: its code" record_has other-ws-id.cancel cancel_unknown_id
as_ctl touch "$inbox/run2.cancel"
check "finished id: a .rejected/ record" quiet wait_for 30 rejected_record "$dir" run2.cancel
check "finished id: its code" record_has run2.cancel cancel_already_ended
check "finished id: run2's result unchanged" status_is run2 cancelled
as_ctl sh -c "echo x >'$inbox/busy.cancel'"
check "a non-empty cancel: refused" quiet wait_for 30 rejected_record "$dir" busy.cancel
check "a non-empty cancel: bad_cancel" record_has busy.cancel bad_cancel
as_ctl ln -s /etc/passwd "$inbox/busy.cancel"
check "a symlink cancel: removed" wait_gone "$inbox/busy.cancel" 30
check "busy is still running after both" _state_is "$dir" busy running
check "every refusal audited" test "$(audit_count "$dir" cancel-refused)" -ge $((n_ref + 4))
check "the inbox is empty again" wait_for 30 nothing_in_inbox
run c-busy submit --cancel busy --wait-timeout 120
check "busy: cancelled" rc_is c-busy 0

echo "-- a cancel in the inbox before its request was read (no worker running)"
stop_daemon
submit_as_ctl early1 local-reversible '["sleep","300"]'
as_ctl touch "$inbox/early1.cancel"
start_daemon "$dir" || exit 1
check "early1: a result" wait_result "$dir" early1 60
check "early1: cancelled" status_is early1 cancelled
check "early1 never started" test "$(audit_count "$dir" started early1)" = 0
check "the inbox is empty" wait_for 30 nothing_in_inbox
check "the daemon is alive" daemon_alive
stop_daemon
finish
