#!/usr/bin/env bash
# One serve worker per state directory (issue 13, item 5). Two labels that fold to the same
# config name (`ci.1-…` and `CI-1-…` both give serve-ci-1-…) share the default state directory
# /var/lib/tentaflake-worker-serve-ci-1-…; without a lock the second worker's start-up cleanup
# removes the first one's running capsule (its bundle and cgroup) and the first one's check
# dies. With the lock:
#  - the second worker refuses to start (exit 1), naming the directory and the first label,
#    before any cleanup: the first worker's running check goes on and passes, signed;
#  - once the first worker has stopped, the second starts on the same directory (the lock
#    died with its holder; the lock file left behind does not block anyone).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
. "$(dirname "$0")/serve-lib.sh"

lower=ci.1-i13$RUN upper=CI-1-i13$RUN
state=/var/lib/tentaflake-worker-serve-ci-1-i13$RUN
trap 'cleanup; rm -rf "$state"' EXIT
# start LOG LABEL: a worker on the default state directory of its label
start() {
        TENTAFLAKE_TOKEN=$TOKEN "$BIN" serve --server "$URL" --key "$tmp/ci.key" --label "$2" \
                --system-mounts-identity debian-12 --lease-secs 6 --wait-secs 1 --retry-after-secs 1 \
                >"$1.log" 2>&1 &
        wpid=$!
        pids+=($wpid)
}

start a "$lower"
WA=$wpid
wait_ready a || { cat a.log; exit 1; }
check "the first worker made the folded default state directory" test -d "$state"
enqueue long1 "$TREE" '{"argv":["sh","-c","sleep 4; echo still-here"],"timeout_secs":60}'
wait_until "jobs['long1']['state'] == 'claimed'" 60
# The check is running: its capsule is in the runsc root below the shared state directory,
# which is exactly what a second worker's start-up cleanup would delete.
capsules() { runsc --root "$state/runsc" list -quiet 2>/dev/null | grep -c .; }
for _ in $(seq 300); do [ "$(capsules)" -ge 1 ] && break; sleep 0.1; done
check "the first worker's capsule is running" test "$(capsules)" -ge 1

start b "$upper"
WB=$wpid
if timeout 60 tail --pid="$WB" -f /dev/null; then
        wait "$WB"; rc=$?
else
        rc="still running after 60 s"; kill -TERM "$WB"; wait "$WB"
fi
check "the second label refuses to start (exit $rc)" test "$rc" = 1
check "its error names the state directory and the first label" \
        grep -qF -e "--state-dir '$state' is in use by the running worker labelled '$lower'" b.log
check "it names its own label" grep -qF "(label '$upper')" b.log
check "it removed nothing" bash -c "! grep -q 'removed' b.log"
check "the first worker's capsule is still there" test "$(capsules)" -ge 1

final long1 90
check "the first worker's check was not disturbed: a signed pass" \
        [ "$(q "jobs['long1']['history'][-1].get('status')")" = pass ]
check "its output is complete" [ "$(q "'still-here' in jobs['long1']['history'][-1]['result']['log']['tail']")" = True ]
check "the first worker is still running" kill -0 "$WA"

kill -TERM "$WA"; wait "$WA"
check "the lock file stays behind, holding the first label" grep -qx "$lower" "$state/serve.lock"
start c "$upper"
WC=$wpid
wait_ready c || cat c.log
check "after the first stopped, the second label starts on the same directory" grep -q 'claiming from' c.log
check "and the lock file now names it" grep -qx "$upper" "$state/serve.lock"
kill -TERM "$WC"; wait "$WC"

finish
