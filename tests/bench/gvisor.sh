#!/usr/bin/env bash
# Benchmark of a job's own time inside gVisor (issue 37, docs/performance.md), through the real
# daemon (runsc driver, concurrency 1, capsules started ahead), each row a ratio to the same
# command run natively in a copy of the same tree, measured in one run (alternating):
#   1. a generated CMake C project, edit-build-test loop (configure, build, ctest; build/ is a
#      cache path) after one line of one .c changed                            target <= 2.5
#   2. this project's `make -j2 build/tentaflake-worker` after one .c changed  target <= 3.0
#   3. the same `make` with nothing to do                                      target <= 2.0
#   4. an npm package's own test suite (qs's tape tests; needs the npm registry, else SKIP)
#                                                                              target <= 1.8
# Each row prints two ratios: "request" (request written to result.json read, what a controller
# waits) and "inside" (the command's own time, taken by `date` inside the capsule: gVisor's share
# without the worker's hand-out, take-in and changeset). The headline is "target / measured".
# Knobs (for measuring levers, docs/performance.md):
#   BENCH_RUNS (default 5)
#   BENCH_ROWS (default "1 1n 2 3 4 m"; 1n: row 1 with the Ninja generator, reported; m: the
#     breakdown's rows m1-m7, one mechanism each, reported; each can be named alone)
#   BENCH_RUNSC_FLAGS: extra global runsc flags, through a wrapper named as runtime.runsc
#   BENCH_STRACE=1: one more run of each row under runsc's --strace, not counted, its system
#     calls summed by tests/bench/strace-summary.py
#   BENCH_WARM_SECONDS: runtime.warm_seconds (default 600; 0: every capsule cold)
#   BENCH_PLATFORM: runtime.platform (default systrap, or ptrace for a runsc without it)
#   BENCH_DRIVER: runtime.driver, runsc (default) or runc (the host's kernel; no platform;
#     tests/bench/runc.sh runs both side by side)
# Never fails because a target is missed (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-5}
ROWS=${BENCH_ROWS:-1 1n 2 3 4 m}
WARM=${BENCH_WARM_SECONDS:-600}
BIN=$BUILD/tentaflake-worker
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_worker
# Row 1's toolchain: cmake is not among the worker's dependencies (scripts/install-deps).
if ! command -v cmake >/dev/null && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake >/dev/null || true
fi
for c in cmake ctest make cc; do
        command -v $c >/dev/null || { echo "gvisor.sh: $c missing (apt-get install cmake build-essential)" >&2; exit 1; }
done
bench_platform
PLATFORM=${BENCH_PLATFORM:-$PLATFORM}
NAME=bench-gvisor
UID_=12345

bench_base gvisor
daemon=
cleanup() {
        bench_cleanup "$NAME"
        [ -z "${ncg:-}" ] || rmdir "$ncg" 2>/dev/null || true
}
trap cleanup EXIT

# The workspace and its native twin: this project's sources as committed (rows 2, 3), a CMake
# project under cmk/ (row 1) and qs under qs/ (row 4).
ws=$base/ws nat=$base/native
mkdir -p "$ws" "$nat"
git archive HEAD | tar -x -C "$ws"
git archive HEAD | tar -x -C "$nat"

# shellcheck source=tests/bench/cmake-project.sh
. tests/bench/cmake-project.sh
gen_cmake "$ws"
gen_cmake "$nat"
# A system call's own cost (row m7): getppid in a loop, built here, the same binary both sides.
printf '#include <stdlib.h>\n#include <unistd.h>\nint main(int c, char **v) { long n = c > 1 ? atol(v[1]) : 0; for (long i = 0; i < n; i++) (void) getppid(); return 0; }\n' >"$base/sysloop.c"
cc -O2 -o "$ws/tfw-sysloop" "$base/sysloop.c"
cp "$ws/tfw-sysloop" "$nat/tfw-sysloop"
mkdir -p "$base/native-tmp"
chown -R $UID_:$UID_ "$ws" "$nat" "$base/native-tmp"

