#!/usr/bin/env bash
# The generation store and the build cache outlive the worker's process (issue 36, item 2;
# docs/snapshot.md, "After a restart"; threat 22), with the real daemon and runsc:
#   - the store is a tmpfs of its own at state_dir/store, root's (0700), still mounted after the
#     daemon stopped; a restarted daemon's first request walks the workspace against the lane's
#     index (every file kept, none copied) and the next job finds the cache as it was left;
#   - a lane whose tree was changed after it was sealed (same size, other bytes), whose seal is
#     missing, or whose index is not the one sealed, is emptied and said: the next job sees the
#     workspace's true bytes;
#   - a cache version whose data is not what its meta says is dropped (the next job starts
#     from the empty cache, never the damaged one); half-made take-ins and trash are removed;
#   - a store made for another configuration is emptied whole and resized.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-store)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir"' EXIT
ws=$dir/ws
res=$dir/results
store=$dir/state/store

LIST='cd /work && find . -path ./.tentaflake-worker -prune -o -path ./cache -prune -o -type f -print0 | sort -z | xargs -0 -r sha256sum'
host_list() { (cd "$ws" && find . -path ./.tentaflake-worker -prune -o -path ./cache -prune -o -type f -print0 | sort -z | xargs -0 -r sha256sum); }
run_list() {
        submit "$dir" "$1" local-reversible "[\"sh\",\"-c\",\"$LIST\"]"
        wait_result "$dir" "$1" || return 1
        [ "$(result_field "$dir" "$1" status)" = succeeded ] || { cat "$res/$1/job.log"; return 1; }
        if ! diff <(host_list) "$res/$1/job.log" >"$dir/diff.out"; then
                echo "job $1 saw another tree than the workspace:"; head -20 "$dir/diff.out"; return 1
        fi
}
run_job() { # run_job ID ARGV_JSON
        submit "$dir" "$1" local-reversible "$2"
        wait_result "$dir" "$1" || return 1
        [ "$(result_field "$dir" "$1" status)" = succeeded ] || { cat "$res/$1/job.log"; return 1; }
}
as_ctl() { setpriv --reuid 10000 --regid 10000 --clear-groups "$@"; }
# said_since MARK TEXT: the daemon's log, after its first MARK lines, has a line with TEXT
said_since() { tail -n +"$(($1 + 1))" "$dir/daemon.log" | grep -qF -- "$2"; }
mark() { wc -l <"$dir/daemon.log"; }
all_kept() { # all_kept ID: its walk kept every file of the lane's generation (a walk, no copy)
        grep -E "job '$1': generation " "$dir/daemon.log" | grep -qE 'kept ([0-9]+) of \1 files'
}
restart() { stop_daemon || true; "$@"; start_daemon "$dir"; }

config() { # config MAX_STORE_BYTES
        new_worker "$dir" ", \"runtime\": {\"warm_seconds\": 0}, \"limits\": {\"workspace_tmpfs\": \"16m\", \"max_snapshot_bytes\": \"16m\", \"max_store_bytes\": \"$1\"},
 \"cache\": {\"paths\": [\"cache\"], \"max_bytes\": \"16m\", \"max_entries\": 1000}"
}
config 256m
as_ctl sh -c "cd '$ws' && mkdir -p src/lib docs && printf 'int main;\n' >src/main.c && printf lib >src/lib/a.c &&
        printf docs >docs/README && seq 1 20000 >big.txt"
sleep 1.2 # past the racy window (gen-index.h)
start_daemon "$dir" || exit 1
check "the first job sees the workspace" run_list a1
check "a job leaves something in the cache" run_job a2 '["sh","-c","mkdir -p cache && echo kept-v1 >cache/x && echo ok"]'

echo "-- a restart"
stop_daemon || true
check "the store outlives the daemon" mountpoint -q "$store"
check "... a tmpfs" test "$(stat -f -c %T "$store")" = tmpfs
check "... root's alone" test "$(stat -c '%u %a' "$store")" = "0 700"
check "... its lane sealed when released" test -s "$store/lane-0/seal"
check "... no read-only mount of a lane in the host's namespace" sh -c "! grep -q ' $store/lane-' /proc/self/mountinfo"
m=$(mark)
start_daemon "$dir" || exit 1
check "nothing of the store was dropped" sh -c "! tail -n +$((m + 1)) '$dir/daemon.log' | grep -q 'generation store:'"
check "the first job after the restart sees the workspace" run_list a3
check "... by a walk against the lane's index: every file kept, none copied" all_kept a3
check "the lane was walked at start, with the new watch, before any request" \
        said_since "$m" "at start: lane-0 of the generation store walked ahead: "
check "... so the first job's walk is on the watch's word, not a full one" \
        sh -c "grep -E \"job 'a3': generation \" '$dir/daemon.log' | grep -q \"unchanged by the watch's word\""
check "the next job finds the cache as it was left" run_job a4 '["cat","cache/x"]'
check "... kept-v1" grep -qx kept-v1 "$res/a4/job.log"

echo "-- a lane's tree changed between stop and start (same size, other bytes)"
m=$(mark)
restart printf BAD >"$store/lane-0/tree/src/lib/a.c"
check "the lane is emptied, naming the file" said_since "$m" "generation store: lane-0: 'src/lib/a.c' changed after the store's last seal; emptied"
check "the next job sees the workspace's true bytes" run_list a5

echo "-- a lane without its seal (its user did not release it)"
m=$(mark)
restart rm -f "$store/lane-0/seal"
check "the lane is emptied" said_since "$m" "generation store: lane-0: it has no seal"
check "the next job sees the workspace" run_list a6

echo "-- a lane whose index is not the one sealed"
m=$(mark)
restart sh -c "cp '$store/lane-0/index' '$store/lane-0/i2' && mv '$store/lane-0/i2' '$store/lane-0/index'"
check "the lane is emptied" said_since "$m" "generation store: lane-0: its index or tree is not the one it was sealed with; emptied"
check "the next job sees the workspace" run_list a7

echo "-- a lane with an entry the index lacks, its index gone"
m=$(mark)
restart sh -c "echo extra >'$store/lane-0/tree/extra' && rm '$store/lane-0/index'"
check "the lane is emptied" said_since "$m" "generation store: lane-0: it has no index: its generation was half-written; emptied"
check "the next job sees the workspace" run_list a8

echo "-- a cache version damaged, a take-in half-made, trash left"
cur=$(cat "$store/cache/current")
m=$(mark)
restart sh -c "echo tampered >>'$store/cache/v/$cur/data/0/x' && mkdir '$store/cache/new-zz' '$store/cache/trash-77'"
check "the cache version is dropped" said_since "$m" "generation store: cache version $cur: its data is not what its meta describes"
check "the half-made take-in is removed" said_since "$m" "generation store: cache/new-zz: a take-in half-made: removed"
check "... and the trash" test ! -e "$store/cache/trash-77"
check "the next job starts from the empty cache, not the damaged one" run_job a9 '["sh","-c","cat cache/x 2>/dev/null || echo none"]'
check "... none" grep -qx none "$res/a9/job.log"

echo "-- another configuration"
m=$(mark)
restart config 200m
check "the whole store is emptied" said_since "$m" "generation store: the whole store: it was made for another configuration (bytes differs): emptied"
check "... and resized" python3 -c "import os,sys; s=os.statvfs(sys.argv[1]); t=s.f_blocks*s.f_frsize; assert 200<<20 < t < 280<<20, t" "$store"
check "the next job sees the workspace" run_list a10
stop_daemon || true
finish
