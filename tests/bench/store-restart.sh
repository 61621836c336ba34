#!/usr/bin/env bash
# Benchmark of the generation store across restarts (issue 36 item 2; docs/snapshot.md, "After
# a restart"), on generations.sh's tree (copies of /usr/share, /usr/include and /usr/lib/python3*,
# at least 80k entries) through the real daemon (runsc driver, concurrency 1, capsules started
# ahead), against generations.sh's reference: a bare `runsc run` with the tree bind-mounted
# read-only at /work. Medians of BENCH_RUNS (default 5); ratios measured in this one run:
#   1. the first request (/bin/true) after a restart of the worker ÷ bare      target <= 3.0
#      (sent at READY, and again once the capsule started at the restart waits)
#   2. the second request after a fresh start (an empty store: the other lane's first
#      generation, the first job's mirror taken while its capsule waits) ÷ bare target <= 3.0
#   and the first request after a fresh start (the generation made from nothing) target <= 3 s
#      (issue 51), against the figure before the copiers, with the copy's cost per entry and per
#      byte (bench_copy_cost)
#   3. a job that finds the dependency cache (an import-heavy python program whose modules are
#      in the cache, cache.paths ["deps"]) right after a restart ÷ the same job just before it
#      (both ways again)                                                       target <= 1.2
# and how long a restart takes (SIGTERM to READY, the store's check included).
# BENCH_BEFORE=PATH (optional): a worker built from the code before a change (its capsule init
# beside it, as in a build directory); each fresh start is then made with it too, alternating, so
# that the first request's figure before is measured in the same run, on the same load.
# Prints every number; never fails because a target is missed (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-5}
BIN=$BUILD/tentaflake-worker
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_worker "$BUILD/tests/bench/bench-gen-seed"
bench_platform
BEFORE=${BENCH_BEFORE:+$(realpath "$BENCH_BEFORE")}

bench_base restart
daemon=
trap 'bench_cleanup bench-restart "$base/bare-root"' EXIT

# generations.sh's tree.
bench_tree "$base/ws"
chown -R 12345:12345 "$base/ws"
echo "workspace: $(find "$base/ws" | wc -l) entries, $(du -sm "$base/ws" | cut -f1) MB; load $(cut -d' ' -f1-3 /proc/loadavg)"
# Past the racy window of the first walk (gen-index.h): files changed within it are not trusted
# by the next walk, and the first fresh start's second lane would copy the just-made tree again.
sleep 1.2
PY=$(basename "$(ls -d /usr/lib/python3.[0-9]* | head -1)")
IMPORTS="import json, email.mime.text, http.client, urllib.request, xml.etree.ElementTree, asyncio, unittest, logging.handlers, argparse, decimal, statistics, csv, tarfile, zipfile, shutil, tempfile, subprocess, threading, concurrent.futures, pickle, pprint, difflib, dataclasses, typing, inspect, ast, pydoc, doctest, http.server, configparser, calendar, zoneinfo, uuid, hashlib, pathlib, sysconfig"

# generations.sh's reference: the same runsc, the tree bind-mounted read-only at /work.
bench_bare_spec '["/bin/true"]'

cat >"$base/config.json" <<JSON
{"version": 1, "name": "bench-restart", "workspace": "$base/ws",
 "container_uid": 12345, "container_gid": 12345, "concurrency": 1,
 "state_dir": "$base/state", "results_dir": "$base/results",
 "runtime": {"platform": "$PLATFORM", "warm_seconds": 600},
 "limits": {"max_snapshot_bytes": "4g", "workspace_tmpfs": "4g", "max_store_bytes": "9g",
            "memory": "4g", "memory_swap": "4g"},
 "cache": {"paths": ["deps"], "max_bytes": "1g", "max_entries": 100000}}
JSON
START_MS=0
start() { # start [WORKER]: in this shell (its daemon is $daemon): START_MS, the ms from the start to READY
        local t0 n
        # The log made first: a count of a log not yet there is empty, which `[ -le ]` refuses,
        # ending the wait before READY (the requests then found no inbox, the daemon left running).
        touch "$base/daemon.log"
        n=$(grep -c ": watching '" "$base/daemon.log" || true)
        t0=$(now_ms)
        "${1:-$BIN}" --config "$base/config.json" run >/dev/null 2>>"$base/daemon.log" &
        daemon=$!
        while [ "$(grep -c ": watching '" "$base/daemon.log" 2>/dev/null || true)" -le "${n:-0}" ]; do
                kill -0 "$daemon" 2>/dev/null || { tail "$base/daemon.log"; echo "store-restart.sh: the daemon did not start" >&2; exit 1; }
                sleep 0.01
        done
        START_MS=$(($(now_ms) - t0))
}
inbox=$base/ws/.tentaflake-worker/inbox
worker_run() { # worker_run ARGV_JSON: prints ms from the rename into the inbox to result.json
        bench_next_n
        local id=r$n
        bench_write_request "$inbox" "$id" "$1"
        bench_request "$inbox" "$base/results" "$id"
        echo "$REQ_MS"
}
TRUE='["/bin/true"]'
DEPS="[\"env\",\"PYTHONPATH=/work/deps/$PY\",\"python3\",\"-c\",\"$IMPORTS\"]"

first=() second=() bare=() first_before=()
for i in $(seq "$RUNS"); do
        if [ -n "$BEFORE" ]; then
                bench_stop_daemon
                "$BEFORE" --config "$base/config.json" store remove >/dev/null
                start "$BEFORE"
                first_before+=("$(worker_run "$TRUE")")
        fi
        # A fresh start: the store removed (`store remove`), then two requests, each on a lane of
        # its own (the second on the lane of the capsule started ahead).
        bench_stop_daemon
        "$BIN" --config "$base/config.json" store remove >/dev/null
        start
        first+=("$(worker_run "$TRUE")")
        second+=("$(worker_run "$TRUE")")
        bare+=("$(bench_bare_ms)")
done
mb=$(printf '%s\n' "${bare[@]}" | median)
m1=$(printf '%s\n' "${first[@]}" | median)
m2=$(printf '%s\n' "${second[@]}" | median)
echo "bare runsc, /bin/true: ${bare[*]} ms (median $mb)"
# Before the copiers (588cdd4, one thread copying; BENCH_RUNS=3, load 4 to 11): 4558 4237 3803 ms, median 4237.
echo "fresh start, first request (a generation from nothing): ${first[*]} ms (median $m1): ratio $(ratio "$m1" "$mb");" \
        "target 3000 ms (before: 4237 ms); load $(load)"
[ -z "$BEFORE" ] || echo "fresh start, first request, BENCH_BEFORE's worker in the same run: ${first_before[*]} ms" \
        "(median $(printf '%s\n' "${first_before[@]}" | median)): after ÷ before $(ratio "$m1" "$(printf '%s\n' "${first_before[@]}" | median)")"
echo "fresh start, the first generations' walks (the daemon's log${BEFORE:+, both workers}): $(grep "kept 0 of" "$base/daemon.log" |
        sed 's/.*: \([0-9]*\) entries, \([0-9]*\) bytes.*(\([0-9]*\) ms)$/\3/' | tr '\n' ' ')ms"
