#!/usr/bin/env bash
# Benchmark of the inbox daemon (issues 5 and 12). With a real daemon (`run`, concurrency 2, the
# runsc driver, an empty workspace):
#   1. latency with capsules started ahead (runtime.warm_seconds BENCH_WARM_SECONDS, default
#      10): rename of a /bin/true request into the inbox until <id>/ appears in the results,
#      back to back, against a bare cold `runsc run` of /bin/true with a minimal bundle;
#      alternating, median of BENCH_RUNS (default 11); target ratio <= 0.5;
#   2. throughput: BENCH_BURST (default 200) requests at once at concurrency 2, against as
#      many bare runs two at a time; target ratio <= 1.3;
#   3. idle after the window (warm_seconds with no request): the daemon's RSS, its wake-ups
#      over BENCH_IDLE_SECONDS (default 60; context switches and system calls counted by
#      `perf stat` when it works here, else /proc/PID/status context switch counters) and the
#      sandbox processes left; target <= 4 MiB, 0 wake-ups, no sandbox;
#   4. latency with warm_seconds 0 (a second daemon), against the same bare runs; target
#      ratio <= 1.15.
# BENCH_DRIVER=runc: the worker's capsules through the runc driver (the bare runs stay runsc's).
# BENCH_BEFORE_BUILD=DIR (a build directory of another commit): row 1 again after it, on a second
# daemon of that build beside this one, BENCH_BEFORE_ROUNDS (default 4) turns of RUNS requests on
# each, taking turns, and the medians of all of each's: a before and after in one run.
# Prints every number; never fails because a target is missed (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-11}
BURST=${BENCH_BURST:-200}
IDLE=${BENCH_IDLE_SECONDS:-60}
WARM=${BENCH_WARM_SECONDS:-10}
BENCH=$BUILD/tests/bench/bench-orchestrator
BIN=$BUILD/tentaflake-worker
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_bins "$BENCH"
bench_need_worker

bench_base orch
daemon=
before_pid=
stop_before() {
        if [ -n "$before_pid" ]; then kill -TERM "$before_pid" 2>/dev/null || true; wait "$before_pid" 2>/dev/null || true; before_pid=; fi
        bench_kill_capsules /run/tentaflake-worker-bench-orch-before/runsc
        rm -rf /run/tentaflake-worker-bench-orch-before
}
trap 'stop_before; bench_cleanup bench-orch "$base/bare-root"' EXIT

mkdir -p "$base/ws"
chown 12345:12345 "$base/ws"
start_daemon() { # start_daemon WARM_SECONDS
        cat >"$base/config.json" <<JSON
{"version": 1, "name": "bench-orch", "workspace": "$base/ws",
 "container_uid": 12345, "container_gid": 12345, "concurrency": 2,
 "state_dir": "$base/state", "results_dir": "$base/results", "runtime": {"driver": "${BENCH_DRIVER:-runsc}", "warm_seconds": $1}}
JSON
        bench_start_daemon "$BIN" "$base/config.json" "$base/daemon.log"
}
sandboxes() { pgrep -f -- "--root=/run/tentaflake-worker-bench-orch/runsc|--root /run/tentaflake-worker-bench-orch/runsc" | wc -l; }
start_daemon "$WARM"

status_kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$daemon/status"; }
echo "idle (fresh): RSS $(status_kb VmRSS) kB (anonymous $(status_kb RssAnon) kB, file-backed $(status_kb RssFile) kB)"

BENCH_LABEL="latency, warm_seconds $WARM" BENCH_TARGET=0.5 \
        "$BENCH" "$base/ws/.tentaflake-worker/inbox" "$base/results" "$base" "$RUNS" "$BURST"
echo "$(grep -c "started in capsule 'warm-" "$base/daemon.log") of the requests ran in a capsule started ahead"
bench_timing "$base/daemon.log" b $((RUNS + 1))

