#!/usr/bin/env bash
# Benchmark of egress through the worker's proxy (docs/egress.md), with the real daemon (runsc
# driver, capsules started ahead) and curl inside the capsule:
#   1. a 100 MB download from a server on the host's loopback: curl's own time through the
#      proxy in a capsule (forward and CONNECT) against the same curl natively    target <= 1.5
#      (the native curl in a CPU cgroup of its own beside the capsules', as gvisor.sh's
#      native side: under load the scheduler shares CPU between groups, and the capsule's
#      curl with its proxy are one group of the worker's, a native curl at the root its own)
#      and, for what the engine itself costs (gVisor's netstack; under runc the host's
#      loopback), against the same curl in a capsule downloading from a server inside that
#      capsule over its own loopback (no proxy, no host)                             (report)
#   2. 100 small requests one after another (a new connection each), per request       (report)
#   3. `npm ci` of a small lockfile with registry.npmjs.org:443 allowlisted, request to result,
#      against the same natively with an empty cache; only where the registry answers  (report)
# BENCH_DRIVER=runc: the same through the runc driver (the host's kernel; tests/bench/runc.sh).
# BENCH_EGRESS_ROWS (default "1 2 3"): the rows run. BENCH_RUNS (default 3) runs each, medians.
# Prints every number; never fails because a target is missed (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${BENCH_RUNS:-3}
BIN=$BUILD/tentaflake-worker
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_worker "$BUILD/tentaflake-egress-proxy"
command -v curl >/dev/null || { echo "egress.sh: curl missing (scripts/install-deps)" >&2; exit 1; }
bench_platform

