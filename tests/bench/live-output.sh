#!/usr/bin/env bash
# Benchmark of live output (issue 35, item 1), with a real daemon (`run`, the runsc driver) and
# `submit` as the controller (uid 12346):
#   1. latency: a job prints one line carrying the time it was taken (date +%s%N, just before
#      its write) and then waits 2 s; the time from that stamp to the line arriving on submit's
#      stdout (read by a timestamping reader); BENCH_LIVE_RUNS (default 20) runs, median and
#      worst; target median <= 300 ms. (gVisor's clock is the host's, read through its vDSO.)
#   2. cost: submit of a job printing about 100 MB (seq 1 12500000) against the same job with its
#      output sent to /dev/null, end to end, alternating, BENCH_LIVE_COST_RUNS (default 5) each;
#      ratio of the medians, target <= 1.1. With BENCH_LIVE_BASE_BUILD (a build directory of
#      the worker before live output, e.g. `git archive 65939f8` built apart), the printing job
#      again through that build's daemon and submit, alternating with this build's: what
#      streaming itself costs, apart from moving 100 MB through the capsule's log channel.
#   3. the floors: the same job on the host through a pipe against /dev/null (what any pipe
#      costs a job that only prints), and 100 MB written in 1 MiB writes inside the capsule,
#      streamed against discarded (what is left once the job's writes are few).
# Prints every number; never fails because a target is missed (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_LIVE_RUNS:-20}
COST_RUNS=${BENCH_LIVE_COST_RUNS:-5}
BIN=$BUILD/tentaflake-worker
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_worker
command -v setpriv >/dev/null || { echo "live-output.sh: SKIP: setpriv (util-linux) missing"; exit 0; }

bench_base live
daemon=
trap 'bench_cleanup bench-live' EXIT

mkdir -p "$base/ws" "$base/home" "$base/bin"
chown 12346:12346 "$base/ws" "$base/home"
cat >"$base/config.json" <<JSON
{"version": 1, "name": "bench-live", "workspace": "$base/ws",
 "container_uid": 12346, "container_gid": 12346,
 "state_dir": "$base/state", "results_dir": "$base/results",
 "limits": {"default_timeout_seconds": 300, "max_timeout_seconds": 600}}
JSON
start_daemon() { # start_daemon BIN: the daemon, and submit, from that binary
        if [ -n "$daemon" ]; then kill -TERM "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=; fi
        install -m 0755 "$1" "$base/bin/tentaflake-worker"
        bench_start_daemon "$1" "$base/config.json" "$base/daemon.log"
}
start_daemon "$BIN"

ctl_submit() {
        (cd "$base/ws" && setpriv --reuid=12346 --regid=12346 --clear-groups --no-new-privs \
                env -i PATH=/usr/bin:/bin HOME="$base/home" "$base/bin/tentaflake-worker" submit "$@")
}

