#!/usr/bin/env bash
# Benchmark of snapshot generations (issue 18): a request in a workspace of at least 80k
# entries and 800 MB, made here from copies of /usr/share, /usr/include and /usr/lib/python3*,
# through the real daemon (runsc driver, or BENCH_DRIVER=runc; concurrency 1, capsules started ahead), against a bare
# `runsc run` of the same command with the tree bind-mounted read-only at /work (same runsc,
# same platform; under BENCH_DRIVER=runc a bare `runc run` behind the walls bare_spec names,
# and every steady row's target is the runc engine's <= 1.5). Alternating, medians of BENCH_RUNS (default 5):
#   1. /bin/true, nothing changed                         target <= 1.3 (issue 51)
#   2. an import-heavy python program (modules of the tree) target <= 1.2
#   3. /bin/true after 1 file changed                     target <= 1.2 (issue 51)
#   4. /bin/true after 1,000 files touched                target <= 1.5 (issue 51)
# each steady row with its figure before the file system's mark (snapshot/fan-mark.h), measured
# by this script on 588cdd4 (BENCH_RUNS=3) and kept below as constants; BENCH_BEFORE_BUILD, a
# build directory of that commit, measures it again in the same run instead (a second daemon on
# the same tree afterwards: twice the time). Then the first request (the generation made from
# nothing: target <= 3 s, issue 51, against the figure before its copiers), the copy's cost per
# entry and per byte (bench_copy_cost), the walk time alone (from the daemon's "generation"
# lines: full walks and walks on the workspace's watch, apart), the store's size
# (state_dir/store.json: a tmpfs, so memory).
# Prints every number; never fails because a target is missed (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-5}
BIN=$BUILD/tentaflake-worker
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_worker "$BUILD/tests/bench/bench-gen-seed"
bench_platform

# The reference and its targets, by engine (issue 48). runsc: a bare `runsc run` (lib.sh's
# bench_bare_spec), the rows' own targets. runc: a bare `runc run` (lib.sh's
# bench_bare_runc_spec: a user namespace whose root owns nothing, every namespace, no
# capability, noNewPrivileges, a read-only root and system mounts, masked /proc paths, the
# worker's seccomp allow-list; not the worker's init, Landlock, limits or layer), every steady
# row's target <= 1.5 (worker ÷ bare runc).
if [ "${BENCH_DRIVER:-runsc}" = runc ]; then
        command -v runc >/dev/null || { echo "$ME: SKIP: runc is not installed"; exit 0; }
        bench_need_bins "$BUILD/tests/unit/test-seccomp-allowlist"
fi
bare_spec() { if [ "${BENCH_DRIVER:-runsc}" = runc ]; then bench_bare_runc_spec "$1"; else bench_bare_spec "$1"; fi; }
bare_ms() { if [ "${BENCH_DRIVER:-runsc}" = runc ]; then bench_bare_runc_ms; else bench_bare_ms; fi; }
steady_target() { if [ "${BENCH_DRIVER:-runsc}" = runc ]; then echo 1.5; else echo "$1"; fi; }

bench_base gen
daemon=
trap 'bench_cleanup bench-gen "$base/bare-root"' EXIT

# The tree.
bench_tree "$base/ws"
chown -R 12345:12345 "$base/ws"
entries=$(find "$base/ws" | wc -l)
mb=$(du -sm "$base/ws" | cut -f1)
echo "workspace: $entries entries, $mb MB"
PY=$(basename "$(ls -d /usr/lib/python3.[0-9]* | head -1)")
IMPORTS="import json, email.mime.text, email.mime.multipart, http.client, urllib.request, xml.etree.ElementTree, xml.dom.minidom, asyncio, unittest, logging.handlers, argparse, decimal, fractions, statistics, csv, sqlite3, tarfile, zipfile, gzip, bz2, lzma, shutil, tempfile, subprocess, threading, concurrent.futures, multiprocessing, pickle, copy, pprint, difflib, textwrap, string, dataclasses, enum, typing, inspect, ast, dis, tokenize, pydoc, doctest, smtplib, imaplib, ftplib, poplib, socketserver, http.server, xmlrpc.client, html.parser, configparser, calendar, datetime, zoneinfo, uuid, hashlib, hmac, secrets, base64, binascii, struct, codecs, locale, gettext, optparse, getopt, shlex, glob, fnmatch, pathlib, platform, sysconfig"

