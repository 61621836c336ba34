#!/usr/bin/env bash
# Live output (issue 35, item 1; contract section 9): while a job runs, the worker appends the
# head of its job.log to <results>/<id>.live.log (root-owned, 0640, created O_EXCL|O_NOFOLLOW:
# a link left in its place is removed, never written through), and `submit` prints it as it
# comes, whole lines, a partial line after 1 s, then the rest of job.log at the end, nothing
# twice. MCP (mcp-client/live.mjs, the official SDK): progress notifications carry the new
# lines, bounded in size and rate, and result reads a running job's log from an offset. Every
# wait is an event (a line through a FIFO, a file appearing) bounded by a harness
# timeout, never a sleep as the assertion.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=$(test_dir i35-live)
chmod 0755 "$dir"
SUBMIT_PID=
trap '[ -n "$SUBMIT_PID" ] && kill "$SUBMIT_PID" 2>/dev/null; worker_cleanup "$dir"' EXIT
# A 1 MiB log cap: the 10 MB job below is cut to head, marker and tail.
new_worker "$dir" ', "limits": {"default_timeout_seconds": 60, "max_timeout_seconds": 120, "max_log_bytes": "1m"}'
ws="$dir/ws" res="$dir/results"
mkdir -p "$dir/bin" "$dir/out" "$dir/home"
install -m 0755 "${TFW_CONTROLLER_BIN:-$BIN}" "$dir/bin/tentaflake-worker"
chown 10000:10000 "$dir/out" "$dir/home"
CTL_BIN="$dir/bin/tentaflake-worker"
ctl() {
        (cd "$ws" && setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs \
                env -i PATH=/usr/bin:/bin HOME="$dir/home" "$CTL_BIN" "$@")
}
# live_submit NAME ID ARGV...: submit as the controller in the background, its stdout into the
# FIFO $dir/out/NAME.fifo (opened here on fd 3), stderr and exit status into NAME.err/.rc.
live_submit() {
        local name=$1 id=$2; shift 2
        mkfifo "$dir/out/$name.fifo"
        (ctl submit --id "$id" -- "$@" >"$dir/out/$name.fifo" 2>"$dir/out/$name.err"; echo $? >"$dir/out/$name.rc") &
        SUBMIT_PID=$!
        exec 3<"$dir/out/$name.fifo"
}
finished() { [ -e "$res/$1/result.json" ]; }
running() { _state_is "$dir" "$1" running; }
# rest NAME: the rest of submit's stdout into NAME.out (after what was read already), and its end.
rest() {
        cat <&3 >>"$dir/out/$1.out"
        exec 3<&-
        wait "$SUBMIT_PID"
        SUBMIT_PID=
}

start_daemon "$dir" || exit 1

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] five ticks a second apart: the first one arrives while the job runs"
live_submit ticks live-ticks sh -c 'for i in 1 2 3 4 5; do echo tick$i; sleep 1; done'
line=
read -r -t 60 line <&3
check "ticks: the first line is the first tick" test "$line" = tick1
check "ticks: it came while the job was running (no result yet)" sh -c "! test -e '$res/live-ticks/result.json'"
check "ticks: the state file says running" running live-ticks
check "ticks: the live log is there, root-owned, group container_gid, 0640" \
        test "$(stat -c %u:%g:%a "$res/live-ticks.live.log" 2>/dev/null)" = "0:10000:640"
check "ticks: the controller cannot write the live log" \
        sh -c "! setpriv --reuid=10000 --regid=10000 --clear-groups sh -c 'echo x >>\"$res/live-ticks.live.log\"' 2>/dev/null"
check "ticks: the controller can read the live log" \
        setpriv --reuid=10000 --regid=10000 --clear-groups grep -q tick1 "$res/live-ticks.live.log"
echo "$line" >"$dir/out/ticks.out"
rest ticks
check "ticks: exit status 0" test "$(cat "$dir/out/ticks.rc")" = 0
check "ticks: each tick printed once, in order" test "$(tr '\n' ' ' <"$dir/out/ticks.out")" = "tick1 tick2 tick3 tick4 tick5 "
check "ticks: stdout is job.log, byte for byte" cmp -s "$dir/out/ticks.out" "$res/live-ticks/job.log"
check "ticks: the live log is gone once job.log is there" _gone "$res/live-ticks.live.log"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] a partial line: printed after about a second, while the job still runs"
live_submit partial live-partial sh -c 'printf "no newline"; sleep 5; echo " and the end"; exit 3'
got=
read -r -t 60 -N 10 got <&3
check "partial: the partial line came" test "$got" = "no newline"
check "partial: while the job was running" sh -c "! test -e '$res/live-partial/result.json'"
printf %s "$got" >"$dir/out/partial.out"
rest partial
check "partial: exit status 3, unchanged" test "$(cat "$dir/out/partial.rc")" = 3
check "partial: printed once, then the rest" test "$(cat "$dir/out/partial.out")" = "no newline and the end"
check "partial: stdout is job.log, byte for byte" cmp -s "$dir/out/partial.out" "$res/live-partial/job.log"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] a burst larger than submit's read, then silence: all of it comes while the job runs"
live_submit burst live-burst sh -c 'seq 1 85000; exec sleep 6'
got=
while read -r -t 60 line <&3; do
        [ "$line" = 85000 ] && { got=yes; break; }
