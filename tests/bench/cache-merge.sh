#!/usr/bin/env bash
# Benchmark of the host's side of a job that changes one file of a large build cache (issue 34;
# docs/cache.md, "How it is built", step 3): the next version made from the job's change and the
# version it was handed. A node_modules tree of about 22,000 entries (npm install of a fixed
# list, as tests/bench/node-cache.sh row 1, natively), seeded into a store on a tmpfs, then
# BENCH_RUNS (default 7) jobs of one changed file each: medians of the commit (merge, tree id,
# publication), of the tree id alone, and of the removal of the replaced version (after the
# result). Needs root (a mount namespace) and npm; reports, never fails on a number.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-7}
B=$BUILD/tests/bench/bench-cache-merge
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_bins "$B"
bench_need_root "the store's read-only mount needs root"
command -v npm >/dev/null || { echo "cache-merge.sh: SKIP: npm missing"; exit 0; }
base=$(mktemp -d /var/lib/tfw-bench-merge.XXXXXX)
store=$(mktemp -d /dev/shm/tfw-bench-merge.XXXXXX)
trap 'rm -rf "$base" "$store"' EXIT
PACKAGES="@babel/core@7.29.17 @babel/preset-env@7.29.17 @types/node@26.6.11 core-js@3.51.0 eslint@10.16.0
 jest@30.5.2 lodash@4.18.1 lodash-es@4.18.1 mocha@12.0.3 ramda@0.32.0 rxjs@7.8.2 typescript@7.0.2 webpack@5.113.0"
# shellcheck disable=SC2086 # the list is words
if ! (cd "$base" && npm init -y >/dev/null 2>&1 && npm install --no-audit --no-fund --ignore-scripts $PACKAGES >"$base/npm.log" 2>&1); then
        echo "cache-merge.sh: SKIP: npm could not install the package list"
        exit 0
fi
"$B" "$base/node_modules" "$store" "$RUNS" >"$base/out" 2>"$base/err" || { cat "$base/err" >&2; exit 1; }
median() { sed "s/.*$1=\([0-9]*\).*/\1/" "$base/out" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "$(cat "$base/err"); load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "one file of the cache changed: commit $(( $(median commit_usec) / 1000 )) ms, of which the tree id" \
        "$(( $(median tree_usec) / 1000 )) ms ($(head -1 "$base/out" | sed 's/.*linked=\([0-9]*\).*/\1/') files linked," \
        "$(head -1 "$base/out" | sed 's/.*hashed=\([0-9]*\).*/\1/') read); the replaced version removed after the result in" \
        "$(( $(median free_usec) / 1000 )) ms (median of $RUNS)"
