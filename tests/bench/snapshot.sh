#!/usr/bin/env bash
# Benchmark: snapshot (copy + git SHA-256 tree id) against `cp -a` of the same tree, to the same
# filesystem. A generated tree of 20,000 files, about 360 MB, sizes 200 B to 60 KB, in 220
# directories. Runs alternate (snapshot, cp -a, snapshot, ...) so drift hits both alike. Copies
# are kept until the end: on a VM with free-page reporting, deleting 360 MB and allocating it
# again costs seconds of host faults that would land on whichever run comes next (measured:
# 1 s runs became 15 s). One untimed run of each comes first for the same reason. Prints the
# medians, the
# ratio snapshot/cp (target <= 1.0) and entries per second. Also times the copy_file_range
# variant, so the choice of the default copy method stays measured.
#
# Environment: BUILD (default build), BENCH_RUNS (default 5), BENCH_FILES (default 20000),
# BENCH_DIR (default ${TMPDIR:-/var/tmp}).
set -euo pipefail

BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-5}
FILES=${BENCH_FILES:-20000}
BIN=$BUILD/tests/bench/bench-snapshot
[ -x "$BIN" ] || { echo "snapshot.sh: $BIN missing (make bench builds it)" >&2; exit 1; }
BIN=$(realpath "$BIN")

work=$(mktemp -d -p "${BENCH_DIR:-${TMPDIR:-/var/tmp}}" tfw-bench-snapshot.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Deterministic tree: sizes 200 + 59800 * u^2.4 (mean about 18 KB), random contents.
python3 - "$work/src" "$FILES" <<'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(20261129)
blob = os.urandom(1 << 20)
total = 0
for i in range(n):
    d = os.path.join(root, "d%02d" % (i % 20), "s%02d" % ((i // 20) % 10))
    if i < 200:
        os.makedirs(d, exist_ok=True)
    size = 200 + int(59800 * rng.random() ** 2.4)
    off = rng.randrange(0, len(blob) - size)
    p = os.path.join(d, "f%05d.dat" % i)
    with open(p, "wb") as f:
        f.write(blob[off:off + size])
    if i % 50 == 0:
        os.chmod(p, 0o755)
    total += size
print("tree: %d files, %.1f MB" % (n, total / 1e6))
EOF
sync

now() { date +%s%N; }
declare -a t_snap t_cp t_range
entries=0 bytes=0 tree=

run_snapshot() { # $1: copy method, $2: array name
        local t0 t1 out
        t0=$(now)
        out=$("$BIN" --copy "$1" --gid "$gid" "$work/src" "$work" "snap-$1-$i")
        t1=$(now)
        entries=$(sed -n 's/.* entries=\([0-9]*\).*/\1/p' <<<"$out")
        tree=$(sed -n 's/.* tree=\([0-9a-f]*\).*/\1/p' <<<"$out")
        bytes=$(sed -n 's/^bytes=\([0-9]*\).*/\1/p' <<<"$out")
        eval "$2+=($(( (t1 - t0) / 1000 )))"
}

run_cp() {
        local t0 t1
        t0=$(now)
        cp -a "$work/src" "$work/cp-$i"
        t1=$(now)
        t_cp+=($(( (t1 - t0) / 1000 )))
}

# The snapshot sets the group of every entry as the worker does (one fchown per entry; cp -a
# also sets ownership per entry). Our own group works as root and as a user.
gid=$(id -g)
# Warm the page cache for the source, untimed.
"$BIN" --gid "$gid" "$work/src" "$work" snap-warm >/dev/null
cp -a "$work/src" "$work/cp-warm"

for ((i = 0; i < RUNS; i++)); do
        run_snapshot auto t_snap
        run_cp
        run_snapshot range t_range
done

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
ms=$(median "${t_snap[@]}")
mc=$(median "${t_cp[@]}")
mr=$(median "${t_range[@]}")
echo "snapshot (read/write + tree id): runs ${t_snap[*]} us, median $ms us"
echo "snapshot (copy_file_range + tree id): runs ${t_range[*]} us, median $mr us"
echo "cp -a: runs ${t_cp[*]} us, median $mc us"
awk -v s="$ms" -v c="$mc" -v r="$mr" -v e="$entries" -v b="$bytes" -v t="$tree" 'BEGIN {
        printf "ratio snapshot/cp-a: %.3f (target <= 1.0); copy_file_range variant: %.3f\n", s / c, r / c
        printf "entries: %d, bytes: %d; %.0f entries/s, %.0f MB/s; tree %s\n", e, b, e / (s / 1e6), b / s, t
}'
