# The validation-plane test harness (sourced by test-serve*.sh after lib.sh): a real
# `git init --object-format=sha256` repository with a good tree ($TREE), one holding a
# symlink that leaves the checkout ($EVIL), $TREE and one more file ($FRESH), $TREE with one
# blob changed ($TREE2), the test-double forge of tests/server/ on a free
# port ($URL, token $TOKEN), a signing key ($tmp/ci.key, public key $PUB) and helpers to
# enqueue jobs, read the server's state and verify attestations. Workers are started with
# start_worker NAME [FLAGS...], which adds "${SERVE_FLAGS[@]}" (set by the test).
BIN=$(realpath "$BIN")
SRC=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(test_dir tfw-serve)
pids=()
MAIN=$BASHPID
cleanup() {
        [ "$BASHPID" = "$MAIN" ] || return 0  # never from a subshell
        for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
        wait 2>/dev/null
        rm -rf "$tmp"
        # the (empty) cgroup groups of this run's workers: their names hold $RUN
        local g
        [ -n "${RUN:-}" ] || return 0
        for g in $(find /sys/fs/cgroup -maxdepth 3 -type d -name "tentaflake-worker-serve-*$RUN*" -printf '%f\n' 2>/dev/null | sort -u); do
                remove_cgroup_group "$g"
        done
}
trap cleanup EXIT
cd "$tmp"

# ---- the repository: a good tree and one with a symlink leaving the checkout --------------
git init -q --object-format=sha256 repo
(cd repo && echo hello >ok.txt && mkdir d && echo sub >d/f && ln -s d/f inlink &&
        printf '#!/bin/sh\necho script-ran\n' >run.sh && chmod 755 run.sh &&
        printf '#!/bin/sh\ntr "\\000" "\\n" </proc/self/environ; cat /proc/self/mountinfo; ls -la /proc/self/fd; ls "$1" 2>&1\n' >probe.sh &&
        chmod 755 probe.sh &&
        git add -A && git -c user.name=t -c user.email=t@t commit -qm good)
TREE=$(git -C repo rev-parse 'HEAD^{tree}')
(cd repo && ln -s ../../etc/shadow evil && git add -A && git -c user.name=t -c user.email=t@t commit -qm evil)
EVIL=$(git -C repo rev-parse 'HEAD^{tree}')
# The good tree and one new file (a blob no checkout of $TREE has: it is downloaded), then the
# good tree with ok.txt changed (one blob differs from $TREE).
(cd repo && git rm -q evil && echo fresh >fresh.txt && git add -A && git -c user.name=t -c user.email=t@t commit -qm fresh)
FRESH=$(git -C repo rev-parse 'HEAD^{tree}')
(cd repo && git rm -q fresh.txt && echo hello2 >ok.txt && git add -A && git -c user.name=t -c user.email=t@t commit -qm two)
TREE2=$(git -C repo rev-parse 'HEAD^{tree}')

TOKEN=tok-$RANDOM-$RANDOM-secret
echo "$TOKEN" >token
python3 "$SRC/tests/server/forge.py" --repo repo --token-file token --port-file port --retry-scale 0 \
        >forge.log 2>&1 &
pids+=($!)
wait_file port 30 || { echo "FAIL: the test server did not start"; exit 1; }
URL=http://127.0.0.1:$(cat port)
"$BIN" keygen --out "$tmp/ci.key" --identity service:ci-1 >keygen.json
PUB=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["trusted_issuers"][0]["public_key"])' keygen.json)

# start_worker NAME [FLAGS...]: a worker labelled NAME-$RUN in the background, its pid in
# $wpid. The run id, the test's pid and a random number (two live tests never share a pid; "r"
# and "x" once each, so one run's id is never found inside another's), keeps container and cgroup
# names apart from a concurrent run's.
RUN=$(printf 'r%dx%05d' $$ $RANDOM)
start_worker() {
        local name=$1; shift
        TENTAFLAKE_TOKEN=$TOKEN "$BIN" serve --server "$URL" --key "$tmp/ci.key" --label "$name-$RUN" \
                --state-dir "$tmp/state-$name" --lease-secs 6 --wait-secs 1 --retry-after-secs 1 \
                "${SERVE_FLAGS[@]}" "$@" >"$name.log" 2>&1 &
        wpid=$!
        pids+=($wpid)
}

# enqueue ID TREE RUN_JSON [SWITCHES_JSON]
enqueue() {
        curl -sf -X POST "$URL/test/jobs" \
                -d "{\"id\":\"$1\",\"tree\":\"$2\",\"run\":$3,\"switches\":${4:-[]}}" >/dev/null
}
state() { curl -sf "$URL/test/state" >"$tmp/state.json" || { echo "FAIL: the test server is gone"; exit 1; }; }
# q PYTHON_EXPR: evaluate with jobs = {id: job} from the server's state
q() {
        state
        python3 -c "import json,sys; jobs={j['id']: j for j in json.load(open('$tmp/state.json'))['jobs']}; print($1)"
}
# wait_until PYTHON_CONDITION [SECONDS]: poll the server's state (a harness timeout, not a
# timing assertion)
wait_until() {
        local cond=$1 limit=${2:-120} i=0
        while [ "$(q "$cond")" != True ]; do
                i=$((i + 1))
                [ $i -gt $((limit * 4)) ] && { echo "timeout waiting for: $cond"; return 1; }
                sleep 0.25
        done
}
final() { wait_until "jobs['$1']['state'] in ('done', 'failed')" "${2:-120}"; }
events() { q "[h['event'] for h in jobs['$1']['history']]"; }
# attestation ID FILE: the attestation of the job's (single) completion into FILE
attestation() {
        state
        python3 -c "
import json,sys
j={j['id']: j for j in json.load(open('$tmp/state.json'))['jobs']}[sys.argv[1]]
c=[h for h in j['history'] if h['event']=='complete']
json.dump(c[-1]['attestation'], open(sys.argv[2],'w'))" "$1" "$2"
}
# wait_ready NAME: the worker has started its lanes (a signal sent before that could reach the
# shell's child before it execs the worker, and be lost)
wait_ready() { wait_log "$1" "claiming from"; }
# wait_log NAME PATTERN: the worker's log has a line matching PATTERN
wait_log() {
        local i=0
        until grep -q "$2" "$1.log" 2>/dev/null; do
                i=$((i + 1))
                [ $i -gt 400 ] && { echo "timeout waiting for $1 to start"; return 1; }
                sleep 0.25
        done
}
verify() { python3 "$SRC/tests/server/verify_attestation.py" "$PUB" "$@" >/dev/null; }
no_attestation() { [ "$(q "sum(1 for h in jobs['$1']['history'] if h.get('attestation'))")" = 0 ]; }
