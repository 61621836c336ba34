#!/usr/bin/env bash
# `systemctl reload` (SIGHUP; issue 36 item 2; docs/operator.md, "Changing the configuration"),
# with the real daemon and runsc:
#   - a changed key a job reads afresh (limits.default_timeout_seconds) is applied: the next job
#     ends at the new timeout, in the same daemon process, with its store kept;
#   - a changed key fixed at start (concurrency) is named as needing a restart and keeps its
#     value; both are said in the log and audited (config-reload);
#   - a file that does not parse changes nothing, and says why: the next job still has the
#     applied timeout; a file that is fixed again is then applied.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-reload)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir"' EXIT
res=$dir/results
config() { # config DEFAULT_TIMEOUT CONCURRENCY
        new_worker "$dir" ", \"concurrency\": $2, \"runtime\": {\"warm_seconds\": 0}, \"limits\": {\"default_timeout_seconds\": $1}"
}
said() { wait_for 30 grep -qF -- "$1" "$dir/daemon.log"; }
reason() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r.get("reason") or r.get("status"))' "$res/$1/result.json"; }

config 300 1
start_daemon "$dir" || exit 1
pid=$TFW_DAEMON_PID
submit "$dir" j1 local-reversible '["sh","-c","sleep 4; echo slept"]'
check "before the reload a 4 s job runs to its end" wait_result "$dir" j1
check "... succeeded" test "$(result_field "$dir" j1 status)" = succeeded
store_ino=$(stat -c %i "$dir/state/store/lane-0/tree")

config 2 2
kill -HUP "$pid"
check "the reload applies the timeout" said "configuration reload: applied limits.default_timeout_seconds"
check "... and names concurrency as needing a restart" said "these keys changed and need a restart (their old values stay until then): concurrency"
check "... audited" test "$(audit_count "$dir" config-reload)" -ge 1
submit "$dir" j2 local-reversible '["sh","-c","sleep 20; echo slept"]'
check "after it the same job ends at the new timeout" wait_result "$dir" j2 60
check "... timed out" grep -q '"timeout"\|timed_out' "$res/j2/result.json"
check "the daemon is the same process" kill -0 "$pid"
check "... its store kept" test "$(stat -c %i "$dir/state/store/lane-0/tree")" = "$store_ino"

echo '{"version": 1, "name": ' >"$dir/config.json"
n=$(grep -c "configuration reload:" "$dir/daemon.log")
kill -HUP "$pid"
check "a file that does not parse changes nothing and says why" \
        wait_for 30 sh -c "tail -n +$((n + 1)) '$dir/daemon.log' | grep -q 'configuration reload: .*: nothing changed'"
submit "$dir" j3 local-reversible '["sh","-c","sleep 20; echo slept"]'
check "the next job still has the applied timeout" wait_result "$dir" j3 60
check "... timed out" grep -q '"timeout"\|timed_out' "$res/j3/result.json"

config 300 1
kill -HUP "$pid"
check "fixed again, the file is applied" wait_for 30 sh -c "grep -c 'configuration reload: applied limits.default_timeout_seconds' '$dir/daemon.log' | grep -qx 2"
check "... and concurrency no longer differs" sh -c "! tail -1 '$dir/daemon.log' | grep -q 'need a restart'"
stop_daemon || true
finish
