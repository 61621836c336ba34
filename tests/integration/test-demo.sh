#!/usr/bin/env bash
# `make demo`, the README's first command (issue 47 item 1): scripts/demo, run twice in a row as
# a newcomer would, must exit 0 both times and leave nothing of its own behind: no mount at or
# below its directory (the generation store's tmpfs outlives the daemon on purpose, so the demo,
# which owns this scratch worker, must unmount it: before the fix each run exited 1 with
# "rm: cannot remove '.../state/store': Device or resource busy" and left one tmpfs mounted),
# and not the directory itself. Only the demo's own directory (its first line names it) is
# looked at: other workers and tests may mount beside it.
set -uo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
source tests/integration/lib.sh
require_runsc_worker

# mounts_below DIR: the mount points at or below DIR (mountinfo's fifth field).
mounts_below() { awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo; }
out=$(mktemp -d)
dirs=()
cleanup() { # what a failed run left: its mounts, then its directory
        local d m
        for d in "${dirs[@]}"; do
                mounts_below "$d" | sort -r | while read -r m; do umount -l "$m"; done
                rm -rf "$d"
        done
        rm -rf "$out"
}
trap cleanup EXIT

for run in 1 2; do
        BUILD=$BUILD scripts/demo >"$out/$run" 2>&1
        rc=$?
        dir=$(sed -n 's/^== tentaflake-worker .*: demo in \(\/run\/tentaflake-demo\.[A-Za-z0-9]*\)$/\1/p' "$out/$run")
        [ -n "$dir" ] && dirs+=("$dir")
        check "run $run: the demo names its directory" test -n "$dir"
        check "run $run: exit 0 (got $rc)" test "$rc" -eq 0
        [ "$rc" -eq 0 ] || sed 's/^/    /' "$out/$run"
        check "run $run: every result shown (build, deploy, wipe)" \
                test "$(grep -c "^-- result of '\(build\|deploy\|wipe\)'$" "$out/$run")" -eq 3
        check "run $run: the audit log verified" grep -q '^   audit verify: audit log intact' "$out/$run"
        check "run $run: nothing on stderr about a busy or left mount" \
                bash -c "! grep -qE 'busy|left mounted' '$out/$run'"
        left=$(mounts_below "${dir:-/nonexistent}")
        check "run $run: no mount left in its directory (${left:-none})" test -z "$left"
        check "run $run: its directory is removed" test -n "$dir" -a ! -e "${dir:-/nonexistent}"
done
finish
