#!/usr/bin/env bash
# What seeing a system call's result would cost (issue 49, the `read-only` wall of the runc
# driver; docs/controller.md, "Walls in the result"). A write into the capsule's read-only root
# fails with EROFS in the VFS, before any LSM, so only a probe on the system call's exit can tell
# it; the one this kernel allows is a syscall tracepoint, and enabling any syscall tracepoint (a
# tracefs instance's syscalls/sys_exit_* event, or a BPF program on it) puts every thread of the
# host on the slow system call path for as long as it is enabled, whatever pid filter the
# instance has. This measures that with a real daemon (runc driver, a capsule started ahead),
# each request alternately with no tracepoint and with a private tracefs instance that has
# sys_exit_{openat,mkdirat,unlinkat} enabled with the filter `ret == -30` (pid filter: a
# sleeping process of this script):
#   t. `/bin/true` from the request to its result (ms)
#   g. 2,000,000 getppid inside the capsule (ns each, timed inside the job)
#   h. the same loop on the host, outside any capsule (what every other process of the host pays)
# Median of BENCH_RUNS (default 9) per side. Prints every number; never fails because of them.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN=$BUILD/tentaflake-worker
RUNS=${BENCH_RUNS:-9}
ME=syscall-trace.sh
NAME=bench-strace
INST=tfw-bench-strace-$$ # tracefs instances are the host's: one of this run's own
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_worker
command -v runc >/dev/null || { echo "$ME: SKIP: runc is not installed"; exit 0; }
grep -qw tracefs /proc/filesystems || { echo "$ME: SKIP: the kernel has no tracefs"; exit 0; }

bench_base strace
daemon='' sleeper='' trace=''
cleanup() {
        if [ -n "$trace" ]; then
                # An instance left enabled would slow every system call of the host: off first.
                for e in openat mkdirat unlinkat; do echo 0 2>/dev/null >"$trace/instances/$INST/events/syscalls/sys_exit_$e/enable" || true; done
                rmdir "$trace/instances/$INST" 2>/dev/null || true
                umount "$trace" || true
                rmdir "$trace" || true
        fi
        [ -z "$sleeper" ] || kill "$sleeper" 2>/dev/null || true
        bench_cleanup "$NAME"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The instance, on a tracefs mount of this script's own.
trace=$(mktemp -d /run/tfw-bench-tracefs.XXXXXX)
mount -t tracefs nodev "$trace" || { rmdir "$trace"; trace=''; echo "$ME: SKIP: cannot mount tracefs"; exit 0; }
[ -e "$trace/events/syscalls" ] || { echo "$ME: SKIP: the kernel has no syscall tracepoints"; exit 0; }
inst=$trace/instances/$INST
mkdir "$inst"
echo 8 >"$inst/buffer_size_kb"
sleep 100000 &
sleeper=$!
echo "$sleeper" >"$inst/set_event_pid"
for e in openat mkdirat unlinkat; do echo 'ret == -30' >"$inst/events/syscalls/sys_exit_$e/filter"; done
tracing() { for e in openat mkdirat unlinkat; do echo "$1" >"$inst/events/syscalls/sys_exit_$e/enable"; done; }

mkdir -p "$base/ws" && chown 12345:12345 "$base/ws"
printf '#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\n#include <unistd.h>\nint main(int c, char **v) { long n = atol(v[1]); struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a); for (long i = 0; i < n; i++) (void) getppid(); clock_gettime(CLOCK_MONOTONIC, &b); printf("ns=%%.1f\\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n); return 0; }\n' >"$base/loop.c"
cc -O2 -o "$base/ws/tfw-sysloop" "$base/loop.c"
chown 12345:12345 "$base/ws/tfw-sysloop"
cat >"$base/config.json" <<JSON
{"version": 1, "name": "$NAME", "workspace": "$base/ws", "container_uid": 12345, "container_gid": 12345,
 "state_dir": "$base/state", "results_dir": "$base/results", "runtime": {"driver": "runc", "warm_seconds": 600}}
JSON
bench_start_daemon "$BIN" "$base/config.json" "$base/daemon.log"
inbox=$base/ws/.tentaflake-worker/inbox

one() { # one ON|OFF ARGV_JSON: a request with the tracepoint on or off; REQ_MS, and NS from its log
        if [ "$1" = on ]; then tracing 1; else tracing 0; fi
        bench_next_n
        bench_write_request "$inbox" "r$n" "$2"
        sleep 1 # not timed: the capsule started ahead boots as the last result is published
        bench_request "$inbox" "$base/results" "r$n"
        NS=$(sed -n 's/^ns=//p' "$base/results/r$n/job.log")
}
declare -A t g h
echo "$ME: runc $(runc --version | head -1 | cut -d' ' -f3), $RUNS runs a side; load $(load)"
one off '["/bin/true"]' # warm-up, not counted
for _ in $(seq "$RUNS"); do
        for side in off on; do
                one "$side" '["/bin/true"]'
                t[$side]+="$REQ_MS "
                one "$side" '["/work/tfw-sysloop","2000000"]'
                g[$side]+="$NS "
                h[$side]+="$("$base/ws/tfw-sysloop" 2000000 | sed -n 's/^ns=//p') "
        done
done
tracing 0
nmedian() { echo "$1" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for side in off on; do
        echo "tracepoint $side: /bin/true request to result: median $(echo "${t[$side]}" | tr ' ' '\n' | grep . | median) ms (${t[$side]% })"
        echo "tracepoint $side: getppid inside the capsule: median $(nmedian "${g[$side]}") ns (${g[$side]% })"
        echo "tracepoint $side: getppid on the host, outside: median $(nmedian "${h[$side]}") ns (${h[$side]% })"
done
echo "load $(load)"
