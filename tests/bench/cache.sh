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
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_worker
bench_platform

bench_base cache
daemon=
trap 'bench_cleanup bench-cache' EXIT

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
bench_start_daemon "$BIN" "$base/config.json" "$base/daemon.log"
inbox=$base/ws/.tentaflake-worker/inbox
n=0
# worker_run ARGV_JSON: one request until its result.json; prints ms. Its id is $base/last.
worker_run() {
        bench_next_n
        local id=b$n
        echo "$id" >"$base/last"
        bench_write_request "$inbox" "$id" "$1"
        bench_request "$inbox" "$base/results" "$id"
        echo "$REQ_MS"
}

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
echo "make -j2 build/tentaflake-worker after 1 .c changed: worker ${w[*]} ms (median $mw), natively ${nat[*]} ms (median $mn): ratio $(ratio "$mw" "$mn") (target 2.5)"
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
