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
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_need_bins "$BIN" "$BUILD/tentaflake-capsule-init"
bench_need_root "runsc and the job cgroup need root"
bench_need_runsc
BUILD=$BUILD "$BIN" "$RUNS"