# The rest of a first request's input: the cache's hand-out, which includes the mirror made for
# the lane that waits for its first generation (gen-mirror.h), right after the walk.
echo "fresh start, the first requests' hand-outs (the mirror for the waiting lane; the daemon's log): $(grep -B1 "build cache (none)" "$base/daemon.log" |
        grep -A1 "kept 0 of" | sed -n 's/.*(hand-out \([0-9]*\) ms.*/\1/p' | tr '\n' ' ')ms"
echo "fresh start, second request (the other lane's first): ${second[*]} ms (median $m2): ratio $(ratio "$m2" "$mb") (target 3.0)"

# The dependency cache: the python library copied into deps/ by one job, kept by the cache.
worker_run "[\"sh\",\"-c\",\"mkdir -p deps && cp -a /work/$PY deps/\"]" >/dev/null
sleep 1.2 # past the racy window of what the walks read
for _ in 1 2 3; do worker_run "$TRUE" >/dev/null; done

# A restarted worker that finds a kept generation starts a capsule ahead at once: wait_warm waits
# for its sandbox to run (booted, waiting for the request), as a controller whose next request
# comes a second after the restart finds it.
warm_running() { runsc --root /run/tentaflake-worker-bench-restart/runsc list 2>/dev/null |
                 awk '$1 ~ /^tfw-bench-restart-warm-/ && $3 == "running" { n++ } END { exit !n }'; }
wait_warm() {
        while ! warm_running; do
                kill -0 "$daemon" 2>/dev/null || { echo "store-restart.sh: the daemon died" >&2; exit 1; }
                sleep 0.01
        done
}
after=() after_ready=() before=() deps_before=() deps_after=() deps_ready=() restarts=()
for i in $(seq "$RUNS"); do
        bare+=("$(bench_bare_ms)")
        worker_run "$TRUE" >/dev/null
        bench_stop_daemon
        start
        restarts+=("$START_MS")
        after+=("$(worker_run "$TRUE")")
        bench_stop_daemon
        start
        wait_warm
        after_ready+=("$(worker_run "$TRUE")")
        worker_run "$TRUE" >/dev/null
        deps_before+=("$(worker_run "$DEPS")")
        bench_stop_daemon
        start
        deps_after+=("$(worker_run "$DEPS")")
        bench_stop_daemon
        start
        wait_warm
        deps_ready+=("$(worker_run "$DEPS")")
done
mb=$(printf '%s\n' "${bare[@]}" | median)
ma=$(printf '%s\n' "${after[@]}" | median)
db=$(printf '%s\n' "${deps_before[@]}" | median)
da=$(printf '%s\n' "${deps_after[@]}" | median)
echo "restart (SIGTERM to READY, the store checked): ${restarts[*]} ms (median $(printf '%s\n' "${restarts[@]}" | median))"
mr=$(printf '%s\n' "${after_ready[@]}" | median)
dr=$(printf '%s\n' "${deps_ready[@]}" | median)
echo "first request after a restart, sent at READY: ${after[*]} ms (median $ma), bare median $mb: ratio $(ratio "$ma" "$mb") (target 3.0)"
echo "first request after a restart, once the capsule started ahead waits: ${after_ready[*]} ms (median $mr): ratio $(ratio "$mr" "$mb") (target 3.0)"
echo "the cache's job right after a restart, sent at READY: ${deps_after[*]} ms (median $da), just before it: ${deps_before[*]} ms (median $db): ratio $(ratio "$da" "$db") (target 1.2)"
echo "the cache's job after a restart, once the capsule started ahead waits: ${deps_ready[*]} ms (median $dr): ratio $(ratio "$dr" "$db") (target 1.2)"
grep -h "generation store:" "$base/daemon.log" | sort | uniq -c | sed 's/^/store drops: /' || echo "store drops: none"
echo "the second lane's first generation: $(grep -c "seeded from lane-[0-9]* (its mirror taken)" "$base/daemon.log" || true) of $((RUNS * (${#first_before[@]} > 0 ? 2 : 1))) fresh starts took the first job's mirror (gen-mirror.h), $(grep -c "seeded from lane-[0-9]* ahead" "$base/daemon.log" || true) cloned it"
bench_copy_cost "$base/ws"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
