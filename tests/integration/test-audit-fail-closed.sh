#!/usr/bin/env bash
# Issue 11 item 9, the audit fails closed for decisions, with the real daemon and CLI. While the
# audit log cannot be appended to (its last line is not a record: every append stops), `approve`
# and `deny` exit 1 saying why and leave the request pending, and a queued job is not started:
# `drain` leaves it queued and nothing runs. Once the log is whole again, the same approval and
# the same job go through, each recorded once. Real daemon, real runsc.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir i11t-audit)
trap 'worker_cleanup "$dir"' EXIT
new_worker "$dir" ', "limits": {"memory": "256m", "memory_swap": "256m", "pids": 64}'
inbox="$dir/ws/.tentaflake-worker/inbox"
res="$dir/results"
log="$dir/state/audit/audit.jsonl"
tfw "$dir" drain 2>>"$dir/daemon.log" # an empty first run makes the inbox and the log
drop() { # drop ID CLASS ARGV_JSON
        printf '{"version":1,"id":"%s","action_class":"%s","argv":%s}' "$1" "$2" "$3" >"$inbox/.$1.tmp"
        mv "$inbox/.$1.tmp" "$inbox/$1.json"
}
cp "$log" "$dir/whole"
echo garbage >>"$log"

drop run1 local-reversible '["sh","-c","echo run1-ran"]'
drop pend1 irreversible '["sh","-c","echo pend1-ran"]'
drop pend2 financial '["true"]'
tfw "$dir" drain 2>>"$dir/daemon.log"
rc=$?
check "drain exits 0 (exit $rc)" test "$rc" = 0
check "run1 was not started: it stays queued" _state_is "$dir" run1 queued
check "  ... and has no result" test ! -e "$res/run1/result.json"
check "  ... the daemon says why" grep -q "job 'run1': not started: cannot record 'started' in the audit log" "$dir/daemon.log"
check "  ... nothing ran in a capsule" test -z "$(runsc --root "$(runsc_root "$dir")" list -quiet 2>/dev/null)"
check "pend1 and pend2 are pending" bash -c "$(declare -f _state_is); _state_is '$dir' pend1 pending && _state_is '$dir' pend2 pending"

out=$(SUDO_USER=alice tfw "$dir" approve pend1 2>&1)
rc=$?
check "approve exits 1 (exit $rc)" test "$rc" = 1
check "  ... saying why: $out" grep -q "approve 'pend1': refused, the request stays pending: cannot record 'approved' in the audit log" <<<"$out"
check "  ... pend1 stays pending" _state_is "$dir" pend1 pending
out=$(SUDO_USER=carol tfw "$dir" deny pend2 --reason no 2>&1)
rc=$?
check "deny exits 1 (exit $rc)" test "$rc" = 1
check "  ... saying why: $out" grep -q "deny 'pend2': refused, the request stays pending: cannot record 'denied' in the audit log" <<<"$out"
check "  ... pend2 stays pending, without a result" bash -c "$(declare -f _state_is); _state_is '$dir' pend2 pending && test ! -e '$res/pend2/result.json'"

echo "-- the log is whole again"
cp "$dir/whole" "$log"
check "approve pend1 now goes through" quiet env SUDO_USER=alice "$BIN" --config "$dir/config.json" approve pend1
check "deny pend2 now goes through" quiet env SUDO_USER=carol "$BIN" --config "$dir/config.json" deny pend2 --reason no
tfw "$dir" drain 2>>"$dir/daemon.log"
check "run1 ran" test "$(json_get "$res/run1/result.json" 'r["status"]')" = succeeded
check "pend1 ran" test "$(json_get "$res/pend1/result.json" 'r["status"]')" = succeeded
check "pend2 is denied" test "$(json_get "$res/pend2/result.json" 'r["status"]')" = denied
check "run1 started once, recorded" test "$(audit_count "$dir" started run1)" = 1
check "pend1 approved once, recorded" test "$(audit_count "$dir" approved pend1)" = 1
check "pend2 denied once, recorded" test "$(audit_count "$dir" denied pend2)" = 1
check "audit verify passes" quiet tfw "$dir" audit verify 2>/dev/null
finish
