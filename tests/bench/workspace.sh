#!/usr/bin/env bash
# Benchmark of a request in a real-sized workspace (issue 12 item 2). With a real daemon (`run`,
# concurrency 1, the runsc driver):
#   1. latency: a /bin/true request in a workspace of copies of /usr/include and
#      /usr/lib/python3.11 (about 9.5k files, 170 MB; made here in a temporary directory),
#      rename into the inbox until the result directory appears, against [bare `runsc run
#      /bin/true` + `cp -a` of the same tree into a tmpfs]; alternating, medians of BENCH_RUNS
#      (default 7); target ratio <= 2.0;
#   2. disk writes: the bytes the daemon and its reaped children (runsc, gofer, sandbox) sent
#      to the block layer (/proc/PID/io write_bytes) for one request in a 100 MB workspace,
#      against the size of the result directory it published; target 0 beyond the result;
#   3. `make -j2` of this project's binary (its git files) in a capsule, request to result,
#      against the same build natively (reported, no target).
# Prints every number; never fails because a target is missed (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-7}
BENCH=$BUILD/tests/bench/bench-orchestrator
BIN=$BUILD/tentaflake-worker
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_bins "$BENCH"
bench_need_worker

bench_base ws
daemon=
cleanup() {
        bench_stop_daemon
        bench_kill_capsules /run/tentaflake-worker-bench-ws/runsc "$base/bare-root"
        bench_rm_cgroups bench-ws
        mountpoint -q "$base/tmpfs" && umount "$base/tmpfs"
        mountpoint -q "$base/results-tmpfs" && umount "$base/results-tmpfs"
        local m
        for m in "${bench_mounts[@]}"; do umount "$m" 2>/dev/null; done
        rm -rf /run/tentaflake-worker-bench-ws
        bench_umount_store
        rm -rf "$base"
}
trap cleanup EXIT

start_daemon() {
        cat >"$base/config.json" <<JSON
{"version": 1, "name": "bench-ws", "workspace": "$base/ws",
 "container_uid": 12345, "container_gid": 12345, "concurrency": 1,
 "state_dir": "$base/state", "results_dir": "${RESULTS:-$base/results}"}
JSON
        bench_start_daemon "$BIN" "$base/config.json" "$base/daemon.log"
}

# 1. The 9.5k-file workspace.
mkdir -p "$base/ws" "$base/tmpfs"
cp -a /usr/include "$base/ws/include"
[ -d /usr/lib/python3.11 ] && cp -a /usr/lib/python3.11 "$base/ws/python3.11"
chown -R 12345:12345 "$base/ws"
echo "workspace: $(find "$base/ws" -type f | wc -l) files, $(find "$base/ws" -type d | wc -l) directories, $(du -sm "$base/ws" | cut -f1) MB"
mount -t tmpfs -o size=1g,mode=0700 i12-bench-ws "$base/tmpfs"
start_daemon
BENCH_BARE_COPY="$base/ws" BENCH_BARE_TMPFS="$base/tmpfs" BENCH_LABEL="workspace request" BENCH_TARGET=2.0 \
        "$BENCH" "$base/ws/.tentaflake-worker/inbox" "$base/results" "$base" "$RUNS" 0
bench_stop_daemon

