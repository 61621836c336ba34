#!/usr/bin/env bash
# Benchmark: the confined artifact import of a tar stream (fork, unprivileged seccomp parser,
# root writer, per-entry checks and chown) against `bsdtar -xf` of the same stream into the
# same filesystem. The stream holds 10,000 files of 10 KiB (about 100 MB) in 100 directories.
# Runs alternate (import, bsdtar, bsdtar, import, ...) so drift hits both alike; extracted
# copies are kept until the end (deleting and reallocating hundreds of MB on a VM with
# free-page reporting lands seconds of host faults on the next run) and one untimed run of each
# comes first. Prints the medians and the ratio import/bsdtar (target <= 1.2).
#
# Environment: BUILD (default build), BENCH_RUNS (default 11), BENCH_FILES (default 10000),
# BENCH_DIR (default ${TMPDIR:-/var/tmp}). Needs root (the import drops to uid 65534).
set -euo pipefail

BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-11}
FILES=${BENCH_FILES:-10000}
BIN=$BUILD/tests/bench/bench-artifacts
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_need_bins "$BIN"
BIN=$(realpath "$BIN")
command -v bsdtar >/dev/null || { echo "artifacts.sh: bsdtar missing (libarchive-tools)" >&2; exit 1; }
bench_need_root "the import drops privileges and needs root"

work=$(mktemp -d -p "${BENCH_DIR:-${TMPDIR:-/var/tmp}}" tfw-bench-artifacts.XXXXXX)
trap 'rm -rf "$work"' EXIT

python3 - "$work/src" "$FILES" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
blob = os.urandom(1 << 20)
for i in range(n):
    d = os.path.join(root, "d%02d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    off = (i * 4099) % (len(blob) - 10240)
    with open(os.path.join(d, "f%05d.dat" % i), "wb") as f:
        f.write(blob[off:off + 10240])
PY
bsdtar -cf "$work/stream.tar" -C "$work/src" .
rm -rf "$work/src"
echo "stream: $FILES files, $(stat -c %s "$work/stream.tar") bytes, on $(stat -f -c %T "$work")"

now() { date +%s%N; }
gid=$(id -g)
declare -a t_imp t_tar
summary=

run_import() {
        local t0 t1
        mkdir "$work/imp-$1"
        t0=$(now)
        summary=$("$BIN" "$work/stream.tar" "$work/imp-$1" "$gid")
        t1=$(now)
        [ "$1" = warm ] || t_imp+=($(( (t1 - t0) / 1000 )))
}

run_bsdtar() {
        local t0 t1
        mkdir "$work/tar-$1"
        t0=$(now)
        bsdtar -xf "$work/stream.tar" -C "$work/tar-$1"
        t1=$(now)
        [ "$1" = warm ] || t_tar+=($(( (t1 - t0) / 1000 )))
}

run_import warm
run_bsdtar warm
for ((i = 0; i < RUNS; i++)); do
        if ((i % 2)); then run_bsdtar "$i"; run_import "$i"; else run_import "$i"; run_bsdtar "$i"; fi
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
mi=$(median "${t_imp[@]}")
mt=$(median "${t_tar[@]}")
echo "import ($summary): runs ${t_imp[*]} us, median $mi us"
echo "bsdtar -xf: runs ${t_tar[*]} us, median $mt us"
awk -v i="$mi" -v t="$mt" 'BEGIN {
        r = i / t
        printf "ratio import/bsdtar: %.3f (target <= 1.2)%s\n", r, r <= 1.2 ? "" : "  MISSED"
        exit !(r <= 1.2)
}'
