#!/usr/bin/env bash
# bookworm's own runsc (0.0~20221219, ptrace only) still works (issue 12 item 1): the default is
# now bookworm-backports' 0.0~20240729 with systrap, and a host that keeps the old one must
# keep every wall. The old package is fetched with `apt-get download` and unpacked with
# `dpkg -x` into a temporary directory (nothing is installed); then, through
# runtime.runsc and runtime.platform "ptrace": doctor's wall probes all pass, and one request
# runs through the real daemon.
set -uo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
source tests/integration/lib.sh
require_root
OLD=0.0~20221219.0-2+b3

tmp=$(test_dir tfw-oldrunsc)
chmod 0755 "$tmp"
trap 'stop_daemon KILL >/dev/null 2>&1; [ -e "$tmp/w/config.json" ] && worker_cleanup "$tmp/w"; rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && apt-get download -q "runsc=$OLD" >download.log 2>&1); then
        # The package lists may predate it: refresh once (as install-deps does), then retry.
        apt-get update -q >/dev/null 2>&1
        (cd "$tmp" && apt-get download -q "runsc=$OLD" >download.log 2>&1) || {
                echo "FAIL: cannot download runsc=$OLD:"; cat "$tmp/download.log"; exit 1; }
fi
dpkg -x "$tmp"/runsc_*.deb "$tmp/pkg"
runsc="$tmp/pkg/usr/bin/runsc"
check "the unpacked runsc is bookworm's 0.0~20221219" sh -c "'$runsc' --version | grep -q 'runsc version 0.0~20221219'"

dir="$tmp/w"
new_worker "$dir" ", \"runtime\": {\"runsc\": \"$runsc\", \"platform\": \"ptrace\"}"
echo "old runsc workspace" >"$dir/ws/hello.txt"
chown 10000:10000 "$dir/ws/hello.txt"
quiet tfw "$dir" list # the worker creates its directories; doctor never does

out="$tmp/doctor.out"
"$BIN" --config "$dir/config.json" doctor >"$out" 2>&1; rc=$?
# This machine may have no group entry for the test's gid 10000: that line only says so.
check "doctor with the old runsc on ptrace: no ✗ line but container_gid's" \
        sh -c "! grep '^✗' '$out' | grep -qv '^✗ container_gid:'"
check "doctor: exit 0, or 1 for the group entry alone (got $rc)" \
        sh -c "[ $rc = 0 ] || { [ $rc = 1 ] && grep -q '^✗ container_gid:' '$out'; }"
for c in platform probe_uid_gid probe_capabilities probe_no_new_privs probe_network probe_readonly_root \
        probe_readonly_snapshot probe_tmpfs_limit probe_pids_limit probe_memory_limit; do
        check "doctor: ✓ $c" grep -q "^✓ $c: " "$out"
done
check "doctor: the old runsc has no systrap" grep -q "^· platform_systrap: does not work here" "$out"
grep -v '^✓' "$out"

start_daemon "$dir" || exit 1
submit "$dir" old1 local-reversible '["sh","-c","cat hello.txt; echo uid=$(id -u); echo w >/work/written && echo wrote"]'
check "old1 published" wait_result "$dir" old1
check "old1 succeeded" [ "$(result_field "$dir" old1 status)" = succeeded ]
check "old1 saw the snapshot as the controller's uid" \
        sh -c "grep -q 'old runsc workspace' '$dir/results/old1/job.log' && grep -q 'uid=10000' '$dir/results/old1/job.log'"
check "old1 ran on a generation bound at /work (its layer, mounted by init, holds the job's writes)" \
        sh -c "grep -q \"job 'old1': generation \" '$dir/daemon.log' && grep -qx wrote '$dir/results/old1/job.log'"
check "old1 names the old runtime and ptrace" \
        [ "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runtime"]; print(r["platform"], "20221219" in r["version"])' "$dir/results/old1/result.json")" = "ptrace True" ]
stop_daemon
finish