CACHE_PATHS='"build", "cmk/build", "cmk/build-ninja"'
# Row 4's tree, when npm can fetch it: qs 6.14.0 (as tests/bench/node-cache.sh row 3), only the
# devDependencies its tests require, no scripts. The workspace gets it without node_modules, and
# its cache gets node_modules through one job that unpacks a tar of it (the snapshot skips
# symlinks, node_modules/.bin has them).
SUITE=qs@6.14.0
TEST="node_modules/.bin/tape 'test/**/*.js'"
have_qs=0
prepare_qs() {
        command -v npm >/dev/null && command -v node >/dev/null || { echo "row 4: SKIP: npm or node missing"; return 0; }
        local t=$nat/qs
        mkdir -p "$t"
        if ! (cd "$base" && timeout 120 npm pack "$SUITE" >"$base/pack.log" 2>&1); then
                echo "row 4: SKIP: npm could not fetch $SUITE"
                return 0
        fi
        tar -xzf "$base"/qs-*.tgz -C "$t" --strip-components=1
        (cd "$t" && bench_test_devdeps_only)
        if ! (cd "$t" && timeout 600 npm install --no-audit --no-fund --ignore-scripts >"$base/npm.log" 2>&1); then
                echo "row 4: SKIP: npm could not install $SUITE's test devDependencies"
                return 0
        fi
        mkdir -p "$ws/qs"
        tar -C "$t" --exclude=./node_modules -cf - . | tar -C "$ws/qs" -xf -
        tar -C "$t/node_modules" -cf "$ws/qs/nm.tar" .
        chown -R $UID_:$UID_ "$ws/qs" "$t"
        CACHE_PATHS="$CACHE_PATHS, \"qs/node_modules\""
        have_qs=1
}
case " $ROWS " in *" 4 "*) prepare_qs ;; esac

# The runsc the worker runs: runsc itself, or a wrapper adding BENCH_RUNSC_FLAGS and what
# $base/runsc-extra holds at each start (BENCH_STRACE) before its arguments (global flags go
# before the subcommand).
runsc_key=
if [ -n "${BENCH_RUNSC_FLAGS:-}" ] || [ "${BENCH_STRACE:-0}" = 1 ]; then
        printf '#!/bin/sh\nexec %s %s $(cat %s/runsc-extra 2>/dev/null) "$@"\n' "$RUNSC" "${BENCH_RUNSC_FLAGS:-}" "$base" >"$base/runsc"
        chmod 0755 "$base/runsc"
        runsc_key="\"runsc\": \"$base/runsc\","
fi
cat >"$base/config.json" <<JSON
{"version": 1, "name": "$NAME", "workspace": "$ws",
 "container_uid": $UID_, "container_gid": $UID_, "concurrency": 1,
 "state_dir": "$base/state", "results_dir": "$base/results",
 "runtime": {$runsc_key $(bench_runtime_keys), "warm_seconds": $WARM},
 "cache": {"paths": [$CACHE_PATHS], "max_bytes": "2g", "max_entries": 200000},
 "limits": {"memory": "4g", "memory_swap": "4g", "max_log_bytes": "4m", "default_timeout_seconds": 1200,
            "max_timeout_seconds": 1200}}
JSON
bench_start_daemon "$BIN" "$base/config.json" "$base/daemon.log"
inbox=$ws/.tentaflake-worker/inbox

