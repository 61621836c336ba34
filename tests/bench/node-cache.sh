#!/usr/bin/env bash
# Benchmark of the build cache with a node_modules tree (issue 34, docs/cache.md), through the
# real daemon (runsc driver, concurrency 1, capsules started ahead, cache.paths ["node_modules"]):
#   1. /bin/true with a node_modules cache of about 22k entries (npm install of a fixed package
#      list, made here natively) against the same with an empty cache; two workers, alternating
#                                                                            target <= 1.3
#   2. with that cache, a job that changes one file of the workspace (its changeset: one file)
#      against one that changes none                                         target <= 1.2
#   3. a real test suite (qs's tape tests, from its published tarball, its test devDependencies
#      installed by npm) through the worker against natively, alternating    target <= 1.5
#   4. a job whose changeset is 1,000 new files against one of 1 file (empty cache)  report
#   5. with the cache of row 1, a job that changes one file of the cache against one that
#      changes none (the next version made on the host)                         report
# Each worker's cache is seeded by one job that unpacks the tree into node_modules (a tar of it in
# the workspace, so node_modules/.bin's links stay; the workspace's snapshot skips symlinks).
# BENCH_RUNS (default 5) runs, medians. Needs npm and the npm registry: a row whose packages npm
# cannot fetch is skipped. Prints every number; never fails because a target is missed
# (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-5}
BIN=$BUILD/tentaflake-worker
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_worker
for c in node npm; do
        command -v $c >/dev/null || { echo "node-cache.sh: SKIP: $c missing"; exit 0; }
done
bench_platform

# Row 1's tree: about 22,200 entries, 165 MB (npm 10, node 20). Row 3's suite: qs 6.14.0, whose
# devDependencies npm can still resolve (6.17's ask for versions newer than some registries hold).
PACKAGES="@babel/core@7.29.17 @babel/preset-env@7.29.17 @types/node@26.6.11 core-js@3.51.0 eslint@10.16.0
 jest@30.5.2 lodash@4.18.1 lodash-es@4.18.1 mocha@12.0.3 ramda@0.32.0 rxjs@7.8.2 typescript@7.0.2 webpack@5.113.0"
SUITE=qs@6.14.0
TEST="node_modules/.bin/tape 'test/**/*.js'" # tape expands the quoted glob itself
WORKERS="bench-node-empty bench-node-full bench-node-suite"
UID_=12345

bench_base node
daemons=
cleanup() {
        local p w
        for p in $daemons; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
        for w in $WORKERS; do bench_kill_capsules "/run/tentaflake-worker-$w/runsc"; done
        bench_rm_cgroups bench-node
        for w in $WORKERS; do rm -rf "/run/tentaflake-worker-$w"; done
        bench_umount_store
        rm -rf "$base"
}
trap cleanup EXIT

# start_worker NAME: a daemon for the workspace $base/NAME/ws, its cache paths ["node_modules"].
start_worker() {
        local w=$1 d=$base/$1
        mkdir -p "$d/ws"
        chown -R $UID_:$UID_ "$d/ws"
        cat >"$d/config.json" <<JSON
{"version": 1, "name": "$w", "workspace": "$d/ws",
 "container_uid": $UID_, "container_gid": $UID_, "concurrency": 1,
 "state_dir": "$d/state", "results_dir": "$d/results",
 "runtime": {"platform": "$PLATFORM", "warm_seconds": 600},
 "cache": {"paths": ["node_modules"], "max_bytes": "1g", "max_entries": 100000},
 "limits": {"memory": "4g", "memory_swap": "4g", "max_log_bytes": "4m", "default_timeout_seconds": 1200,
            "max_timeout_seconds": 1200}}
JSON
        "$BIN" --config "$d/config.json" run 2>"$d/daemon.log" &
        daemons="$daemons $!"
        bench_wait_ready "$d/daemon.log" "the daemon $w"
}
stop_workers() {
        local p
        for p in $daemons; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
        daemons=
}
# worker_run NAME ARGV_JSON: one request until its result.json; prints ms. Its id is $base/last
# and $base/last-NAME.
worker_run() {
        bench_next_n
        local id=b$n
        echo "$1/results/$id" >"$base/last"
        echo "$1/results/$id" >"$base/last-$1"
        bench_write_request "$base/$1/ws/.tentaflake-worker/inbox" "$id" "$2"
        bench_request "$base/$1/ws/.tentaflake-worker/inbox" "$base/$1/results" "$id" "$1"
        echo "$REQ_MS"
}
cache_of() { # cache_of FIELD [NAME]: the last request's (of worker NAME's) result.json cache.FIELD
        python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cache"][sys.argv[2]])' \
                "$base/$(cat "$base/last${2:+-$2}")/result.json" "$1"
}
ws_files() { # ws_files NAME DIR: the workspace gets DIR's files but node_modules
        tar -C "$2" --exclude=./node_modules -cf - . | tar -C "$base/$1/ws" -xf -
        chown -R $UID_:$UID_ "$base/$1/ws"
}
# seed NAME DIR: the cache gets DIR/node_modules through one job that unpacks a tar of it; the
# tar leaves the workspace after.
SEED='["sh","-c","mkdir -p node_modules && tar -xf nm.tar -C node_modules && find node_modules | wc -l"]'
seed() {
        local ws=$base/$1/ws
        tar -C "$2/node_modules" -cf "$ws/nm.tar" .
        chown -R $UID_:$UID_ "$ws"
        echo "  seeding $1's cache: $(worker_run "$1" "$SEED") ms (cache left: $(cache_of entries) entries, $(cache_of bytes) bytes, $(cache_of files_sent) files sent)"
        rm -f "$ws/nm.tar"
}
npm_install() { # npm_install DIR ARGS...: prints nothing, fails as npm fails (its log in DIR.npm.log)
        local dir=$1
        shift
        (cd "$dir" && npm install --no-audit --no-fund --ignore-scripts "$@" >"$dir.npm.log" 2>&1)
}

