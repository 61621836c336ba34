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
#
# BENCH_DRIVER=runc: both daemons on the runc driver, where the seccomp listener answers the
# job's connects (capsule/seccomp-listen.h), each with network.allow naming an upstream of the
# bench's own on the host; then also two connect-heavy jobs, timed inside the job: 2000 connects
# to a closed loopback port (each notifies the listener, which lets it on to the kernel),
# microseconds per connect; 100 HTTP requests through the proxy to the upstream, a new
# connection each, milliseconds per request; after and before.
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
upstream=
NETWORK=
if [ "${BENCH_DRIVER:-runsc}" = runc ]; then
        PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()' "$PORT" &
        upstream=$!
        NETWORK=", \"network\": {\"allow\": [\"127.0.0.1:$PORT\"]}"
fi
cleanup() {
        [ -z "$upstream" ] || kill "$upstream" 2>/dev/null || true
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
 "state_dir": "$d/state", "results_dir": "$d/results", "runtime": {$(bench_runtime_keys), "warm_seconds": 30}$NETWORK}
JSON
        bench_start_daemon "$2" "$d/config.json" "$d/daemon.log"
        daemons+=("$daemon")
        daemon=
}
one() { # one WHO [ARGV_JSON]: a request of WHO's (/bin/true), REQ_MS its time, LAST its id
        local d=$base/$1 inbox=$base/$1/ws/.tentaflake-worker/inbox
        bench_next_n
        bench_write_request "$inbox" "t$n" "${2:-[\"/bin/true\"]}"
        bench_request "$inbox" "$d/results" "t$n" "$1"
        LAST=$d/results/t$n
}
CONNECTS='["/usr/bin/python3", "-c", "import socket, time\nt = time.monotonic()\nfor _ in range(2000):\n    s = socket.socket()\n    try: s.connect((\"127.0.0.1\", 1))\n    except OSError: pass\n    s.close()\nprint(\"us_per_connect=%.1f\" % ((time.monotonic() - t) * 1e6 / 2000))"]'
connects() { # connects WHO: the connect-heavy job's microseconds per connect
        one "$1" "$CONNECTS"
        sed -n 's/^us_per_connect=//p' "$LAST/job.log"
}
FETCHES='["/usr/bin/python3", "-c", "import os, time, urllib.request\no = urllib.request.build_opener(urllib.request.ProxyHandler({\"http\": os.environ[\"http_proxy\"]}))\nt = time.monotonic()\nfor _ in range(100):\n    o.open(\"http://127.0.0.1:'"${PORT:-0}"'/\").read()\nprint(\"ms_per_request=%.2f\" % ((time.monotonic() - t) * 1e3 / 100))"]'
fetches() { # fetches WHO: the proxied job's milliseconds per request
        one "$1" "$FETCHES"
        sed -n 's/^ms_per_request=//p' "$LAST/job.log"
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
[ "${BENCH_DRIVER:-runsc}" = runc ] || exit 0
after=() before=()
for _ in $(seq "$RUNS"); do
        after+=("$(connects after)")
        [ -z "$BEFORE" ] || before+=("$(connects before)")
done
a=$(printf '%s\n' "${after[@]}" | median)
echo "connect to loopback, inside the job, with the listener: ${after[*]} us (median $a, load $(load))"
if [ -n "$BEFORE" ]; then
        b=$(printf '%s\n' "${before[@]}" | median)
        echo "connect to loopback, inside the job, before the listener: ${before[*]} us (median $b)"
        echo "ratio after / before: $(ratio "$a" "$b")"
fi
after=() before=()
for _ in $(seq "$RUNS"); do
        after+=("$(fetches after)")
        [ -z "$BEFORE" ] || before+=("$(fetches before)")
done
a=$(printf '%s\n' "${after[@]}" | median)
echo "an HTTP request through the proxy, inside the job, with the listener: ${after[*]} ms (median $a, load $(load))"
if [ -n "$BEFORE" ]; then
        b=$(printf '%s\n' "${before[@]}" | median)
        echo "an HTTP request through the proxy, inside the job, before the listener: ${before[*]} ms (median $b)"
        echo "ratio after / before: $(ratio "$a" "$b")"
fi