cat >"$base/config.json" <<JSON
{"version": 1, "name": "bench-gen", "workspace": "$base/ws",
 "container_uid": 12345, "container_gid": 12345, "concurrency": 1,
 "state_dir": "$base/state", "results_dir": "$base/results",
 "runtime": {$(bench_runtime_keys), "warm_seconds": 600},
 "limits": {"max_snapshot_bytes": "4g", "workspace_tmpfs": "4g", "max_store_bytes": "9g",
            "memory": "4g", "memory_swap": "4g"}}
JSON
bench_start_daemon "$BIN" "$base/config.json" "$base/daemon.log"
inbox=$base/ws/.tentaflake-worker/inbox
n=0
# worker_run ARGV_JSON: one request, rename into the inbox until its result.json; prints ms.
worker_run() {
        bench_next_n
        local id=b$n
        bench_write_request "$inbox" "$id" "$1"
        bench_request "$inbox" "$base/results" "$id"
        echo "$REQ_MS"
}

TRUE='["/bin/true"]'
# Before the copiers (588cdd4, one thread copying; BENCH_RUNS=3, load 4 to 7): 7,261 ms, its walk 6,161 ms.
echo "first request (the generation made from nothing): $(worker_run "$TRUE") ms (target 3000 ms; before: 7261 ms);" \
        "its walk: $(grep -m1 "kept 0 of" "$base/daemon.log" | sed 's/.*: \([0-9]* entries, [0-9]* bytes\).*(\([0-9]*\) ms)$/\1, \2 ms/'); load $(load)"
# The lane of the capsule started ahead is made from nothing too; then each lane once more,
# past the racy window of what the first walks read.
worker_run "$TRUE" >/dev/null
sleep 1.2
worker_run "$TRUE" >/dev/null
worker_run "$TRUE" >/dev/null
bench_copy_cost "$base/ws"

# The ratios before the file system's mark: every file the watch vouched for asked by stat on
# every request (this script on 588cdd4, BENCH_RUNS=3, 2026-12-07, load average 8.7 to 10.1
# from five other builds beside it: bare runsc 262 to 346 ms).
declare -A BEFORE=([nothing]=4.21 [py_row]=1.46 [one_file]=2.48 [thousand]=3.23)
BEFORE_FROM="588cdd4, BENCH_RUNS=3, load average 8.7 to 10.1"
measure() { # measure LABEL TARGET ARGV_JSON BARE_ARGV_JSON PREPARE
        local label=$1 target argv=$3 bargv=$4 prep=$5 w=() b=() i ids=
        target=$(steady_target "$2")
        for i in $(seq "$RUNS"); do
                bare_spec "$bargv"; b+=("$(bare_ms)")
                $prep
                w+=("$(worker_run "$argv")")
                ids+=" $(cat "$base/n")"
                # The lane of the next capsule started ahead was changed from two requests
                # back: one more request brings it up to date, not counted.
                $prep
                worker_run "$argv" >/dev/null
        done
        local mw mb
        mw=$(printf '%s\n' "${w[@]}" | median)
        mb=$(printf '%s\n' "${b[@]}" | median)
        RATIO[$prep]=$(ratio "$mw" "$mb")
        LABEL[$prep]=$label
        TARGET[$prep]=$target
        echo "$label: worker ${w[*]} ms (median $mw), bare ${b[*]} ms (median $mb): ratio ${RATIO[$prep]} (target $target)"
        bench_timing "$base/daemon.log" b "" "$ids"
}
declare -A LABEL=() TARGET=()
declare -A RATIO=()
nothing() { :; }
one_file() { echo "x" >>"$base/ws/include/stdio.h"; }
thousand() { { find "$base/ws/share/doc" -type f -print0 || true; } | head -z -n 1000 | xargs -0 touch; }

