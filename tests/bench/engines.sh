#!/usr/bin/env bash
# Benchmark: a trivial job (/bin/true) through the docker and the podman driver against a bare
# `runsc run` of the same command, alternating, median of BENCH_RUNS (default 10); prints the
# ratios (target for docker <= 2.5). Builds the busybox test image locally and removes it.
#
# Environment: BUILD (default build), BENCH_RUNS (default 10). Needs root, runsc, docker.io
# (started by scripts/start-dockerd) and podman.
set -euo pipefail

BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-10}
BIN=$BUILD/tests/bench/bench-capsule
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_need_bins "$BIN"
bench_need_root "the engines need root"
scripts/start-dockerd
# The engine's own cost: a bare `ENGINE run --rm` of the same image and command with runsc and
# no network, nothing of ours; the driver's share is the difference.
bare_engine() { # bare_engine ENGINE IMAGE -> median ms of RUNS runs
        local engine=$1 image=$2 i t0 t1 extra=()
        [ "$engine" = podman ] && extra=(--runtime-flag network=none)
        for ((i = 0; i < RUNS; i++)); do
                t0=$(date +%s%N)
                "$engine" run --rm -i --runtime runsc "${extra[@]}" --network none --pull never --log-driver none \
                        --entrypoint /bin/true "$image" </dev/null >/dev/null
                t1=$(date +%s%N)
                echo $(((t1 - t0) / 1000))
        done | sort -n | awk '{v[NR] = $1} END {printf "%.1f", v[int(NR / 2) + 1] / 1000}'
}
for engine in docker podman; do
        command -v "$engine" >/dev/null || { echo "engines.sh: $engine missing" >&2; exit 1; }
        image=$(tests/integration/docker-image.sh "$engine")
        BUILD=$BUILD "$BIN" "$RUNS" "$engine" "$image" || { "$engine" rmi "$image" >/dev/null; exit 1; }
        echo "$engine: bare '$engine run --rm --runtime runsc' of /bin/true, median $(bare_engine "$engine" "$image") ms ($RUNS runs)"
        "$engine" rmi "$image" >/dev/null
done