bench_base egress
daemon= srv=
cleanup() {
        [ -n "$srv" ] && kill "$srv" 2>/dev/null
        bench_cleanup bench-egress
        [ -z "${ncg:-}" ] || rmdir "$ncg" 2>/dev/null || true
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$base/srv" "$base/ws"
cp tests/integration/egress-server.py "$base/ws/"
python3 tests/integration/egress-server.py 127.0.0.1 "$PORT" "$base/srv" >"$base/srv/out" 2>&1 &
srv=$!
for _ in $(seq 200); do grep -qs ready "$base/srv/out" && break; sleep 0.05; done

ROWS=" ${BENCH_EGRESS_ROWS:-1 2 3} "
REGISTRY=0
if [[ $ROWS == *" 3 "* ]] && timeout 15 curl -sSf -o /dev/null https://registry.npmjs.org/is-number 2>/dev/null && command -v npm >/dev/null; then
        REGISTRY=1
        # A small lockfile, made once natively (its tarballs are fetched again by each npm ci).
        (cd "$base/ws" && printf '{"name":"bench","version":"1.0.0","private":true,"dependencies":{"is-number":"7.0.0","ms":"2.1.3","debug":"4.3.4","semver":"7.6.0"}}\n' >package.json &&
                HOME=$base/npmhome npm install --package-lock-only --ignore-scripts --no-audit --no-fund >/dev/null 2>&1)
fi
chown -R 12345:12345 "$base/ws"

cat >"$base/config.json" <<JSON
{"version": 1, "name": "bench-egress", "workspace": "$base/ws",
 "container_uid": 12345, "container_gid": 12345, "concurrency": 1,
 "state_dir": "$base/state", "results_dir": "$base/results",
 "runtime": {$(bench_runtime_keys), "warm_seconds": 600},
 "network": {"allow": ["127.0.0.1:$PORT", "registry.npmjs.org:443"], "max_download_bytes": "4g"},
 "limits": {"memory": "4g", "memory_swap": "4g", "default_timeout_seconds": 600, "max_timeout_seconds": 600}}
JSON
bench_start_daemon "$BIN" "$base/config.json" "$base/daemon.log"
bench_native_cgroup
inbox=$base/ws/.tentaflake-worker/inbox
# worker_run SCRIPT: one request running sh -c SCRIPT until its result; prints ms, the log in $base/log
worker_run() {
        local id n
        bench_next_n
        id=e$n
        python3 -c 'import json,sys; print(json.dumps({"version":1,"id":sys.argv[1],"action_class":"local-reversible","argv":["/bin/sh","-c",sys.argv[2]],"timeout_seconds":600}))' \
                "$id" "$1" >"$inbox/.$id"
        bench_request "$inbox" "$base/results" "$id"
        cp "$base/results/$id/job.log" "$base/log"
        echo "$REQ_MS"
}
# Not lib.sh's: curl's times are seconds with decimals, and the ratios are of them.
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ratio() { python3 -c "print(round($1 / max($2, 1e-9), 2))"; }

row1() { # 100 MB: curl's time_total (seconds) of the transfer alone, in the capsule and natively.
        MB100=104857600
        URL=http://127.0.0.1:$PORT/bytes/$MB100
        fwd=() con=() nat=()
        for _ in $(seq "$RUNS"); do
                worker_run "curl -sS -o /dev/null -w 'fwd=%{time_total} %{size_download}\n' $URL; curl -sS -p -o /dev/null -w 'con=%{time_total} %{size_download}\n' $URL" >/dev/null
                f=$(sed -n 's/^fwd=\([0-9.]*\) \([0-9]*\)$/\1 \2/p' "$base/log")
                c=$(sed -n 's/^con=\([0-9.]*\) \([0-9]*\)$/\1 \2/p' "$base/log")
                [ "${f#* }" = $MB100 ] && [ "${c#* }" = $MB100 ] || { echo "egress.sh: a download was short: $f / $c" >&2; cat "$base/log" >&2; exit 1; }
                fwd+=("${f% *}") con+=("${c% *}")
                nat+=("$({ [ -z "$ncg" ] || echo $BASHPID >"$ncg/cgroup.procs"; } && curl -sS --noproxy '*' -o /dev/null -w '%{time_total}' "$URL")")
        done
        mf=$(printf '%s\n' "${fwd[@]}" | median) mc=$(printf '%s\n' "${con[@]}" | median) mn=$(printf '%s\n' "${nat[@]}" | median)
        # The engine's own floor: the server inside the capsule, curl over the capsule's loopback.
        worker_run "mkdir -p /tmp/s; /usr/bin/python3 egress-server.py 127.0.0.1 9999 /tmp/s >/dev/null 2>&1 &
        while ! grep -qs . /tmp/s/received; do sleep 0.05; done
        for i in \$(seq $RUNS); do curl -sS --noproxy '*' -o /dev/null -w 'in=%{time_total}\n' http://127.0.0.1:9999/bytes/$MB100; done" >/dev/null
        inside=($(sed -n 's/^in=//p' "$base/log"))
        mi=$(printf '%s\n' "${inside[@]}" | median)
        echo "100 MB from the host's loopback: natively ${nat[*]} s (median $mn)"
        echo "  the engine's floor (${BENCH_DRIVER:-runsc}): the same curl in a capsule from a server inside it (no proxy): ${inside[*]} s (median $mi): ratio $(ratio "$mi" "$mn")"
        echo "  through the proxy in a capsule, forward: ${fwd[*]} s (median $mf): ratio $(ratio "$mf" "$mn") (target 1.5), $(ratio "$mf" "$mi") of the floor"
        echo "  through the proxy in a capsule, CONNECT: ${con[*]} s (median $mc): ratio $(ratio "$mc" "$mn") (target 1.5), $(ratio "$mc" "$mi") of the floor"
}

row2() { # 100 small requests, one connection each.
        small=() nsmall=()
        for _ in $(seq "$RUNS"); do
                worker_run "s=\$(date +%s%N); for i in \$(seq 100); do curl -sS -o /dev/null http://127.0.0.1:$PORT/hello; done; echo small=\$(( (\$(date +%s%N) - s) / 100000 ))" >/dev/null
                small+=("$(sed -n 's/^small=//p' "$base/log")")
                s=$(date +%s%N)
                for _ in $(seq 100); do curl -sS --noproxy '*' -o /dev/null "http://127.0.0.1:$PORT/hello"; done
                nsmall+=("$(( ($(date +%s%N) - s) / 100000 ))")
        done
        echo "one small request (a new connection each, curl started each time), in 1/100 ms: capsule ${small[*]}, natively ${nsmall[*]}"
}

row3() { # npm ci of a small lockfile.
        if [ "$REGISTRY" = 1 ]; then
                w=() n=()
                for _ in $(seq "$RUNS"); do
                        w+=("$(worker_run "rm -rf node_modules /tmp/npm-cache; npm ci --cache /tmp/npm-cache --ignore-scripts --no-audit --no-fund --no-update-notifier --loglevel=error && ls node_modules | wc -l")")
                        pkgs=$(tail -1 "$base/log")
                        rm -rf "$base/native" && mkdir -p "$base/native" && cp "$base/ws/package.json" "$base/ws/package-lock.json" "$base/native/"
                        t0=$(now_ms)
                        (cd "$base/native" && HOME=$base/npmhome npm ci --cache "$base/native-cache-$RANDOM" --ignore-scripts --no-audit --no-fund --no-update-notifier --loglevel=error >/dev/null)
                        n+=($(($(now_ms) - t0)))
                done
                conns=$(python3 -c 'import json,sys; n=json.load(open(sys.argv[1]))["network"]; print("%d connections, %d bytes down" % (len(n["connections"]), n["bytes_down"]))' \
                        "$base/results/e$(cat "$base/n")/result.json")
                mw=$(printf '%s\n' "${w[@]}" | median) mn=$(printf '%s\n' "${n[@]}" | median)
                echo "npm ci of $pkgs packages, registry.npmjs.org:443 allowlisted: worker ${w[*]} ms (median $mw, request to result; $conns), natively ${n[*]} ms (median $mn): ratio $(ratio "$mw" "$mn") (report)"
        else
                echo "npm ci: skipped: registry.npmjs.org does not answer from here (or npm is missing)"
        fi
}

worker_run "true" >/dev/null # the first capsule starts cold; the rest run in capsules started ahead
for r in $ROWS; do "row$r"; done
