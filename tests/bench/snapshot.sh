#!/usr/bin/env bash
# Benchmark: snapshot (copy + git SHA-256 tree id) against `cp -a` of the same tree, to the same
# filesystem. A generated tree of 20,000 files, about 360 MB, sizes 200 B to 60 KB, in 220
# directories. Runs alternate between the two (and which goes first), so the machine's drift
# hits both alike; the read/write copy method is timed too, so the choice of the default
# (copy_file_range, then hash the copy) stays measured. Prints wall-clock medians, the ratio snapshot/cp -a (target <= 1.0),
# the median of the per-pair ratios, CPU medians and entries per second.
#
# Copies are kept until the end, and nothing is deleted before a run: on an ext4 without a
# journal, creating files soon after deleting many makes every create scan the recently deleted
# inodes (measured here: 1 s runs became 15 s), and on a VM that hands freed memory back to the
# host, the next run would pay for faulting it in again. One untimed run of each comes first.
#
# Environment: BUILD (default build), BENCH_RUNS (default 5), BENCH_FILES (default 20000),
# BENCH_DIR (default ${TMPDIR:-/var/tmp}).
set -euo pipefail

BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-5}
FILES=${BENCH_FILES:-20000}
BIN=$BUILD/tests/bench/bench-snapshot
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_need_bins "$BIN"
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

# One timed command: appends "wall user+sys" in milliseconds to the named array. The bash
# `time` keyword needs no external tool; CPU time counts every thread (the hasher's too).
TIMEFORMAT='%R %U %S'
timed() { # $1: array name, rest: command
        local arr=$1 t
        shift
        t=$({ time "$@" >"$work/last.out"; } 2>&1) || { echo "snapshot.sh: $* failed: $t" >&2; exit 1; }
        eval "$arr+=(\"$(awk '{printf "%d %d", $1 * 1000, ($2 + $3) * 1000}' <<<"$t")\")"
}

# The snapshot sets the group of every entry as the worker does (cp -a preserves ownership).
# Our own group works as root and as a user.
gid=$(id -g)
# Warm the page cache for the source, untimed.
"$BIN" --gid "$gid" "$work/src" "$work" snap-warm >/dev/null
cp -a "$work/src" "$work/cp-warm"

declare -a snap cpa rw
for ((i = 0; i < RUNS; i++)); do
        # Alternate which goes first, so neither always inherits the other's dirty pages.
        if ((i % 2 == 0)); then
                timed snap "$BIN" --copy auto --gid "$gid" "$work/src" "$work" "snap-$i"
                cp "$work/last.out" "$work/summary"
                timed cpa cp -a "$work/src" "$work/cp-$i"
        else
                timed cpa cp -a "$work/src" "$work/cp-$i"
                timed snap "$BIN" --copy auto --gid "$gid" "$work/src" "$work" "snap-$i"
                cp "$work/last.out" "$work/summary"
        fi
        timed rw "$BIN" --copy rw --gid "$gid" "$work/src" "$work" "rw-$i"
done

out=$(cat "$work/summary")
entries=$(sed -n 's/.* entries=\([0-9]*\).*/\1/p' <<<"$out")
bytes=$(sed -n 's/^bytes=\([0-9]*\).*/\1/p' <<<"$out")
tree=$(sed -n 's/.* tree=\([0-9a-f]*\).*/\1/p' <<<"$out")

col() { local c=$1; shift; printf '%s\n' "$@" | awk -v c="$c" '{print $c}'; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# Per-run ratios pair each snapshot with the cp -a next to it: the machine's drift during the
# benchmark cancels out of each pair.
pair_ratio() { paste <(col 1 "${!1}") <(col 1 "${cpa[@]}") | awk '{print $1 / $2}' | median; }

ms=$(col 1 "${snap[@]}" | median); mc=$(col 1 "${cpa[@]}" | median); mr=$(col 1 "${rw[@]}" | median)
cs=$(col 2 "${snap[@]}" | median); cc=$(col 2 "${cpa[@]}" | median); cr=$(col 2 "${rw[@]}" | median)
echo "wall ms, snapshot (default, copy_file_range): $(col 1 "${snap[@]}" | tr '\n' ' ')-> median $ms"
echo "wall ms, snapshot (read/write):               $(col 1 "${rw[@]}" | tr '\n' ' ')-> median $mr"
echo "wall ms, cp -a:                               $(col 1 "${cpa[@]}" | tr '\n' ' ')-> median $mc"
echo "cpu ms (user+sys, all threads), medians: snapshot $cs, read/write $cr, cp -a $cc"
awk -v s="$ms" -v c="$mc" -v r="$mr" -v ps="$(pair_ratio 'snap[@]')" -v pr="$(pair_ratio 'rw[@]')" \
    -v e="$entries" -v b="$bytes" -v t="$tree" 'BEGIN {
        printf "ratio snapshot/cp-a (medians): %.3f (target <= 1.0); median of paired ratios: %.3f\n", s / c, ps
        printf "read/write variant: ratio %.3f, paired %.3f\n", r / c, pr
        printf "entries: %d, bytes: %d; %.0f entries/s, %.0f MB/s; tree %s\n", e, b, e / (s / 1e3), b / s / 1e3, t
}'
