#!/usr/bin/env bash
# Benchmark of the build cache (issue 20, docs/cache.md), through the real daemon (runsc
# driver, concurrency 1, capsules started ahead, cache.paths ["build"]):
#   1. this project's `make -j2 build/tentaflake-worker` after one .c file changed, request to
#      result, against the same natively in a copy of the same tree     target <= 2.5
#   2. the cache's hand-out and take-in for a 500 MB build/ with 1 file changed  (report)
# BENCH_RUNS (default 3) alternating runs, medians. Prints every number; never fails because a
# target is missed (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-3}
BIN=$BUILD/tentaflake-worker
for f in "$BIN" "$BUILD/tentaflake-capsule-init"; do
        [ -x "$f" ] || { echo "cache.sh: $f missing (make bench builds it)" >&2; exit 1; }
done
if [ "$(id -u)" -ne 0 ]; then
        echo "cache.sh: SKIP: the worker and runsc need root"
        exit 0
fi
command -v runsc >/dev/null || { echo "cache.sh: runsc missing" >&2; exit 1; }
BIN=$(realpath "$BIN")
PLATFORM=systrap
# Read whole: with pipefail, `grep -q` leaving early would fail runsc on SIGPIPE and pick ptrace.
case $(runsc flags 2>&1) in *systrap*) ;; *) PLATFORM=ptrace ;; esac # the platforms this runsc has

