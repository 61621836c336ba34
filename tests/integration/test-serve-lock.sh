#!/usr/bin/env bash
# One serve worker per state directory, and one name per label (issue 13, item 5). Labels that
# fold alike (`ci.1-…`, `CI-1-…`) once gave the same config name, so the same cgroup group, the
# same container names and the same default state directory: the second worker's start-up
# cleanup removed the first one's running capsule. Now:
#  - a label that folding changes gets 8 hex digits of its sha256 in its name: the two labels
#    start side by side on their own default state directories, each claiming;
#  - two workers on one --state-dir: the second refuses to start (exit 1), naming the directory
#    and the first label, before any cleanup: the first worker's running check goes on and
#    passes, signed;
#  - once the first worker has stopped, the second starts on the same directory (the lock
#    died with its holder; the lock file left behind does not block anyone).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
. "$(dirname "$0")/serve-lib.sh"

lower=ci.1-i13$RUN upper=CI-1-i13$RUN
hash8() { printf %s "$1" | sha256sum | cut -c1-8; }
state=/var/lib/tentaflake-worker-serve-ci-1-i13$RUN-$(hash8 "$lower")
state_upper=/var/lib/tentaflake-worker-serve-ci-1-i13$RUN-$(hash8 "$upper")
trap 'cleanup; rm -rf "$state" "$state_upper"' EXIT
# start LOG LABEL [FLAGS...]: a worker (on the default state directory of its label)
start() {
        local log=$1 label=$2; shift 2
        TENTAFLAKE_TOKEN=$TOKEN "$BIN" serve --server "$URL" --key "$tmp/ci.key" --label "$label" \
                --system-mounts-identity debian-12 --lease-secs 6 --wait-secs 1 --retry-after-secs 1 \
                "$@" >"$log.log" 2>&1 &
        wpid=$!
        pids+=($wpid)
}

# Two labels that fold alike are two workers with two names.
start u "$upper"
WU=$wpid
wait_ready u || { cat u.log; exit 1; }
check "the upper-case label has a default state directory of its own ($state_upper)" test -d "$state_upper"
check "and did not make the lower-case label's" test ! -e "$state"
start a "$lower"
WA=$wpid
wait_ready a || { cat a.log; exit 1; }
check "the lower-case label runs beside it, on its own default state directory" test -d "$state"
check "the upper-case worker is still running" kill -0 "$WU"
kill -TERM "$WU"; wait "$WU"
enqueue long1 "$TREE" '{"argv":["sh","-c","sleep 4; echo still-here"],"timeout_secs":60}'
wait_until "jobs['long1']['state'] == 'claimed'" 60
# The check is running: its capsule is in the runsc root below the shared state directory,
# which is exactly what a second worker's start-up cleanup would delete.
capsules() { runsc --root "$state/runsc" list -quiet 2>/dev/null | grep -c .; }
for _ in $(seq 300); do [ "$(capsules)" -ge 1 ] && break; sleep 0.1; done
check "the first worker's capsule is running" test "$(capsules)" -ge 1

start b "$upper" --state-dir "$state"
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
start c "$upper" --state-dir "$state"
WC=$wpid
wait_ready c || cat c.log
check "after the first stopped, the second label starts on the same directory" grep -q 'claiming from' c.log
check "and the lock file now names it" grep -qx "$upper" "$state/serve.lock"
kill -TERM "$WC"; wait "$WC"

finish
