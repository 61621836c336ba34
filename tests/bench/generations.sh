#!/usr/bin/env bash
# Benchmark of snapshot generations (issue 18): a request in a workspace of at least 80k
# entries and 800 MB, made here from copies of /usr/share, /usr/include and /usr/lib/python3*,
# through the real daemon (runsc driver, concurrency 1, capsules started ahead), against a bare
# `runsc run` of the same command with the tree bind-mounted read-only at /work (same runsc,
# same platform). Alternating, medians of BENCH_RUNS (default 5):
#   1. /bin/true, nothing changed                         target <= 1.3
#   2. an import-heavy python program (modules of the tree) target <= 1.2
#   3. /bin/true after 1 file changed                     target <= 1.5
#   4. /bin/true after 1,000 files touched                target <= 2.0
# and the first request (the generation made from nothing), the walk time alone (from the
# daemon's "generation" lines: full walks and walks on the workspace's watch, apart), the
# store's size (state_dir/store.json: a tmpfs, so memory).
# Prints every number; never fails because a target is missed (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-5}
BIN=$BUILD/tentaflake-worker
for f in "$BIN" "$BUILD/tentaflake-capsule-init"; do
        [ -x "$f" ] || { echo "generations.sh: $f missing (make bench builds it)" >&2; exit 1; }
done
if [ "$(id -u)" -ne 0 ]; then
        echo "generations.sh: SKIP: the worker and runsc need root"
        exit 0
fi
command -v runsc >/dev/null || { echo "generations.sh: runsc missing" >&2; exit 1; }
BIN=$(realpath "$BIN")
PLATFORM=systrap
# Read whole: with pipefail, `grep -q` leaving early would fail runsc on SIGPIPE and pick ptrace.
case $(runsc flags 2>&1) in *systrap*) ;; *) PLATFORM=ptrace ;; esac # the platforms this runsc has