if [ -n "${BENCH_BEFORE_BUILD:-}" ]; then
        # Row 1 against the build before: a daemon of each, the same config but its name and
        # directories, RUNS requests on one then the other (the order swapped each turn).
        mkdir -p "$base/before/ws"
        chown 12345:12345 "$base/before/ws"
        sed -e 's/"bench-orch"/"bench-orch-before"/' -e "s|$base/|$base/before/|g" "$base/config.json" >"$base/before/config.json"
        : >"$base/before/daemon.log"
        "$(realpath "$BENCH_BEFORE_BUILD/tentaflake-worker")" --config "$base/before/config.json" run 2>"$base/before/daemon.log" &
        before_pid=$!
        bench_wait_ready "$base/before/daemon.log" "the daemon of BENCH_BEFORE_BUILD"
        ids=(p q r s t u v w x y)
        for t in $(seq 0 $((${BENCH_BEFORE_ROUNDS:-4} - 1))); do
                for side in $([ $((t % 2)) -eq 0 ] && echo "before after" || echo "after before"); do
                        b=$base; [ "$side" = before ] && b=$base/before
                        BENCH_ID_PREFIX=${ids[t % 10]} "$BENCH" "$b/ws/.tentaflake-worker/inbox" "$b/results" "$base" "$RUNS" 0 |
                                sed -n "s/^run .*/$side &/p" >>"$base/alternated.txt"
                done
        done
        python3 - "$base/alternated.txt" "$BENCH_BEFORE_BUILD" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import re, statistics, sys
rows = {"before": ([], []), "after": ([], [])}
for line in open(sys.argv[1]):
    m = re.match(r"(\w+) run +\d+: bare runsc run +([\d.]+) ms  inbox to result +([\d.]+) ms", line)
    if m:
        rows[m.group(1)][0].append(float(m.group(2)))
        rows[m.group(1)][1].append(float(m.group(3)))
for side in ("before", "after"):
    bare, dmn = rows[side]
    print("latency, taking turns, %s (%s): bare runsc run median %.1f ms, inbox to result median %.1f ms, ratio %.3f, %d runs each"
          % (side, sys.argv[2] if side == "before" else "this build", statistics.median(bare), statistics.median(dmn),
             statistics.median(dmn) / statistics.median(bare), len(dmn)))
print("  (load average at the end: %s)" % sys.argv[3])
PY
        stop_before
fi

# The window: warm_seconds without a request, then the waiting capsule must be gone.
for _ in $(seq $(( (WARM + 30) * 10 ))); do [ "$(sandboxes)" -eq 0 ] && break; sleep 0.1; done
echo "after the window of $WARM s: $(sandboxes) runsc process(es) of the worker left (target 0)"

# Idle after the load: nothing is queued or running, no request is pending.
ctx() { echo $(( $(status_kb voluntary_ctxt_switches) + $(status_kb nonvoluntary_ctxt_switches) )); }
c0=$(ctx)
perf_out=
if command -v perf >/dev/null; then
        perf_out=$(perf stat -x, -e context-switches -e 'syscalls:sys_enter_*' -p "$daemon" -- sleep "$IDLE" 2>&1 >/dev/null) || perf_out=
else
        sleep "$IDLE"
fi
c1=$(ctx)
echo "idle (after the load): RSS $(status_kb VmRSS) kB (anonymous $(status_kb RssAnon) kB, file-backed $(status_kb RssFile) kB), peak $(status_kb VmHWM) kB"
echo "idle: $((c1 - c0)) context switches in ${IDLE} s (/proc/$daemon/status), $(( (c1 - c0) * 60 / IDLE )) per minute"
if [ -n "$perf_out" ]; then
        awk -F, -v s="$IDLE" '
                $3 == "context-switches" && $1 ~ /^[0-9]+$/ { cs = $1 }
                $3 ~ /^syscalls:sys_enter_/ && $1 ~ /^[0-9]+$/ { sc += $1; if ($1 > 0) { sub(/^syscalls:sys_enter_/, "", $3); names = names " " $3 "=" $1 } }
                END { printf "idle (perf stat, %d s): %d context switches, %d system calls%s\n", s, cs, sc, names }' <<<"$perf_out"
fi
echo "idle: $(sandboxes) runsc process(es) of the worker (target 0)"
echo "idle targets: RSS <= 4096 kB, 0 wake-ups, no sandbox"

# Capsules started ahead switched off: every request starts its own.
kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=
start_daemon 0
BENCH_ID_PREFIX=c BENCH_LABEL="latency, warm_seconds 0" BENCH_TARGET=1.15 \
        "$BENCH" "$base/ws/.tentaflake-worker/inbox" "$base/results" "$base" "$RUNS" 0
bench_timing "$base/daemon.log" c $((RUNS + 1))
