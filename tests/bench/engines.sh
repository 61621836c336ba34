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
[ -x "$BIN" ] || { echo "engines.sh: $BIN missing (make bench builds it)" >&2; exit 1; }
if [ "$(id -u)" -ne 0 ]; then
        echo "engines.sh: SKIP: the engines need root"
        exit 0
fi
scripts/start-dockerd
for engine in docker podman; do
        command -v "$engine" >/dev/null || { echo "engines.sh: $engine missing" >&2; exit 1; }
        image=$(tests/integration/docker-image.sh "$engine")
        BUILD=$BUILD "$BIN" "$RUNS" "$engine" "$image" || { "$engine" rmi "$image" >/dev/null; exit 1; }
        "$engine" rmi "$image" >/dev/null
done
