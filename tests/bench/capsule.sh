#!/usr/bin/env bash
# Benchmark: one job through the capsule driver (cgroup, bundle, runsc run, in-capsule init
# with snapshot copy, relay and empty artifact tar, the confined importer, cleanup) against a
# bare `runsc run` of the same /bin/true with a hand-written bundle. Runs alternate after one
# untimed warm-up of each; prints every sample, the medians and the ratio driver/bare
# (target <= 1.15).
#
# Environment: BUILD (default build), BENCH_RUNS (default 11). Needs root and runsc.
set -euo pipefail

BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-11}
BIN=$BUILD/tests/bench/bench-capsule
[ -x "$BIN" ] || { echo "capsule.sh: $BIN missing (make bench builds it)" >&2; exit 1; }
[ -x "$BUILD/tentaflake-capsule-init" ] || { echo "capsule.sh: $BUILD/tentaflake-capsule-init missing" >&2; exit 1; }
if [ "$(id -u)" -ne 0 ]; then
        echo "capsule.sh: SKIP: runsc and the job cgroup need root"
        exit 0
fi
command -v runsc >/dev/null || { echo "capsule.sh: runsc missing" >&2; exit 1; }
BUILD=$BUILD "$BIN" "$RUNS"
