#!/usr/bin/env bash
# Benchmark of the walls in the result (issue 49): what collecting them costs a job that meets
# none. A real daemon (`run`, the runsc driver, an empty workspace, capsules started ahead),
# /bin/true from the rename of its request into the inbox until its result.json appears, back
# to back, median of BENCH_RUNS (default 21).
#
# With BENCH_BEFORE_BIN (a tentaflake-worker built without the walls, its init beside it), a
# second daemon of that build runs beside this one on a workspace of its own, and the requests
# alternate between the two, one each in turn, so that a machine loaded by others weighs on both
# alike; the ratio after / before is printed. Prints every number; never fails because of them.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-21}
BIN=$BUILD/tentaflake-worker
BEFORE=${BENCH_BEFORE_BIN:-}
ME=walls.sh
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_worker
[ -z "$BEFORE" ] || [ -x "$BEFORE" ] || { echo "$ME: BENCH_BEFORE_BIN '$BEFORE' is not executable" >&2; exit 1; }

bench_base walls
daemons=()
cleanup() {
        for d in "${daemons[@]}"; do kill -TERM "$d" 2>/dev/null || true; wait "$d" 2>/dev/null || true; done
        bench_kill_capsules /run/tentaflake-worker-bench-walls-after/runsc /run/tentaflake-worker-bench-walls-before/runsc
        bench_rm_cgroups bench-walls-
        bench_umount_store
        rm -rf /run/tentaflake-worker-bench-walls-after /run/tentaflake-worker-bench-walls-before "$base"
}
trap cleanup EXIT

start() { # start WHO BIN: the daemon of build WHO on $base/WHO
        local who=$1 d=$base/$1
        mkdir -p "$d/ws"
        chown 12345:12345 "$d/ws"
        cat >"$d/config.json" <<JSON
{"version": 1, "name": "bench-walls-$who", "workspace": "$d/ws",
 "container_uid": 12345, "container_gid": 12345, "concurrency": 1,
 "state_dir": "$d/state", "results_dir": "$d/results", "runtime": {"warm_seconds": 30}}
JSON
        bench_start_daemon "$2" "$d/config.json" "$d/daemon.log"
        daemons+=("$daemon")
        daemon=
}
one() { # one WHO: a /bin/true request of WHO's, REQ_MS its time
        local d=$base/$1 inbox=$base/$1/ws/.tentaflake-worker/inbox
        bench_next_n
        bench_write_request "$inbox" "t$n" '["/bin/true"]'
        bench_request "$inbox" "$d/results" "t$n" "$1"
}

start after "$BIN"
[ -z "$BEFORE" ] || start before "$BEFORE"
# The first of each starts cold; the rest run in capsules started ahead.
one after
[ -z "$BEFORE" ] || one before
after=() before=()
for _ in $(seq "$RUNS"); do
        one after
        after+=("$REQ_MS")
        if [ -n "$BEFORE" ]; then
                one before
                before+=("$REQ_MS")
        fi
done
a=$(printf '%s\n' "${after[@]}" | median)
echo "/bin/true, request to result, with the walls: ${after[*]} ms (median $a, load $(load))"
if [ -n "$BEFORE" ]; then
        b=$(printf '%s\n' "${before[@]}" | median)
        echo "/bin/true, request to result, before the walls: ${before[*]} ms (median $b)"
        echo "ratio after / before: $(ratio "$a" "$b")"
fi