done
check "burst: its last line came" test "$got" = yes
check "burst: while the job was running (no result yet)" sh -c "! test -e '$res/live-burst/result.json'"
seq 1 85000 >"$dir/out/burst.out"
rest burst
check "burst: stdout is job.log, byte for byte" cmp -s "$dir/out/burst.out" "$res/live-burst/job.log"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] 10 MB fast: within the cap, the same head and tail as job.log"
live_submit flood live-flood sh -c 'seq 1 1400000; echo last line'
: >"$dir/out/flood.out"
rest flood
check "flood: exit status 0" test "$(cat "$dir/out/flood.rc")" = 0
check "flood: job.log was cut (the job wrote about 10 MB)" grep -q 'bytes omitted\]' "$res/live-flood/job.log"
check "flood: stdout within the 1 MiB cap" test "$(stat -c %s "$dir/out/flood.out")" -le 1048576
check "flood: stdout is job.log, byte for byte (head, marker, tail)" cmp -s "$dir/out/flood.out" "$res/live-flood/job.log"
check "flood: starts with the first line" test "$(head -n 1 "$dir/out/flood.out")" = 1
check "flood: ends with the last line" test "$(tail -n 1 "$dir/out/flood.out")" = "last line"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] a link where the live log goes is removed, never written through"
echo "root data" >"$dir/target"
ln -s "$dir/target" "$res/live-link.live.log"
live_submit link live-link sh -c 'echo through'
: >"$dir/out/link.out"
rest link
check "link: the job ran and printed" test "$(cat "$dir/out/link.out")" = through
check "link: the link's target is untouched" test "$(cat "$dir/target")" = "root data"
check "link: nothing is left in the live log's place" _gone "$res/live-link.live.log"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] the worker killed mid-job: the live log stays until recovery publishes the job"
live_submit crash live-crash sh -c 'echo before-the-crash; exec sleep 600'
line=
read -r -t 60 line <&3
check "crash: the job's line came live" test "$line" = before-the-crash
kill -KILL "$TFW_DAEMON_PID"
wait "$TFW_DAEMON_PID" 2>/dev/null
TFW_DAEMON_PID=
check "crash: the live log is still there, with what the job wrote" grep -qx before-the-crash "$res/live-crash.live.log"
start_daemon "$dir" || exit 1
echo "$line" >"$dir/out/crash.out"
rest crash
check "crash: published as interrupted" test "$(result_field "$dir" live-crash status)" = interrupted
check "crash: submit's exit status is 125" test "$(cat "$dir/out/crash.rc")" = 125
check "crash: the live log is gone" _gone "$res/live-crash.live.log"
check "crash: submit printed the line once" test "$(grep -c before-the-crash "$dir/out/crash.out")" = 1

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] MCP: progress notifications carry the output, result reads it from an offset"
if ! command -v node >/dev/null || ! command -v npm >/dev/null || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 18 ]; then
        echo "SKIP (this part): node 18 and npm are not installed"
else
        mkdir -p "$dir/client"
        cp tests/integration/mcp-client/package.json tests/integration/mcp-client/package-lock.json \
                tests/integration/mcp-client/live.mjs "$dir/client/"
        if ! (cd "$dir/client" && npm ci --ignore-scripts --no-audit --no-fund --prefer-offline --loglevel=error) \
                >"$dir/npm.log" 2>&1; then
                cat "$dir/npm.log"
                check "npm ci of the MCP SDK client" false
        else
                chmod -R a+rX "$dir/client"
                (cd "$ws" && setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs \
                        env -i PATH=/usr/bin:/bin HOME="$dir/home" node "$dir/client/live.mjs" "$CTL_BIN" "$ws" "$res" 1048576) \
                        >"$dir/live-mcp.out" 2>"$dir/live-mcp.err"
                client_rc=$?
                passes=$((passes + $(grep -c '^ok: ' "$dir/live-mcp.out")))
                fails=$((fails + $(grep -c '^FAIL: ' "$dir/live-mcp.out")))
                grep '^FAIL: ' "$dir/live-mcp.out"
                check "live.mjs passed (exit $client_rc)" test "$client_rc" = 0
                [ "$client_rc" = 0 ] || tail -n 20 "$dir/live-mcp.err"
        fi
fi

stop_daemon || true
finish
