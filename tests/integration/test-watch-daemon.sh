#!/usr/bin/env bash
# The workspace's watch under the real daemon and runsc (issue 33 findings 1, 2 and 3; threat 17),
# with the file system's mark where the workspace's file system takes one (issue 51):
#   - finding 1 as reproduced: a file read by several jobs, then hard-linked from the control
#     directory (excluded, never watched) and written through that link: every later job, an
#     approved irreversible one too, prints the new bytes;
#   - finding 2 as reproduced: the controller maps a file shared and writable, closes the
#     descriptor, a job runs (the file is kept: nothing was written yet), then it writes
#     through the mapping: the next job prints the new bytes;
#   - a directory removed and made again with the same inode number (its watch gone with the
#     old one), a file put in it: the next jobs print it;
#   - finding 3: a workspace with more directories than the watch's budget
#     (limits.max_watches): the job runs and sees the workspace, the daemon holds no more
#     watches than the budget (its own inotify instances, read from /proc/PID/fdinfo), says so
#     once with the figures, doctor shows them, a second worker starts and runs a job, and root
#     can still add a watch;
#   - a limits.max_watches above a quarter of the host's fs.inotify.max_user_watches is clamped
#     there, and the daemon says so.
# Every wait is a bounded harness timeout on an event (a file, a log line), never a timing
# assertion.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-watch)
dir2=$(test_dir tfw-it-watch2)
chmod 0755 "$dir" "$dir2"
MAPPER_PID= DAEMON2_PID=
cleanup() {
        [ -z "$MAPPER_PID" ] && [ -s "$dir/marks/pid" ] && MAPPER_PID=$(cat "$dir/marks/pid")
        [ -n "$MAPPER_PID" ] && kill "$MAPPER_PID" 2>/dev/null
        if [ -n "$DAEMON2_PID" ]; then
                kill -KILL "$DAEMON2_PID" 2>/dev/null
                wait "$DAEMON2_PID" 2>/dev/null
        fi
        local keep=$TFW_DAEMON_PID
        TFW_DAEMON_PID=
        worker_cleanup "$dir2"
        TFW_DAEMON_PID=$keep
        worker_cleanup "$dir"
}
trap cleanup EXIT
ws=$dir/ws
res=$dir/results
as_ctl() { setpriv --reuid 10000 --regid 10000 --clear-groups "$@"; }

# run_cat ID FILE [CLASS]: a job printing FILE; its log on stdout.
run_cat() {
        submit "$dir" "$1" "${3:-local-reversible}" "[\"cat\",\"$2\"]"
        if [ "${3:-local-reversible}" != local-reversible ]; then
                wait_state "$dir" "$1" pending || return 1
                local h
                h=$(tfw "$dir" show "$1" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["record"]["request_sha256"])')
                tfw "$dir" approve "$1" --expect-sha256 "$h" >/dev/null || return 1
        fi
        wait_result "$dir" "$1" || return 1
        [ "$(result_field "$dir" "$1" status)" = succeeded ] || { cat "$res/$1/job.log"; return 1; }
        cat "$res/$1/job.log"
}
prints() { [ "$(run_cat "$1" "$2" "${4:-}")" = "$3" ]; } # prints ID FILE WANT [CLASS]

echo "-- [$SECONDS s] finding 1: a hard link made after the walk, in the control directory"
new_worker "$dir" ', "runtime": {"warm_seconds": 30}'
as_ctl sh -c "cd '$ws' && mkdir -p d e r/empty && printf ORIGINAL-CONTENT >d/f && printf ORIGINAL-MAPPED >e/g && seq 1 100 >e/h"
sleep 1.2 # past the racy window (gen-index.h): the walks may keep what they read
start_daemon "$dir" || exit 1
for i in 1 2 3 4; do check "job $i prints the original" prints "link$i" d/f ORIGINAL-CONTENT; done
check "the walks kept d/f unread (the watch's word)" grep -q "job 'link4': generation .*entries unchanged by the watch's word" "$dir/daemon.log"
if [ "$(stat -f -c %T "$ws")" = ext2/ext3 ]; then
        # The file system's mark (snapshot/fan-mark.h): placed, and the walks asked only what it
        # reported; the findings below are still seen through it.
        check "the daemon marked the workspace's file system" grep -q "the workspace's file system is marked" "$dir/daemon.log"
        check "job 4's walk asked only what the mark reported" grep -q "job 'link4': generation .*asked by stat: the ones the file system's mark reported" "$dir/daemon.log"