# 1. Latency: the reader stamps each line as it arrives; the job's line is its own stamp.
lat=()
for i in $(seq "$RUNS"); do
        ms=$(ctl_submit -- sh -c 'date +%s%N; sleep 2' | python3 -c '
import sys, time
line = sys.stdin.readline()
t = time.time_ns()
sys.stdin.read()
print("%.1f" % ((t - int(line)) / 1e6))')
        lat+=("$ms")
done
python3 - "${lat[@]}" <<'PY'
import statistics, sys
v = sorted(float(x) for x in sys.argv[1:])
print("latency, the job's write to the line on submit's stdout (ms): " + " ".join("%.1f" % x for x in v))
print("latency: median %.1f ms, worst %.1f ms over %d runs (target: median <= 300 ms)" % (statistics.median(v), v[-1], len(v)))
PY

# 2. Cost: about 100 MB of output streamed (live log, submit printing the cap's worth) against
# the same job with its output discarded.
t_ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
loud=() quiet=()
ctl_submit -- sh -c 'seq 1 12500000' >/dev/null 2>&1 || true # untimed warm-up
for i in $(seq "$COST_RUNS"); do
        loud+=("$(t_ms ctl_submit -- sh -c 'seq 1 12500000')")
        quiet+=("$(t_ms ctl_submit -- sh -c 'seq 1 12500000 >/dev/null')")
done
python3 - "${#loud[@]}" "${loud[@]}" "${quiet[@]}" <<'PY'
import statistics, sys
n = int(sys.argv[1]); loud = [float(x) for x in sys.argv[2:2 + n]]; quiet = [float(x) for x in sys.argv[2 + n:]]
print("cost, 100 MB printed (ms): " + " ".join("%.0f" % x for x in loud))
print("cost, the same discarded (ms): " + " ".join("%.0f" % x for x in quiet))
ml, mq = statistics.median(loud), statistics.median(quiet)
print("cost: median %.0f ms streamed vs %.0f ms discarded: ratio %.3f (target <= 1.1)" % (ml, mq, ml / mq))
PY

# 2c. What a pipe costs the same job without gVisor (the host: the job's output read by cat,
# against /dev/null), and inside the capsule the same 100 MB written 1 MiB at a time (dd): how
# much of 2 is the job's 4 KiB writes into a pipe rather than the bytes moved.
host=() host_null=() big=() big_null=()
for i in $(seq "$COST_RUNS"); do
        host+=("$(t_ms sh -c 'seq 1 12500000 | cat >/dev/null')")
        host_null+=("$(t_ms sh -c 'seq 1 12500000 >/dev/null')")
        big+=("$(t_ms ctl_submit -- dd if=/dev/zero bs=1M count=100 status=none)")
        big_null+=("$(t_ms ctl_submit -- dd if=/dev/zero bs=1M count=100 status=none of=/dev/null)")
done
python3 - "$COST_RUNS" "${host[@]}" "${host_null[@]}" "${big[@]}" "${big_null[@]}" <<'PY'
import statistics, sys
n = int(sys.argv[1]); v = [float(x) for x in sys.argv[2:]]
rows = [v[i * n:(i + 1) * n] for i in range(4)]
m = [statistics.median(r) for r in rows]
print("floor without gVisor, the same job on the host through a pipe (ms): %s vs %s discarded: ratio %.3f"
      % (" ".join("%.0f" % x for x in rows[0]), " ".join("%.0f" % x for x in rows[1]), m[0] / m[1]))
print("100 MB in 1 MiB writes, streamed (ms): %s vs %s discarded: ratio %.3f"
      % (" ".join("%.0f" % x for x in rows[2]), " ".join("%.0f" % x for x in rows[3]), m[2] / m[3]))
PY

# 2b. The same printing job through the build before live output, alternating with this one's.
BASE=${BENCH_LIVE_BASE_BUILD:-}
if [ -n "$BASE" ] && [ -x "$BASE/tentaflake-worker" ]; then
        BASE_BIN=$(realpath "$BASE/tentaflake-worker")
        now=() before=()
        for i in $(seq "$COST_RUNS"); do
                start_daemon "$BASE_BIN"
                before+=("$(t_ms ctl_submit -- sh -c 'seq 1 12500000')")
                start_daemon "$BIN"
                now+=("$(t_ms ctl_submit -- sh -c 'seq 1 12500000')")
        done
        python3 - "${#now[@]}" "${now[@]}" "${before[@]}" <<'PY'
import statistics, sys
n = int(sys.argv[1]); now = [float(x) for x in sys.argv[2:2 + n]]; before = [float(x) for x in sys.argv[2 + n:]]
print("cost, 100 MB printed, this build (ms): " + " ".join("%.0f" % x for x in now))
print("cost, 100 MB printed, the build before live output (ms): " + " ".join("%.0f" % x for x in before))
mn, mb = statistics.median(now), statistics.median(before)
print("cost of streaming itself: median %.0f ms vs %.0f ms: ratio %.3f" % (mn, mb, mn / mb))
PY
else
        echo "cost of streaming itself: not measured (set BENCH_LIVE_BASE_BUILD to a build before live output)"
fi