# 2. Disk writes for a request in a 100 MB workspace. The results go to a tmpfs, as they do
# by default (results_dir is below /run): every byte counted is beyond the result. Measured
# as the machine is, then with /run/tentaflake-worker-<name> (runsc's root, orchestrator/dirs.h)
# on a tmpfs as /run is under systemd (it is not on every machine), and then also with
# state_dir's requests/ and audit/ on a tmpfs: what is left is neither of them.
rm -rf "$base/ws"
mkdir -p "$base/ws/data" "$base/results-tmpfs"
for i in $(seq 100); do head -c 1048576 /dev/urandom >"$base/ws/data/f$i"; done
chown -R 12345:12345 "$base/ws"
mount -t tmpfs -o size=64m,mode=0755 i12-bench-results "$base/results-tmpfs"
wb() { awk -v k="$1" '$1 == k {print $2}' "/proc/$daemon/io"; }
inbox=$base/ws/.tentaflake-worker/inbox
request() {
        printf '{"version":1,"id":"%s","action_class":"local-reversible","argv":["/bin/true"]}' "$1" >"$inbox/.$1.tmp"
        mv "$inbox/.$1.tmp" "$inbox/$1.json"
        for _ in $(seq 1200); do [ -f "$base/results-tmpfs/results/$1/result.json" ] && return 0; sleep 0.05; done
        echo "workspace.sh: no result for $1" >&2
        exit 1
}
run_dir=/run/tentaflake-worker-bench-ws
bench_mounts=()
disk_writes() { # disk_writes LABEL ROUND
        sync
        RESULTS=$base/results-tmpfs/results start_daemon
        request "warmup$2"
        sync
        local w0 c0 w1 c1
        w0=$(wb write_bytes:) c0=$(wb cancelled_write_bytes:)
        for i in 1 2 3 4 5; do request "io$2-$i"; done
        sync
        w1=$(wb write_bytes:) c1=$(wb cancelled_write_bytes:)
        bench_stop_daemon
        echo "disk writes ($1): a request in a 100 MB workspace: $(((w1 - w0) / 5)) bytes a request written by the daemon and its children ($(((c1 - c0) / 5)) of them cancelled before they reached the disk), mean of 5; the result (on a tmpfs, as by default) holds $(du -sb "$base/results-tmpfs/results/io$2-1" | cut -f1) bytes (target: nothing beyond the result)"
        grep -o '"status": "[a-z_]*"' "$base/results-tmpfs/results/io$2-1/result.json" | head -1
}
disk_writes "this machine" 1
if ! mountpoint -q /run && [ "$(stat -f -c %T /run)" != tmpfs ]; then
        mkdir -p "$run_dir"
        mount -t tmpfs -o size=16m,mode=0755 i12-bench-run "$run_dir" && bench_mounts+=("$run_dir")
fi
disk_writes "/run a tmpfs" 2
for d in requests audit; do
        mount -t tmpfs -o size=64m,mode=0700 "i12-bench-$d" "$base/state/$d" && bench_mounts+=("$base/state/$d")
done
disk_writes "/run, requests/ and audit/ tmpfs" 3
for m in "${bench_mounts[@]}"; do umount "$m"; done
bench_mounts=()

# 3. `make -j2` of this project's binary in a capsule against natively (issue 12: report).
bench_stop_daemon
rm -rf "$base/ws" "$base/native"
mkdir -p "$base/ws" "$base/native"
git ls-files -z | xargs -0 cp --parents -t "$base/ws"
git ls-files -z | xargs -0 cp --parents -t "$base/native"
chown -R 12345:12345 "$base/ws"
t0=$(date +%s%N)
make -s -C "$base/native" -j2 build/tentaflake-worker >"$base/native.log" 2>&1 || { tail "$base/native.log"; echo "workspace.sh: the native build failed" >&2; }
t1=$(date +%s%N)
native_ms=$(( (t1 - t0) / 1000000 ))
start_daemon
t0=$(date +%s%N)
printf '{"version":1,"id":"build1","action_class":"local-reversible","argv":["make","-s","-j2","build/tentaflake-worker"],"timeout_seconds":900}' >"$inbox/.build1.tmp"
mv "$inbox/.build1.tmp" "$inbox/build1.json"
for _ in $(seq 18000); do [ -f "$base/results/build1/result.json" ] && break; sleep 0.05; done
t1=$(date +%s%N)
capsule_ms=$(( (t1 - t0) / 1000000 ))
status=$(grep -o '"status": "[a-z_]*"' "$base/results/build1/result.json" | head -1)
echo "make -j2 of the worker's binary: natively $native_ms ms, in a capsule (request to result) $capsule_ms ms ($status), ratio $(awk -v a="$capsule_ms" -v b="$native_ms" 'BEGIN { printf "%.2f", a / b }') (report)"