fi
as_ctl sh -c "mkdir -p '$ws/.tentaflake-worker/x' && ln '$ws/d/f' '$ws/.tentaflake-worker/x/f'"
check "a job after the link still prints the original" prints link5 d/f ORIGINAL-CONTENT
as_ctl sh -c "printf EVIL-NEW-CONTENT >'$ws/.tentaflake-worker/x/f'"
check "(the workspace holds the new bytes)" test "$(cat "$ws/d/f")" = EVIL-NEW-CONTENT
for i in 6 7 8; do check "job $i prints the bytes written through the link" prints "link$i" d/f EVIL-NEW-CONTENT; done
check "an approved irreversible job prints them too" prints link9 d/f EVIL-NEW-CONTENT irreversible

echo "-- [$SECONDS s] finding 2: a shared writable mapping kept after its descriptor"
marks=$dir/marks # the controller's helper leaves its marks here
mkdir -p "$marks" && chown 10000:10000 "$marks"
as_ctl /usr/bin/python3 - "$ws/e/g" "$marks" <<'PY' &
import mmap, os, sys, time
path, d = sys.argv[1], sys.argv[2]
open(os.path.join(d, "pid"), "w").write(str(os.getpid()))
fd = os.open(path, os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
os.close(fd)
open(os.path.join(d, "mapped"), "w").close()
while not os.path.exists(os.path.join(d, "go")):
    time.sleep(0.05)
m[:15] = b"WRITTEN-THROUGH"
open(os.path.join(d, "written"), "w").close()
while True:
    time.sleep(60)
PY
check "the controller mapped e/g" wait_file "$marks/mapped" 30
MAPPER_PID=$(cat "$marks/pid") # the helper itself, not the shell that started it
check "a job after the mapping prints the original" prints map1 e/g ORIGINAL-MAPPED
check "and the next" prints map2 e/g ORIGINAL-MAPPED
touch "$marks/go"
check "the controller wrote through the mapping" wait_file "$marks/written" 30
check "(the workspace holds the new bytes)" test "$(cat "$ws/e/g")" = WRITTEN-THROUGH
check "the next job prints the bytes written through the mapping" prints map3 e/g WRITTEN-THROUGH
check "and the one after" prints map4 e/g WRITTEN-THROUGH
kill "$MAPPER_PID" 2>/dev/null
MAPPER_PID=

echo "-- [$SECONDS s] a directory removed and made again with the same inode number"
# Its watch goes with the old one (IN_IGNORED: no stamp left); the new one, its parent listed,
# must not be taken for the old one and its entries from the index.
check "a job after them (r/empty in its generation)" prints reuse1 d/f EVIL-NEW-CONTENT
check "the controller makes r/empty again with its inode number, and a file in it" as_ctl /usr/bin/python3 - "$ws/r" <<'PY'
import os, sys
r = sys.argv[1]
d = os.path.join(r, "empty")
ino = os.stat(d).st_ino
os.rmdir(d)
made = []
for i in range(20000):
    c = os.path.join(r, "cand%d" % i)
    os.mkdir(c)
    if os.stat(c).st_ino == ino:
        os.rename(c, d)
        break
    made.append(c)
else:
    sys.exit(3)
for c in made:
    os.rmdir(c)
open(os.path.join(d, "new"), "w").write("IN-THE-NEW-DIRECTORY")
PY
sleep 1.2 # past the racy window: nothing but the check keeps the new directory from being taken
check "the next job prints the new directory's file" prints reuse2 r/empty/new IN-THE-NEW-DIRECTORY
check "and the one after" prints reuse3 r/empty/new IN-THE-NEW-DIRECTORY
stop_daemon

echo "-- [$SECONDS s] finding 3: more directories than the watch's budget"
# The daemon's inotify watches, every instance of it (its inbox's and the workspace's).
daemon_watches() {
        local n=0 f
        for f in /proc/"$1"/fdinfo/*; do
                n=$((n + $(grep -c '^inotify wd:' "$f" 2>/dev/null || true)))
        done
        echo "$n"
}
new_worker "$dir" ', "limits": {"max_watches": 300}, "runtime": {"warm_seconds": 30}'
rm -rf "${ws:?}"/* "$ws/.tentaflake-worker"
as_ctl /usr/bin/python3 -c "
import os, sys
for i in range(1200):
    p = os.path.join(sys.argv[1], 'tree', 'd%02d' % (i % 40), 'e%04d' % i)
    os.makedirs(p)
    if i % 100 == 0:
        open(os.path.join(p, 'f'), 'w').write('file %d\n' % i)
" "$ws"
: >"$dir/daemon.log"
start_daemon "$dir" || exit 1
for i in 1 2 3; do
        check "job $i runs and sees the workspace" prints "many$i" tree/d00/e0000/f "file 0"
        check "the daemon holds at most the budget's watches (300, and its inbox's)" \
                test "$(daemon_watches "$TFW_DAEMON_PID")" -le 303
done
check "it holds the budget's watches, not fewer" test "$(daemon_watches "$TFW_DAEMON_PID")" -ge 300
check "it said once that the workspace has more directories than its watch may hold" \
        test "$(grep -c "more directories (1242) than its watch may hold (300 inotify watches: limits.max_watches 300" "$dir/daemon.log")" = 1
as_ctl sh -c "printf changed >'$ws/tree/d39/e1199/new'"
check "a change in a directory past the budget is seen" prints many4 tree/d39/e1199/new changed
check "doctor shows the budget and the directories past it" \
        grep -Eq "workspace_watch: 30[0-3] of at most 300 inotify watches held .*the last walk found 1242 directories: 942 past the budget" \
        <<<"$(tfw "$dir" doctor 2>&1)"
# A second worker beside it, on the same host.
new_worker "$dir2" ', "runtime": {"warm_seconds": 0}'
chown 10000:10000 "$dir2/ws"
as_ctl sh -c "printf second >'$dir2/ws/s'"
"$BIN" --config "$dir2/config.json" run >>"$dir2/daemon.log" 2>&1 &
DAEMON2_PID=$!
check "a second worker starts" wait_for 60 grep -q ": watching '" "$dir2/daemon.log"
submit "$dir2" second local-reversible '["cat","s"]'
check "and runs a job" wait_result "$dir2" second
check "  ... that sees its workspace" test "$(cat "$dir2/results/second/job.log" 2>/dev/null)" = second
check "root can still add an inotify watch" python3 -c "
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
sys.exit(0 if fd >= 0 and libc.inotify_add_watch(fd, b'$dir2', 2) > 0 else 1)"
kill -TERM "$DAEMON2_PID"
wait "$DAEMON2_PID"
DAEMON2_PID=
stop_daemon

echo "-- [$SECONDS s] a budget above a quarter of the host's watches is clamped"
host=$(cat /proc/sys/fs/inotify/max_user_watches)
new_worker "$dir" ', "limits": {"max_watches": 1048576}, "runtime": {"warm_seconds": 0}'
: >"$dir/daemon.log"
if [ "$host" -lt 4194304 ]; then
        start_daemon "$dir" || exit 1
        check "the daemon says the budget is a quarter of the host's" \
                grep -q "holds at most $((host / 4)) inotify watches: limits.max_watches is 1048576, but never more than a quarter of the host's fs.inotify.max_user_watches ($host)" "$dir/daemon.log"
        stop_daemon
else
        echo "(the host has $host watches: a quarter is above the key's maximum, nothing to clamp)"
fi
finish
