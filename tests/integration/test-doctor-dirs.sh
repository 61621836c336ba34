#!/usr/bin/env bash
# `doctor` on a new setup (issue 14 item 4): before the first start the state and results
# directories do not exist, and that is not a failure: each is ✓ "will be created" with the
# owner and mode the worker will give it, doctor exits 0 on that correct config and creates
# nothing. Only what the worker would refuse is ✗: a wrong mode or owner, a symlink (also a
# dangling one), a file where the directory should be. Root, real runsc (doctor's probe).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built"; exit 1; }

tmp=$(test_dir i14-doctor-dirs)
chmod 0755 "$tmp"
trap 'remove_cgroup_group "tentaflake-worker-$(worker_name "$tmp")"; rm -rf "$tmp"' EXIT
gid=100 # a group with an entry (users), for the container_gid check
mkdir -p "$tmp/ws" && chown 10000:$gid "$tmp/ws"
cat >"$tmp/config.json" <<JSON
{"version": 1, "name": "$(unique_name i14- "$tmp")", "workspace": "$tmp/ws", "container_uid": 10000,
 "container_gid": $gid, "state_dir": "$tmp/new/state", "results_dir": "$tmp/new/run/results"}
JSON
out=$tmp/out
doctor() { "$BIN" --config "$tmp/config.json" doctor >"$out" 2>&1; rc=$?; }
has() { grep -q -- "$1" "$out" || { echo "  missing line /$1/ in:"; sed 's/^/    /' "$out"; return 1; }; }
only_failure() { # only_failure CHECK: exactly one ✗ line, the named check
        [ "$(grep -c '^✗' "$out")" -eq 1 ] && grep -q "^✗ $1: " "$out" ||
                { echo "  expected only ✗ $1 in:"; sed 's/^/    /' "$out"; return 1; }
}

# 1. Nothing exists yet (not even the parents).
doctor
check "new setup: exit 0 (was $rc)" test "$rc" -eq 0
check "new setup: ✓ state_dir will be created, root 0700" \
        has "^✓ state_dir: '$tmp/new/state' does not exist yet: it will be created, root 0700$"
check "new setup: ✓ results_dir will be created, root:$gid 02750" \
        has "^✓ results_dir: '$tmp/new/run/results' does not exist yet: it will be created, root:$gid 02750$"
check "new setup: no ✗ line" bash -c "! grep -q '^✗' '$out'"
check "doctor created nothing" test ! -e "$tmp/new"

# 2. What the worker then makes passes as it is.
quiet tfw "$tmp" list
doctor
check "after the first start: ✓ state_dir is root:root 0700" has "^✓ state_dir: '$tmp/new/state' is root:root mode 0700$"
check "after the first start: ✓ results_dir" has "^✓ results_dir: '$tmp/new/run/results' is root:$gid mode 2750$"
check "after the first start: exit 0 (was $rc)" test "$rc" -eq 0

# 3. Only a wrong directory is ✗.
chmod 0755 "$tmp/new/state"
doctor
check "state_dir mode 0755: ✗, exit 1 (rc $rc)" test "$rc" -eq 1
check "  ... naming the mode" has "^✗ state_dir: .*with mode 0755; it must be 0:0 with mode 0700"
check "  ... the only failure" only_failure state_dir
chmod 0700 "$tmp/new/state"

chown 10000 "$tmp/new/run/results"
doctor
check "results_dir owned by the controller: ✗ (rc $rc)" test "$rc" -eq 1
check "  ... naming the owner" has "^✗ results_dir: .*is owned by 10000:$gid"
check "  ... the only failure" only_failure results_dir
chown 0 "$tmp/new/run/results"; chmod 02750 "$tmp/new/run/results"

mv "$tmp/new/state" "$tmp/real-state"
ln -s "$tmp/real-state" "$tmp/new/state"
doctor
check "state_dir a symlink to a good directory: ✗ (rc $rc)" test "$rc" -eq 1
check "  ... symlinks are refused" has "^✗ state_dir: .*symlinks are refused"
rm "$tmp/new/state"
ln -s "$tmp/nowhere" "$tmp/new/state"
doctor
check "state_dir a dangling symlink: ✗, not 'will be created' (rc $rc)" test "$rc" -eq 1
check "  ... symlinks are refused" has "^✗ state_dir: .*symlinks are refused"
rm "$tmp/new/state"
mv "$tmp/real-state" "$tmp/new/state"

mv "$tmp/new/run/results" "$tmp/real-results"
echo not a directory >"$tmp/new/run/results"
doctor
check "results_dir a regular file: ✗ (rc $rc)" test "$rc" -eq 1
check "  ... the only failure" only_failure results_dir

finish
