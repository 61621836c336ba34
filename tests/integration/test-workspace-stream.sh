#!/usr/bin/env bash
# The workspace streamed into the capsule (issue 12 item 2; contract section 6 step 1; threat 1),
# end to end with the real daemon and runsc: what the job sees in /work is exactly the
# workspace (every byte, the exec bits, empty directories; no symlink, no control directory),
# the result names git's tree id of it, and a walk that refuses the workspace (a FIFO, a ceiling)
# gives `rejected` with the job never started.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v git >/dev/null || { echo "SKIP: git is not installed"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=$(test_dir tfw-it-i12stream)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir"' EXIT
new_worker "$dir" ', "limits": {"max_snapshot_bytes": "4m", "max_snapshot_entries": 5000}'
ws=$dir/ws res=$dir/results

# A workspace: 2,000 small files in 40 directories, one file larger than every buffer on the
# way (1.5 MB), an executable, an empty directory, a symlink to a host file.
python3 - "$ws" <<'PY'
import os, random, sys
ws = sys.argv[1]
rnd = random.Random(12)
for d in range(40):
    p = os.path.join(ws, "src", "d%02d" % d)
    os.makedirs(p)
    for f in range(50):
        with open(os.path.join(p, "f%02d.txt" % f), "wb") as fh:
            fh.write(bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 700))))
with open(os.path.join(ws, "big.bin"), "wb") as fh:
    fh.write(bytes(rnd.getrandbits(8) for _ in range(1536 * 1024)))
with open(os.path.join(ws, "run.sh"), "w") as fh:
    fh.write("#!/bin/sh\necho hi\n")
os.chmod(os.path.join(ws, "run.sh"), 0o755)
os.makedirs(os.path.join(ws, "empty", "nested"))
os.symlink("/etc/hostname", os.path.join(ws, "link"))
PY
chown -R 10000:10000 "$ws"

start_daemon "$dir" || exit 1
inbox=$ws/.tentaflake-worker/inbox

# What the host sees, computed the way the job computes it.
digest_of() { (cd "$1" && find . -path ./.tentaflake-worker -prune -o -path ./artifacts -prune -o -type f -print | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum | cut -d' ' -f1); }
want=$(digest_of "$ws")
cp -a "$ws" "$dir/gitcopy"
rm -rf "$dir/gitcopy/.tentaflake-worker" "$dir/gitcopy/link"
git init -q --bare --object-format=sha256 "$dir/git"
git --git-dir="$dir/git" --work-tree="$dir/gitcopy" add -A -f
want_tree=$(git --git-dir="$dir/git" --work-tree="$dir/gitcopy" write-tree)

echo "-- [$SECONDS s] the job sees the workspace in /work"
submit "$dir" s1 local-reversible \
        '["sh","-c","cd /work && echo digest=$(find . -path ./artifacts -prune -o -type f -print | LC_ALL=C sort | xargs -d \"\\n\" sha256sum | sha256sum | cut -d\" \" -f1); test -x run.sh && echo exec=yes; test -d empty/nested && echo empty=yes; test -e link || test -L link || echo nolink=yes; test -e .tentaflake-worker || echo nocontrol=yes; echo files=$(find . -type f | wc -l)"]'
check "s1 published" wait_result "$dir" s1
check "s1 succeeded" test "$(result_field "$dir" s1 status)" = succeeded
check "every byte of the workspace is in /work" grep -qx "digest=$want" "$res/s1/job.log"
check "the exec bit is kept" grep -qx "exec=yes" "$res/s1/job.log"
check "an empty directory is there" grep -qx "empty=yes" "$res/s1/job.log"
check "the symlink is not" grep -qx "nolink=yes" "$res/s1/job.log"
check "the control directory is not" grep -qx "nocontrol=yes" "$res/s1/job.log"
check "2,002 files" grep -qx "files=2002" "$res/s1/job.log"
check "the result names git's tree id of the workspace" \
        test "$(json_get "$res/s1/result.json" 'r["snapshot"]["tree"]')" = "$want_tree"
check "the snapshot looked at 2,046 entries" test "$(json_get "$res/s1/result.json" 'r["snapshot"]["entries"]')" = 2046
grep -q "digest=$want" "$res/s1/job.log" || { echo "job.log of s1:"; head -c 2000 "$res/s1/job.log"; }

echo "-- [$SECONDS s] a FIFO in the workspace: rejected, the job never starts"
mkfifo "$ws/src/d07/pipe"
submit "$dir" s2 local-reversible '["sh","-c","echo ran"]'
check "s2 published" wait_result "$dir" s2
check "s2 rejected" test "$(result_field "$dir" s2 status)" = rejected
check "s2 error snapshot_special_file" test "$(json_get "$res/s2/result.json" 'r["error"]')" = snapshot_special_file
check "the message names the FIFO" grep -q "src/d07/pipe" "$res/s2/result.json"
check "s2 ran nothing (an empty job.log)" test ! -s "$res/s2/job.log"
rm -f "$ws/src/d07/pipe"

echo "-- [$SECONDS s] over max_snapshot_bytes: rejected, the job never starts"
head -c 3000000 /dev/zero >"$ws/more.bin"
chown 10000:10000 "$ws/more.bin"
submit "$dir" s3 local-reversible '["sh","-c","echo ran"]'
check "s3 published" wait_result "$dir" s3
check "s3 rejected" test "$(result_field "$dir" s3 status)" = rejected
check "s3 error snapshot_too_large" test "$(json_get "$res/s3/result.json" 'r["error"]')" = snapshot_too_large
check "s3 ran nothing (an empty job.log)" test ! -s "$res/s3/job.log"
rm -f "$ws/more.bin"

echo "-- [$SECONDS s] nothing of the workspace was written under state_dir"
check "no snapshot directory in scratch" test -z "$(find "$dir/state" -name snapshot -o -name 'f0*.txt' | head -1)"
check "daemon alive" daemon_alive
stop_daemon
finish