py_row() { :; }
steady_rows() {
        measure "/bin/true, nothing changed" 1.3 "$TRUE" "$TRUE" nothing
        measure "import-heavy python ($(echo "$IMPORTS" | tr ',' '\n' | wc -l) modules from the tree)" 1.2 \
                "[\"env\",\"PYTHONPATH=/work/$PY\",\"python3\",\"-c\",\"$IMPORTS\"]" \
                "[\"env\",\"PYTHONPATH=/work/$PY\",\"python3\",\"-c\",\"$IMPORTS\"]" py_row
        measure "/bin/true after 1 file changed" 1.2 "$TRUE" "$TRUE" one_file
        measure "/bin/true after 1,000 files touched" 1.5 "$TRUE" "$TRUE" thousand
}
steady_rows
declare -A AFTER=()
for k in "${!RATIO[@]}"; do AFTER[$k]=${RATIO[$k]}; done
# How many files each walk on the watch's word asked, and why (the daemon's log line), most
# frequent first.
echo "files asked on the watch's word:"
grep -o "[0-9]* files of them asked by stat: [^(]*([^)]*)[^)]*" "$base/daemon.log" | sort | uniq -c | sort -rn | head -8 |
        sed 's/^ */  /'
if [ -n "${BENCH_BEFORE_BUILD:-}" ]; then
        # The same rows by the build before the mark, on the same tree, right after.
        bench_stop_daemon
        bench_start_daemon "$(realpath "$BENCH_BEFORE_BUILD/tentaflake-worker")" "$base/config.json" "$base/daemon-before.log"
        for i in 1 2 3; do worker_run "$TRUE" >/dev/null; done
        echo "before (BENCH_BEFORE_BUILD=$BENCH_BEFORE_BUILD):"
        steady_rows
        for k in "${!RATIO[@]}"; do BEFORE[$k]=${RATIO[$k]}; done
        BEFORE_FROM="$BENCH_BEFORE_BUILD, measured after the rows above, load average $(cut -d' ' -f1-3 /proc/loadavg)"
fi
echo "issue 51's steady rows (ratio to the bare ${BENCH_DRIVER:-runsc} run; before: $BEFORE_FROM):"
for k in nothing one_file thousand py_row; do
        echo "  ${LABEL[$k]}: ${AFTER[$k]} (target ${TARGET[$k]}; before ${BEFORE[$k]})"
done

# The walk alone, from the daemon's "generation" lines: a full walk (every directory read; the
# first requests, and what an overflow of the watch's queue falls back to) against a walk on the
# watch's word (only the directories the watch saw change read).
walk_times() { # walk_times PATTERN [LOG]
        grep "generation [0-9a-f]*: .*$1" "${2:-$base/daemon.log}" | sed 's/.*(\([0-9]*\) ms)$/\1/' | sort -n | tr '\n' ' '
}
echo "walk time alone, full walks (ms): $(walk_times 'a full walk')"
echo "walk time alone, on the watch's word (ms): $(walk_times "unchanged by the watch's word")"
if [ -n "${BENCH_BEFORE_BUILD:-}" ]; then
        echo "before, walk time alone, on the watch's word (ms): $(walk_times "unchanged by the watch's word" "$base/daemon-before.log")"
fi
python3 - "$base/state/store.json" "$mb" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("store: %d generations, %d MB in the store's tmpfs (memory), %d inodes; workspace %s MB"
      % (s["generations"], s["bytes"] // (1 << 20), s["inodes"], sys.argv[2]))
PY
