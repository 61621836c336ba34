#!/usr/bin/env bash
# Benchmark: a verified checkout from the validation server (tests/server/forge.py, the test
# double, on 127.0.0.1) against `git clone --no-local file://…` of the same repository (git
# verifies every object too). The checkout is what `serve` does before running a check: the
# manifest parsed and its git SHA-256 tree id recomputed, every blob downloaded over HTTP,
# hash-checked and written (tests/bench/bench-validation.c). A tree of 20,000 files, about
# 360 MB (sizes 200 B to 60 KB, random contents, 200 directories). Runs alternate between the
# two; prints medians of BENCH_RUNS (default 5), MB/s and the ratio checkout/clone
# (target <= 1.5). Then serve's kept checkout (issue 18 item 3): a lane's first checkout of the
# tree, then of a tree that differs by one blob, alternating between the two trees; prints
# medians and the ratio second/first (target <= 0.1).
#
# Environment: BUILD (default build), BENCH_RUNS (5), BENCH_FILES (20000), BENCH_DIR
# (default ${TMPDIR:-/var/tmp}).
set -euo pipefail

BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-5}
FILES=${BENCH_FILES:-20000}
BIN=$BUILD/tests/bench/bench-validation
# shellcheck source=tests/bench/lib.sh
. "$(dirname "$0")/lib.sh"
bench_need_bins "$BIN"
BIN=$(realpath "$BIN")
SRC=$(pwd)

work=$(mktemp -d -p "${BENCH_DIR:-${TMPDIR:-/var/tmp}}" tfw-bench-validation.XXXXXX)
forge=
trap '[ -n "$forge" ] && kill "$forge" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"

git init -q --object-format=sha256 repo
python3 - repo "$FILES" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(20261129)
blob = os.urandom(1 << 20)
for i in range(n):
    d = os.path.join(root, "d%02d" % (i % 20), "s%02d" % ((i // 20) % 10))
    if i < 200:
        os.makedirs(d, exist_ok=True)
    size = 200 + int(59800 * rng.random() ** 2.4)
    off = rng.randrange(0, len(blob) - size)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(blob[off:off + size])
PY
git -C repo add -A
git -C repo -c user.name=b -c user.email=b@b commit -qm bench
TREE=$(git -C repo rev-parse 'HEAD^{tree}')
BYTES=$(du -sb --exclude=.git repo | cut -f1)

echo "bench-token-$RANDOM" >token
python3 "$SRC/tests/server/forge.py" --repo repo --token-file token --port-file port >forge.log 2>&1 &
forge=$!
for _ in $(seq 100); do [ -e port ] && break; sleep 0.1; done
URL=http://127.0.0.1:$(cat port)
export TENTAFLAKE_TOKEN=$(cat token)

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# One untimed run of each first.
"$BIN" "$URL" acme/app "$TREE" warm-co >/dev/null
git clone -q --no-local "file://$work/repo" warm-clone
co=() cl=()
for i in $(seq "$RUNS"); do
        t0=$(date +%s.%N); git clone -q --no-local "file://$work/repo" "clone$i"; t1=$(date +%s.%N)
        cl+=("$(awk "BEGIN {print $t1 - $t0}")")
        out=$("$BIN" "$URL" acme/app "$TREE" "co$i")
        co+=("$(cut -d' ' -f3 <<<"$out")")
        [ "$(cut -d' ' -f2 <<<"$out")" = "$FILES" ] || { echo "validation.sh: wrong file count: $out" >&2; exit 1; }
done
mco=$(printf '%s\n' "${co[@]}" | median)
mcl=$(printf '%s\n' "${cl[@]}" | median)
echo "tree: $FILES files, $((BYTES / 1000000)) MB"
echo "verified checkout from the server: median ${mco}s, $(awk "BEGIN {printf \"%.1f\", $BYTES / 1000000 / $mco}") MB/s (runs: ${co[*]})"
echo "git clone --no-local file://:       median ${mcl}s, $(awk "BEGIN {printf \"%.1f\", $BYTES / 1000000 / $mcl}") MB/s (runs: ${cl[*]})"
echo "ratio checkout/clone: $(awk "BEGIN {printf \"%.2f\", $mco / $mcl}") (target <= 1.5)"

# Serve's kept checkout: the first checkout into a fresh lane, then a tree with one blob changed.
git -C repo -c user.name=b -c user.email=b@b commit -qm base --allow-empty
echo "one changed blob" >>repo/d00/s00/f00000
git -C repo add -A
git -C repo -c user.name=b -c user.email=b@b commit -qm one
TREE2=$(git -C repo rev-parse 'HEAD^{tree}')
first=() second=()
for i in $(seq "$RUNS"); do
        mkdir "lane$i"
        out=$("$BIN" "$URL" acme/app "$TREE" "lane$i" --kept)
        first+=("$(cut -d' ' -f3 <<<"$out")")
        t=$TREE2; [ $((i % 2)) = 0 ] && t=$TREE # alternate which tree is the second
        [ "$t" = "$TREE" ] && "$BIN" "$URL" acme/app "$TREE2" "lane$i" --kept >/dev/null
        out=$("$BIN" "$URL" acme/app "$t" "lane$i" --kept)
        second+=("$(cut -d' ' -f3 <<<"$out")")
        [ "$(cut -d' ' -f4 <<<"$out")" = 1 ] || { echo "validation.sh: the second checkout downloaded more than one blob: $out" >&2; exit 1; }
done
mf=$(printf '%s\n' "${first[@]}" | median)
ms=$(printf '%s\n' "${second[@]}" | median)
echo "kept checkout, first: median ${mf}s (runs: ${first[*]})"
echo "kept checkout, one blob changed: median ${ms}s (runs: ${second[*]}), 1 blob downloaded"
echo "ratio second/first: $(awk "BEGIN {printf \"%.3f\", $ms / $mf}") (target <= 0.1)"