TRUE='["/bin/true"]'
# 1. /bin/true with a full node_modules cache against an empty one.
row1() {
        local tree=$base/tree1
        mkdir -p "$tree"
        # shellcheck disable=SC2086 # the list is words
        if ! (cd "$tree" && npm init -y >/dev/null 2>&1) || ! npm_install "$tree" $PACKAGES; then
                echo "row 1: SKIP: npm could not install the package list:"
                grep -i "err" "$tree.npm.log" | head -5 | sed 's/^/  /' || true
                return 0
        fi
        local entries mb
        entries=$(find "$tree/node_modules" | wc -l)
        mb=$(du -sm "$tree/node_modules" | cut -f1)
        echo "row 1 tree: node_modules of $entries entries, $mb MB ($(echo "$PACKAGES" | wc -w) packages named)"
        start_worker bench-node-empty
        start_worker bench-node-full
        ws_files bench-node-empty "$tree"
        ws_files bench-node-full "$tree"
        seed bench-node-full "$tree"
        # The capsule started ahead for the next job runs on the other lane: two more each, not counted.
        local w e full=() empty=() ho=() ti=() i
        for w in 1 2; do
                worker_run bench-node-empty "$TRUE" >/dev/null
                worker_run bench-node-full "$TRUE" >/dev/null
        done
        for i in $(seq "$RUNS"); do
                if [ $((i % 2)) -eq 1 ]; then
                        empty+=("$(worker_run bench-node-empty "$TRUE")")
                        full+=("$(worker_run bench-node-full "$TRUE")")
                        ho+=("$(cache_of hand_out_ms)") ti+=("$(cache_of take_in_ms)")
                else
                        full+=("$(worker_run bench-node-full "$TRUE")")
                        ho+=("$(cache_of hand_out_ms)") ti+=("$(cache_of take_in_ms)")
                        empty+=("$(worker_run bench-node-empty "$TRUE")")
                fi
        done
        w=$(printf '%s\n' "${full[@]}" | median)
        e=$(printf '%s\n' "${empty[@]}" | median)
        echo "row 1: /bin/true with a node_modules cache of $(cache_of entries bench-node-full) entries: full ${full[*]} ms (median $w), empty cache ${empty[*]} ms (median $e): ratio $(ratio "$w" "$e") (target 1.3)"
        echo "  of which the cache's hand-out ${ho[*]} ms, take-in ${ti[*]} ms ($(cache_of files_unchanged bench-node-full) files unchanged, $(cache_of files_sent bench-node-full) sent)"
        row2
        row5
        row4
        stop_workers
}

changes_of() { # changes_of FIELD NAME: the last request of worker NAME's result.json changes.FIELD
        python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["changes"][sys.argv[2]])' \
                "$base/$(cat "$base/last-$2")/result.json" "$1"
}

# 2. With the full cache: one file of the workspace changed against none (both run sh).
NONE='["sh","-c",":"]'
ONE='["sh","-c","echo $$ >one.txt"]' # a builtin, as NONE's: the two run the same processes
row2() {
        local one=() none=() i a b
        for i in $(seq "$RUNS"); do
                none+=("$(worker_run bench-node-full "$NONE")")
                one+=("$(worker_run bench-node-full "$ONE")")
        done
        a=$(printf '%s\n' "${one[@]}" | median)
        b=$(printf '%s\n' "${none[@]}" | median)
        echo "row 2: with that cache, a job changing 1 file (changeset: $(changes_of added bench-node-full) added) ${one[*]} ms (median $a), changing none ${none[*]} ms (median $b): ratio $(ratio "$a" "$b") (target 1.2)"
}

