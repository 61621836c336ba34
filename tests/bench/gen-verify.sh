#!/usr/bin/env bash
# Benchmark of the per-file question (issue 33; docs/snapshot.md, "What the watch cannot see"):
# every file of a directory the workspace's watch vouches for is asked by fstatat before it is
# kept. In a workspace of copies of /usr/share, /usr/include and /usr/lib/python3* (about 80k
# entries, as tests/bench/generations.sh), walks on the watch's word with nothing changed,
# alternating the question on one thread and on a thread per CPU (at most four): medians of
# BENCH_RUNS (default 7) of each, and the files asked. Reports; never fails on a number.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-7}
B=$BUILD/tests/bench/bench-gen-verify
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_bins "$B"
base=$(mktemp -d /var/lib/tfw-bench-verify.XXXXXX)
trap 'rm -rf "$base"' EXIT
mkdir "$base/gen"
bench_tree "$base/ws"
echo "workspace: $(find "$base/ws" | wc -l) entries; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
"$B" "$base/ws" "$base/gen" "$RUNS" >"$base/out"
median() { grep "mode=$1 " "$base/out" | sed 's/.*usec=\([0-9]*\).*/\1/' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
files=$(head -1 "$base/out" | sed 's/.*files_checked=\([0-9]*\).*/\1/')
s=$(median single)
t=$(median threaded)
echo "walk on the watch's word, nothing changed, $files files asked: one thread $((s / 1000)) ms" \
        "($(( s * 1000 / (files > 0 ? files : 1) )) ns a file), threaded $((t / 1000)) ms (median of $RUNS each)"