base=$(mktemp -d /var/lib/tfw-bench-gen.XXXXXX)
chmod 0755 "$base"
daemon=
cleanup() {
        if [ -n "$daemon" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
        local r c
        for r in /run/tentaflake-worker-bench-gen/runsc "$base/bare-root"; do
                [ -d "$r" ] || continue
                for c in $(runsc --root "$r" list -quiet 2>/dev/null); do runsc --root "$r" delete -force "$c" >/dev/null 2>&1; done
        done
        find /sys/fs/cgroup -maxdepth 5 -depth -type d -name '*bench-gen*' -exec rmdir {} + 2>/dev/null || true
        # The generation store outlives the daemon (docs/snapshot.md, "After a restart").
        awk -v b="$base/" '$1 == "tentaflake-store" && index($2, b) == 1 { print $2 }' /proc/self/mounts |
                while read -r m; do umount -l "$m" || true; done
        rm -rf /run/tentaflake-worker-bench-gen "$base"
}
trap cleanup EXIT

# The tree.
mkdir -p "$base/ws"
cp -a /usr/share "$base/ws/share"
cp -a /usr/include "$base/ws/include"
for p in /usr/lib/python3*; do [ -d "$p" ] && cp -a "$p" "$base/ws/$(basename "$p")"; done
find "$base/ws" \( -type p -o -type s -o -type b -o -type c \) -delete
chown -R 12345:12345 "$base/ws"
entries=$(find "$base/ws" | wc -l)
mb=$(du -sm "$base/ws" | cut -f1)
echo "workspace: $entries entries, $mb MB"
PY=$(basename "$(ls -d /usr/lib/python3.[0-9]* | head -1)")
IMPORTS="import json, email.mime.text, email.mime.multipart, http.client, urllib.request, xml.etree.ElementTree, xml.dom.minidom, asyncio, unittest, logging.handlers, argparse, decimal, fractions, statistics, csv, sqlite3, tarfile, zipfile, gzip, bz2, lzma, shutil, tempfile, subprocess, threading, concurrent.futures, multiprocessing, pickle, copy, pprint, difflib, textwrap, string, dataclasses, enum, typing, inspect, ast, dis, tokenize, pydoc, doctest, smtplib, imaplib, ftplib, poplib, socketserver, http.server, xmlrpc.client, html.parser, configparser, calendar, datetime, zoneinfo, uuid, hashlib, hmac, secrets, base64, binascii, struct, codecs, locale, gettext, optparse, getopt, shlex, glob, fnmatch, pathlib, platform, sysconfig"

# The bare run: the same runsc, the tree bind-mounted read-only at /work.
mkdir -p "$base/bare/rootfs" "$base/bare-root"
bare_spec() { # bare_spec ARGV_JSON
        python3 - "$base/bare/config.json" "$base/ws" "$1" <<'PY'
import json, sys
path, ws, argv = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
mounts = [{"destination": "/proc", "type": "proc", "source": "proc"},
          {"destination": "/work", "type": "bind", "source": ws, "options": ["rbind", "ro"]},
          {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"}]
for m in ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"]:
    mounts.append({"destination": m, "type": "bind", "source": m, "options": ["rbind", "ro"]})
spec = {"ociVersion": "1.0.2", "root": {"path": "rootfs", "readonly": True},
        "process": {"args": argv, "cwd": "/work", "user": {"uid": 12345, "gid": 12345},
                    "env": ["PATH=/usr/bin:/bin", "HOME=/work"]},
        "hostname": "bare", "mounts": mounts,
        "linux": {"namespaces": [{"type": t} for t in ["pid", "ipc", "uts", "mount", "network"]]}}
json.dump(spec, open(path, "w"))
PY
}
n_bare=0
bare_run() {
        n_bare=$((n_bare + 1))
        runsc --root "$base/bare-root" --network=none --platform=$PLATFORM run --bundle "$base/bare" "bare-$n_bare" \
                </dev/null >/dev/null 2>&1
}

cat >"$base/config.json" <<JSON
{"version": 1, "name": "bench-gen", "workspace": "$base/ws",
 "container_uid": 12345, "container_gid": 12345, "concurrency": 1,
 "state_dir": "$base/state", "results_dir": "$base/results",
 "runtime": {"platform": "$PLATFORM", "warm_seconds": 600},
 "limits": {"max_snapshot_bytes": "4g", "workspace_tmpfs": "4g", "max_store_bytes": "9g",
            "memory": "4g", "memory_swap": "4g"}}
JSON
"$BIN" --config "$base/config.json" run 2>"$base/daemon.log" &
daemon=$!
for _ in $(seq 600); do grep -qs ": watching '" "$base/daemon.log" && break; sleep 0.05; done
grep -q ": watching '" "$base/daemon.log" || { cat "$base/daemon.log"; echo "generations.sh: the daemon did not start" >&2; exit 1; }
inbox=$base/ws/.tentaflake-worker/inbox
n=0
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# worker_run ARGV_JSON: one request, rename into the inbox until its result.json; prints ms.
worker_run() {
        # The count lives in a file: worker_run runs in $(...) subshells too.
        n=$(($(cat "$base/n" 2>/dev/null || echo 0) + 1))
        echo "$n" >"$base/n"
        local id=b$n t0 t1
        printf '{"version":1,"id":"%s","action_class":"local-reversible","argv":%s}' "$id" "$1" >"$inbox/.$id"
        t0=$(now_ms)
        mv "$inbox/.$id" "$inbox/$id.json"
        while [ ! -e "$base/results/$id/result.json" ]; do sleep 0.005; done
        t1=$(now_ms)
        grep -q '"status": *"succeeded"' "$base/results/$id/result.json" || {
                echo "generations.sh: request $id did not succeed:" >&2; cat "$base/results/$id/result.json" >&2; cat "$base/results/$id/job.log" >&2; exit 1; }
        echo $((t1 - t0))
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
ms_bare() { local t0 t1; t0=$(now_ms); bare_run; t1=$(now_ms); echo $((t1 - t0)); }

TRUE='["/bin/true"]'
echo "first request (the generation made from nothing): $(worker_run "$TRUE") ms"
# The lane of the capsule started ahead is made from nothing too; then each lane once more,
# past the racy window of what the first walks read.
worker_run "$TRUE" >/dev/null
sleep 1.2
worker_run "$TRUE" >/dev/null
worker_run "$TRUE" >/dev/null

measure() { # measure LABEL TARGET ARGV_JSON BARE_ARGV_JSON PREPARE
        local label=$1 target=$2 argv=$3 bargv=$4 prep=$5 w=() b=() i
        for i in $(seq "$RUNS"); do
                bare_spec "$bargv"; b+=("$(ms_bare)")
                $prep
                w+=("$(worker_run "$argv")")
                # The lane of the next capsule started ahead was changed from two requests
                # back: one more request brings it up to date, not counted.
                $prep
                worker_run "$argv" >/dev/null
        done
        local mw mb
        mw=$(printf '%s\n' "${w[@]}" | median)
        mb=$(printf '%s\n' "${b[@]}" | median)
        echo "$label: worker ${w[*]} ms (median $mw), bare ${b[*]} ms (median $mb): ratio $(python3 -c "print(round($mw / max($mb, 1), 2))") (target $target)"
}
nothing() { :; }
one_file() { echo "x" >>"$base/ws/include/stdio.h"; }
thousand() { { find "$base/ws/share/doc" -type f -print0 || true; } | head -z -n 1000 | xargs -0 touch; }

measure "/bin/true, nothing changed" 1.3 "$TRUE" "$TRUE" nothing
measure "import-heavy python ($(echo "$IMPORTS" | tr ',' '\n' | wc -l) modules from the tree)" 1.2 \
        "[\"env\",\"PYTHONPATH=/work/$PY\",\"python3\",\"-c\",\"$IMPORTS\"]" \
        "[\"env\",\"PYTHONPATH=/work/$PY\",\"python3\",\"-c\",\"$IMPORTS\"]" nothing
measure "/bin/true after 1 file changed" 1.5 "$TRUE" "$TRUE" one_file
measure "/bin/true after 1,000 files touched" 2.0 "$TRUE" "$TRUE" thousand

# The walk alone, from the daemon's "generation" lines: a full walk (every directory read; the
# first requests, and what an overflow of the watch's queue falls back to) against a walk on the
# watch's word (only the directories the watch saw change read).
walk_times() { grep "generation [0-9a-f]*: .*$1" "$base/daemon.log" | sed 's/.*(\([0-9]*\) ms)$/\1/' | sort -n | tr '\n' ' '; }
echo "walk time alone, full walks (ms): $(walk_times 'a full walk')"
echo "walk time alone, on the watch's word (ms): $(walk_times "unchanged by the watch's word")"
python3 - "$base/state/store.json" "$mb" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("store: %d generations, %d MB in the store's tmpfs (memory), %d inodes; workspace %s MB"
      % (s["generations"], s["bytes"] // (1 << 20), s["inodes"], sys.argv[2]))
PY