# 5. With the full cache: a job that changes one file of the cache against one that changes
# none: the next version is made (the rest linked, the tree id computed) on the host.
CACHE_ONE='["sh","-c","echo $$ >node_modules/.bench-one"]'
row5() {
        local one=() none=() ti=() i a b
        for i in $(seq "$RUNS"); do
                none+=("$(worker_run bench-node-full "$NONE")")
                one+=("$(worker_run bench-node-full "$CACHE_ONE")")
                ti+=("$(cache_of take_in_ms)")
        done
        a=$(printf '%s\n' "${one[@]}" | median)
        b=$(printf '%s\n' "${none[@]}" | median)
        echo "row 5: with that cache, a job changing 1 file of it ${one[*]} ms (median $a), changing none ${none[*]} ms (median $b): ratio $(ratio "$a" "$b") (report)"
        echo "  of which the take-in ${ti[*]} ms ($(cache_of files_unchanged bench-node-full) files linked, $(cache_of files_sent bench-node-full) sent)"
}

# 4. A changeset of 1,000 new files against one of 1 (the empty-cache worker).
MANY='["sh","-c","mkdir -p many && i=0 && while [ $i -lt 1000 ]; do echo $i >many/f$i; i=$((i+1)); done"]'
row4() {
        local many=() one=() i a b
        for i in $(seq "$RUNS"); do
                one+=("$(worker_run bench-node-empty "$ONE")")
                many+=("$(worker_run bench-node-empty "$MANY")")
        done
        a=$(printf '%s\n' "${many[@]}" | median)
        b=$(printf '%s\n' "${one[@]}" | median)
        echo "row 4: a changeset of $(changes_of added bench-node-empty) new files ${many[*]} ms (median $a), of 1 file ${one[*]} ms (median $b): ratio $(ratio "$a" "$b") (report)"
}

# 3. A real test suite: natively against through the worker.
row3() {
        local tree=$base/tree3
        mkdir -p "$tree"
        if ! (cd "$base" && npm pack "$SUITE" >"$base/pack.log" 2>&1); then
                echo "row 3: SKIP: npm could not fetch $SUITE:"
                grep -i "err" "$base/pack.log" | head -5 | sed 's/^/  /' || true
                return 0
        fi
        tar -xzf "$base"/*.tgz -C "$tree" --strip-components=1
        if ! (cd "$tree" && [ -d test ] && bench_test_devdeps_only); then
                echo "row 3: SKIP: $SUITE's tarball ships no test/ directory node can read"
                return 0
        fi
        if ! npm_install "$tree"; then
                echo "row 3: SKIP: npm could not install $SUITE's test devDependencies:"
                grep -i "err" "$tree.npm.log" | head -5 | sed 's/^/  /' || true
                return 0
        fi
        native() { (cd "$tree" && sh -c "$TEST" >"$base/native.log" 2>&1); }
        if ! native; then
                echo "row 3: SKIP: $SUITE's tests fail natively:"
                tail -5 "$base/native.log" | sed 's/^/  /'
                return 0
        fi
        echo "row 3 suite: $SUITE, \`$TEST\`: $(grep -c '^ok ' "$base/native.log") assertions," \
                "node_modules of $(find "$tree/node_modules" | wc -l) entries"
        start_worker bench-node-suite
        ws_files bench-node-suite "$tree"
        seed bench-node-suite "$tree"
        local job w m t0 t1 wk=() nat=() ho=() ti=() i
        job=$(python3 -c 'import json,sys; print(json.dumps(["sh","-c",sys.argv[1]]))' "$TEST")
        worker_run bench-node-suite "$job" >/dev/null
        worker_run bench-node-suite "$job" >/dev/null
        for i in $(seq "$RUNS"); do
                t0=$(now_ms); native; t1=$(now_ms)
                nat+=($((t1 - t0)))
                wk+=("$(worker_run bench-node-suite "$job")")
                ho+=("$(cache_of hand_out_ms)") ti+=("$(cache_of take_in_ms)")
        done
        w=$(printf '%s\n' "${wk[@]}" | median)
        m=$(printf '%s\n' "${nat[@]}" | median)
        echo "row 3: $SUITE's test suite: worker ${wk[*]} ms (median $w), natively ${nat[*]} ms (median $m): ratio $(ratio "$w" "$m") (target 1.5)"
        echo "  of which the cache's hand-out ${ho[*]} ms, take-in ${ti[*]} ms ($(cache_of entries) entries)"
        stop_workers
}

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
row1
row3
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
