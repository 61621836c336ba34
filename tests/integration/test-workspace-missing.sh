#!/usr/bin/env bash
# A workspace that is missing, not a directory, or behind a symbolic link (issue 23 item 2):
# the worker refuses to start and says which, naming the workspace, instead of "cannot be
# opened without following a symlink: No such file or directory".
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=$(test_dir tfw-it-wsmiss)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir" >/dev/null 2>&1' EXIT
new_worker "$dir"
refused() { # refused PATTERN: drain exits 1 and says PATTERN
        local out rc
        out=$(timeout 60 "$BIN" --config "$dir/config.json" drain 2>&1); rc=$?
        [ "$rc" = 1 ] && grep -q -- "$1" <<<"$out" || { echo "exit $rc: $out"; return 1; }
}
rmdir "$dir/ws"
check "a missing workspace is named as missing" refused "workspace '$dir/ws' does not exist"
echo x >"$dir/ws"
check "a file is not a directory" refused "workspace '$dir/ws': it, or a directory on the way to it, is not a directory"
rm "$dir/ws"
mkdir "$dir/real"
ln -s real "$dir/ws"
check "a symbolic link is never followed" refused "workspace '$dir/ws' has a symbolic link on its path"
finish