# timed CMD: a shell command that runs CMD and prints its own time as "tfw-inside-ms=N" (the
# same text natively and in the capsule); CMD's output goes to $TMPDIR, its tail on failure.
timed() {
        printf 't0=$(date +%%s%%N); (%s) >"$TMPDIR/tfw-bench.log" 2>&1 || { tail -20 "$TMPDIR/tfw-bench.log"; exit 1; }; t1=$(date +%%s%%N); echo tfw-inside-ms=$(((t1 - t0) / 1000000))' "$1"
}
# worker_run CMD: CMD (timed) as one request until its result.json; prints "REQUEST_MS INSIDE_MS".
worker_run() {
        bench_next_n
        local id=b$n argv
        echo "$id" >"$base/last"
        argv=$(python3 -c 'import json,sys; print(json.dumps(["sh","-c",sys.argv[1]]))' "$(timed "$1")")
        bench_write_request "$inbox" "$id" "$argv"
        bench_request "$inbox" "$base/results" "$id"
        echo "$REQ_MS $(sed -n 's/^tfw-inside-ms=//p' "$base/results/$id/job.log" | tail -1)"
}
# The native side runs in a CPU cgroup of its own beside the capsules' (lib.sh).
bench_native_cgroup
# native_run CMD: CMD (timed) in the native twin, as the capsule's uid with the capsule's
# environment (capsule/oci-spec.h; this host's own environment changes what python3 and node
# load at start), in that cgroup; prints "TOTAL_MS INSIDE_MS".
native_run() {
        local t0 t1 out
        t0=$(now_ms)
        out=$(cd "$nat" && { [ -z "$ncg" ] || echo $BASHPID >"$ncg/cgroup.procs"; } && setpriv --reuid $UID_ --regid $UID_ --clear-groups env -i \
                PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$nat" \
                TMPDIR="$base/native-tmp" LANG=C.UTF-8 sh -c "$(timed "$1")") ||
                { echo "gvisor.sh: natively, '$1' failed: $out" >&2; exit 1; }
        t1=$(now_ms)
        echo "$((t1 - t0)) ${out#tfw-inside-ms=}"
}
# as_ws CMD: CMD as the workspace's owner, as an agent edits it.
as_ws() { setpriv --reuid $UID_ --regid $UID_ --clear-groups sh -c "$1"; }
edit_line() { # edit_line DIR FILE: one line of one .c file changed
        printf '/* edit %s */\n' "$(date +%s%N)" >>"$1/$2"
}

# row NUM NAME TARGET EDIT_FILE CMD: the row's loop, RUNS times after two not counted (the
# first fills the cache, the second lets the capsule started ahead for the next be there).
row() {
        local num=$1 what=$2 target=$3 file=$4 cmd=$5 i a b wr=() wi=() ni=()
        for i in 0 1; do
                [ -z "$file" ] || { edit_line "$nat" "$file"; as_ws "$(declare -f edit_line); edit_line '$ws' '$file'"; }
                native_run "$cmd" >/dev/null
                worker_run "$cmd" >/dev/null
        done
        local l0
        l0=$(load)
        for i in $(seq "$RUNS"); do
                # BENCH_STRACE: the capsule booted after the last counted run is traced (with
                # warm capsules it boots as that run ends), and serves one more run, not counted.
                [ "${BENCH_STRACE:-0}" = 1 ] && [ "$i" = "$RUNS" ] && [ "$WARM" != 0 ] && strace_on "$num"
                if [ -n "$file" ]; then
                        edit_line "$nat" "$file"
                        as_ws "$(declare -f edit_line); edit_line '$ws' '$file'"
                fi
                read -r a b < <(native_run "$cmd")
                ni+=("$b") # the native side's own time (its total adds only setpriv and sh)
                read -r a b < <(worker_run "$cmd")
                wr+=("$a") wi+=("$b")
        done
        if [ "${BENCH_STRACE:-0}" = 1 ]; then
                [ "$WARM" != 0 ] || strace_on "$num"
                [ -z "$file" ] || as_ws "$(declare -f edit_line); edit_line '$ws' '$file'"
                read -r a b < <(worker_run "$cmd")
                : >"$base/runsc-extra"
                echo "  traced run: inside $b ms (under --strace); inside the sentry:"
                tests/bench/strace-summary.py "$(ls -S "$base/strace-$num"/*boot*.txt | head -1)" 15 | sed 's/^/    /'
                rm -rf "$base/strace-$num"
        fi
        local mwr mwi mni
        mwr=$(printf '%s\n' "${wr[@]}" | median) mwi=$(printf '%s\n' "${wi[@]}" | median)
        mni=$(printf '%s\n' "${ni[@]}" | median)
        echo "row $num: $what: target $target / measured $(ratio "$mwr" "$mni") (request), $(ratio "$mwi" "$mni") (inside)"
        echo "  worker request ${wr[*]} ms (median $mwr), inside ${wi[*]} ms (median $mwi);" \
                "natively ${ni[*]} ms (median $mni); load $l0 -> $(load)"
        echo "  the cache's hand-out $(cache_of hand_out_ms) ms, take-in $(cache_of take_in_ms) ms (last run)"
}
strace_on() { # strace_on ROW: the next capsule to boot runs under runsc's strace
        echo "--strace --debug --debug-log=$base/strace-$1/" >"$base/runsc-extra"
}

# mrow NAME: what the rows are made of, one mechanism each (docs/performance.md, "Breakdown").
mrow() {
        case $1 in
        m1) row m1 "200 fork+exec of /bin/true" report "" 'i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done' ;;
        m2) row m2 "512 MB of fresh memory written (page faults)" report "" "python3 -c 'b = bytes(1) * (512 << 20)'" ;;
        m3) row m3 "CPU only (python3, 30M additions)" report "" "python3 -c 'sum(range(30000000))'" ;;
        m4) row m4 "cc -O2 -c of one file" report "" 'cc -O2 -c cmk/src/m1.c -o "$TMPDIR/m1.o"' ;;
        m5) row m5 "find over /usr/include (stat, getdents)" report "" 'find /usr/include -name "*.h" | wc -l' ;;
        m6) row m6 "python3 -c pass (start-up: loader, imports)" report "" "python3 -c pass" ;;
        m7) row m7 "200,000 getppid system calls" report "" "./tfw-sysloop 200000" ;;
        esac
}
echo "runsc $("$RUNSC" --version | head -1 | cut -d' ' -f3), platform $PLATFORM, extra flags '${BENCH_RUNSC_FLAGS:-}', warm_seconds $WARM, $RUNS runs; load $(load)"
CMAKE='cmake -S cmk -B cmk/build -DCMAKE_BUILD_TYPE=Release && cmake --build cmk/build -j2 && cd cmk/build && ctest'
# Row 1n: the same loop with CMake's Ninja generator, which starts no cmake per target for
# dependency scanning and progress lines (docs/performance.md: processes are the cost).
NINJA='cmake -S cmk -B cmk/build-ninja -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build cmk/build-ninja -j2 && cd cmk/build-ninja && ctest'
MAKE='make -j2 build/tentaflake-worker'
for r in $ROWS; do
        case $r in
        1) row 1 "CMake project (40+4 .c), configure + build + ctest after 1 line changed" 2.5 cmk/src/m7.c "$CMAKE" ;;
        1n) if command -v ninja >/dev/null; then
                    row 1n "the same with cmake -G Ninja" report cmk/src/m7.c "$NINJA"
            else
                    echo "row 1n: SKIP: ninja missing"
            fi ;;
        2) row 2 "make -j2 build/tentaflake-worker after 1 .c changed" 3.0 common/log.c "$MAKE" ;;
        3) row 3 "make -j2 build/tentaflake-worker with nothing to do" 2.0 "" "$MAKE" ;;
        4) if [ $have_qs = 1 ]; then
                   echo "  seeding qs/node_modules: $(worker_run 'cd qs && mkdir -p node_modules && tar -xf nm.tar -C node_modules && rm nm.tar') ms"
                   rm -f "$ws/qs/nm.tar"
                   row 4 "$SUITE's tape tests ($TEST)" 1.8 "" "cd qs && $TEST"
           fi ;;
        m) for k in 1 2 3 4 5 6 7; do mrow m$k; done ;;
        m[1-7]) mrow "$r" ;;
        esac
done
echo "load average at the end: $(load)"
