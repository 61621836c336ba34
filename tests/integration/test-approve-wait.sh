#!/usr/bin/env bash
# approve --wait never blocks forever (issue 14, items 1 and 2), without systemd (the path unit
# under a real systemd is tests/integration/test-systemd-boot.sh):
#  - no worker holds the daemon lock and none can be started: approve --wait says so at once
#    and exits 1, and the approval stays recorded (queued);
#  - a worker holds the lock but never publishes: --timeout SECS ends the wait, exit 1;
#  - the wake file approve leaves is what a later `drain` takes: it runs the approved request
#    and removes the file (so that in path mode its presence alone means unfinished work);
#  - --timeout is checked: needs --wait, 1..2592000 seconds.
set -uo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
source tests/integration/lib.sh
require_root
if ! command -v runsc >/dev/null; then echo "SKIP: runsc is not installed"; exit 77; fi

dir=$(test_dir i14-approve-wait)
chmod 0755 "$dir"
holder=
trap '[ -n "$holder" ] && kill "$holder" 2>/dev/null; worker_cleanup "$dir"' EXIT
new_worker "$dir"
inbox=$dir/ws/.tentaflake-worker/inbox

# A drain with nothing to do creates the inbox and exits; a second one captures the requests.
check "drain on an empty inbox exits 0" timeout 60 "$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log"
submit "$dir" nw1 irreversible '["echo","nw1 ran"]'
submit "$dir" to1 irreversible '["echo","to1 ran"]'
submit "$dir" dr1 irreversible '["echo","dr1 ran"]'
check "drain captures the requests as pending and exits" timeout 60 "$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log"
check "nw1 is pending" wait_state "$dir" nw1 pending 5

# 1. No worker at all: exit 1 at once (without the check it waits forever: timeout's 124).
out=$(SUDO_USER=alice timeout 60 "$BIN" --config "$dir/config.json" approve nw1 --wait 2>&1); rc=$?
check "approve --wait with no worker exits 1 (rc $rc)" test $rc = 1
check "  ... and says no worker can run it: $out" grep -q "approve 'nw1': approved and queued, but no worker runs for" <<<"$out"
check "  ... the approval is recorded: queued" wait_state "$dir" nw1 queued 5
check "  ... and left the wake file for the next drain" test -e "$dir/state/.wake"

# 2. A "worker" that holds the lock and never publishes: the timeout ends the wait.
python3 -c 'import fcntl, sys, time
f = open(sys.argv[1], "a"); fcntl.flock(f, fcntl.LOCK_EX); open(sys.argv[2], "w").close(); time.sleep(600)' \
        "$dir/state/daemon.lock" "$dir/held" &
holder=$!
check "a stand-in worker holds the daemon lock" wait_file "$dir/held" 10
out=$(SUDO_USER=alice timeout 60 "$BIN" --config "$dir/config.json" approve to1 --wait --timeout 2 2>&1); rc=$?
check "approve --wait --timeout 2 under a silent lock holder exits 1 (rc $rc)" test $rc = 1
check "  ... saying the wait timed out: $out" grep -q "approve 'to1': no result within 2 s" <<<"$out"
kill "$holder"; wait "$holder" 2>/dev/null; holder=

# 3. drain takes what approve queued, and the wake file with it.
check "approve dr1 (no wait)" quiet env SUDO_USER=alice "$BIN" --config "$dir/config.json" approve dr1
check "drain runs every approved request and exits" timeout 300 "$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log"
for id in nw1 to1 dr1; do
        check "$id ran after its approval" test "$(result_field "$dir" "$id" status 2>/dev/null)" = succeeded
done
check "drain removed the wake file" test ! -e "$dir/state/.wake"
# show agrees: dr1 is final.
out=$(timeout 60 "$BIN" --config "$dir/config.json" show dr1 2>&1)
check "show dr1 is final" grep -q "^state: *final" <<<"$out"

# 4. Usage.
for bad in "--timeout 5" "--wait --timeout 0" "--wait --timeout x" "--wait --timeout 2592001" "--wait --timeout -1"; do
        # shellcheck disable=SC2086
        "$BIN" --config "$dir/config.json" approve zz $bad >/dev/null 2>&1
        check "approve zz $bad is a usage error (2)" test $? = 2
done
"$BIN" --config "$dir/config.json" approve --help | grep -q -- "--timeout SECS"
check "approve --help names --timeout" test $? = 0

finish