base=$(mktemp -d /var/lib/tfw-bench-cache.XXXXXX)
chmod 0755 "$base"
daemon=
cleanup() {
        if [ -n "$daemon" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
        local c r=/run/tentaflake-worker-bench-cache/runsc
        if [ -d "$r" ]; then
                for c in $(runsc --root "$r" list -quiet 2>/dev/null); do runsc --root "$r" delete -force "$c" >/dev/null 2>&1; done
        fi
        find /sys/fs/cgroup -maxdepth 5 -depth -type d -name '*bench-cache*' -exec rmdir {} + 2>/dev/null || true
        # The generation store outlives the daemon (docs/snapshot.md, "After a restart").
        awk -v b="$base/" '$1 == "tentaflake-store" && index($2, b) == 1 { print $2 }' /proc/self/mounts |
                while read -r m; do umount -l "$m" || true; done
        rm -rf /run/tentaflake-worker-bench-cache "$base"
}
trap cleanup EXIT

# The tree: this project's sources as committed, in the workspace and in a native copy.
mkdir -p "$base/ws" "$base/native"
git archive HEAD | tar -x -C "$base/ws"
git archive HEAD | tar -x -C "$base/native"
chown -R 12345:12345 "$base/ws"
EDIT=common/log.c
touch_edit() { # touch_edit DIR: one line of one .c file changed
        printf '/* edit %s */\n' "$(date +%s%N)" >>"$1/$EDIT"
}

cat >"$base/config.json" <<JSON
{"version": 1, "name": "bench-cache", "workspace": "$base/ws",
 "container_uid": 12345, "container_gid": 12345, "concurrency": 1,
 "state_dir": "$base/state", "results_dir": "$base/results",
 "runtime": {"platform": "$PLATFORM", "warm_seconds": 600},
 "cache": {"paths": ["build"], "max_bytes": "1g", "max_entries": 100000},
 "limits": {"memory": "4g", "memory_swap": "4g", "max_log_bytes": "4m", "default_timeout_seconds": 1200,
            "max_timeout_seconds": 1200}}
JSON
"$BIN" --config "$base/config.json" run 2>"$base/daemon.log" &
daemon=$!
for _ in $(seq 600); do grep -qs ": watching '" "$base/daemon.log" && break; sleep 0.05; done
grep -q ": watching '" "$base/daemon.log" || { cat "$base/daemon.log"; echo "cache.sh: the daemon did not start" >&2; exit 1; }
inbox=$base/ws/.tentaflake-worker/inbox
n=0
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# worker_run ARGV_JSON: one request until its result.json; prints ms. Its id is $base/last.
worker_run() {
        # The count lives in a file: worker_run runs in $(...) subshells too.
        n=$(($(cat "$base/n" 2>/dev/null || echo 0) + 1))
        echo "$n" >"$base/n"
        local id=b$n t0 t1
        echo "$id" >"$base/last"
        printf '{"version":1,"id":"%s","action_class":"local-reversible","argv":%s}' "$id" "$1" >"$inbox/.$id"
        t0=$(now_ms)
        mv "$inbox/.$id" "$inbox/$id.json"
        while [ ! -e "$base/results/$id/result.json" ]; do sleep 0.005; done
        t1=$(now_ms)
        grep -q '"status": *"succeeded"' "$base/results/$id/result.json" || {
                echo "cache.sh: request $id did not succeed:" >&2; cat "$base/results/$id/result.json" >&2; tail -20 "$base/results/$id/job.log" >&2; exit 1; }
        echo $((t1 - t0))
}
cache_of() { # cache_of FIELD: the last request's result.json cache.FIELD
        python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cache"][sys.argv[2]])' "$base/results/$(cat "$base/last")/result.json" "$1"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

MAKE_JOB='["make","-j2","build/tentaflake-worker"]'
# 1. The loop: from scratch once each, then one .c file changed each time.
t0=$(now_ms); (cd "$base/native" && make -j2 build/tentaflake-worker >/dev/null 2>&1); t1=$(now_ms)
echo "natively from scratch: $((t1 - t0)) ms"
echo "through the worker from scratch: $(worker_run "$MAKE_JOB") ms (cache left: $(cache_of entries) entries, $(cache_of bytes) bytes)"
# The capsule started ahead for the next job runs on the other lane: one more, not counted.
as_ws() { setpriv --reuid 12345 --regid 12345 --clear-groups "$@"; }
as_ws sh -c "$(declare -f touch_edit); EDIT=$EDIT; touch_edit '$base/ws'"
worker_run "$MAKE_JOB" >/dev/null
w=() nat=() ho=() ti=()
for _ in $(seq "$RUNS"); do
        touch_edit "$base/native"
        t0=$(now_ms); (cd "$base/native" && make -j2 build/tentaflake-worker >/dev/null 2>&1); t1=$(now_ms)
        nat+=($((t1 - t0)))
        as_ws sh -c "$(declare -f touch_edit); EDIT=$EDIT; touch_edit '$base/ws'"
        w+=("$(worker_run "$MAKE_JOB")")
        ho+=("$(cache_of hand_out_ms)") ti+=("$(cache_of take_in_ms)")
done
mw=$(printf '%s\n' "${w[@]}" | median)
mn=$(printf '%s\n' "${nat[@]}" | median)
echo "make -j2 build/tentaflake-worker after 1 .c changed: worker ${w[*]} ms (median $mw), natively ${nat[*]} ms (median $mn): ratio $(python3 -c "print(round($mw / max($mn, 1), 2))") (target 2.5)"
echo "  of which the cache's hand-out ${ho[*]} ms, take-in ${ti[*]} ms"
grep -c "^cc .*-c " "$base/results/$(cat "$base/last")/job.log" | sed 's/^/  files compiled by the last run: /'

# 2. A 500 MB build/: 2,000 files of 250 KB; then one of them changed.
BIG='["sh","-c","rm -rf build/big && mkdir -p build/big && cd build/big && head -c 512000000 /dev/urandom | split -b 256000 -a 4 - f"]'
echo "a 500 MB build/ made in a job: $(worker_run "$BIG") ms (take-in $(cache_of take_in_ms) ms: $(cache_of entries) entries, $(cache_of bytes) bytes)"
ONE='["sh","-c","head -c 256000 /dev/urandom >build/big/faaah"]'
worker_run "$ONE" >/dev/null
r=() ho=() ti=()
for _ in $(seq "$RUNS"); do
        r+=("$(worker_run "$ONE")")
        ho+=("$(cache_of hand_out_ms)") ti+=("$(cache_of take_in_ms)")
done
echo "1 file of a 500 MB build/ changed: request ${r[*]} ms (median $(printf '%s\n' "${r[@]}" | median)), hand-out ${ho[*]} ms, take-in ${ti[*]} ms"
TRUE='["/bin/true"]'
r=()
for _ in $(seq "$RUNS"); do r+=("$(worker_run "$TRUE")"); done
echo "/bin/true with that cache (hand-out and take-in, nothing changed): request ${r[*]} ms (median $(printf '%s\n' "${r[@]}" | median)), hand-out $(cache_of hand_out_ms) ms, take-in $(cache_of take_in_ms) ms"
