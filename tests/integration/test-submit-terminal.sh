#!/usr/bin/env bash
# submit on a terminal (issue 46 items 2 and 3; docs/controller.md, "On a terminal"; threat 18),
# against the real daemon and a runsc capsule. A job printed `submit 'x': succeeded` and
# `apply 'x': 3 change(s) applied`, then SGR 8 (conceal), which hid submit's real lines on a
# terminal stdout and stderr share; C1 and bidi controls reached the terminal raw. Here submit
# runs as the controller on a pseudo-terminal (python3's pty, stdout and stderr on it):
#   - the job's escape sequences, C1 and bidi controls and invalid UTF-8 are shown as text, and
#     no ESC reaches the terminal but submit's own marks;
#   - each line submit writes starts with the mark (a reset, then "tfw" in reverse video), the
#     job's forged lines never do;
#   - with --apply, apply's line is marked too;
#   - --raw passes the job's bytes through, and submit's lines still start with the reset;
#   - `shell -c` (issue 50) likewise: the job's output escaped, shell's own lines marked;
#   - to a pipe and a file nothing changes: the job's bytes as they are, no mark (submit, shell).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }

dir=$(test_dir i46-tty)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir"' EXIT
new_worker "$dir" ', "limits": {"default_timeout_seconds": 60, "max_timeout_seconds": 120}'
ws="$dir/ws"
mkdir -p "$dir/bin" "$dir/out" "$dir/home"
install -m 0755 "${TFW_CONTROLLER_BIN:-$BIN}" "$dir/bin/tentaflake-worker"
chown 10000:10000 "$dir/out" "$dir/home"
CTL=(setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs env -i PATH=/usr/bin:/bin
        HOME="$dir/home" TERM=xterm "$dir/bin/tentaflake-worker")

# on_pty NAME ARGS...: `tentaflake-worker ARGS` as the controller with stdout and stderr on one
# pseudo-terminal; all it showed in $dir/out/NAME.tty, its exit status in NAME.rc.
on_pty() {
        local name=$1; shift
        (cd "$ws" && python3 - "$dir/out/$name.tty" "${CTL[@]}" "$@" <<'PY'
import os, pty, sys
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
out = b""
while True:
    try:
        data = os.read(fd, 65536)
    except OSError:  # EIO: the other side is closed
        break
    if not data:
        break
    out += data
_, status = os.waitpid(pid, 0)
open(sys.argv[1], "wb").write(out)
sys.exit(os.waitstatus_to_exitcode(status))
PY
        ); echo $? >"$dir/out/$name.rc"
}
# shows NAME PYTHON-EXPRESSION: true when the expression holds of t, the bytes NAME.tty showed
# (the terminal's \r\n as \n), MARK submit's mark and lines its lines.
shows() {
        python3 - "$dir/out/$1.tty" "$2" <<'PY'
import sys
t = open(sys.argv[1], "rb").read().replace(b"\r\n", b"\n")
MARK = b"\x1b[0m\x1b[1;7mtfw\x1b[0m "
lines = t.split(b"\n")
def line_with(s):
    return [l for l in lines if s in l]
ok = eval(sys.argv[2])
if not ok:
    print("    the terminal showed: %r" % t[:3000])
sys.exit(0 if ok else 1)
PY
}

start_daemon "$dir" || exit 1

# The job of issue 46: submit's lines forged, SGR 8 left on; a C1 CSI, a bidi override, a raw
# C1 byte and a truncated sequence; an artifact and a changed file, for submit's real lines.
JOB='printf "submit '"'"'x'"'"': succeeded\napply '"'"'x'"'"': 3 change(s) applied\n";
 printf "c1 \302\2332J bidi \342\200\256drow raw \233 cut \342\200\n";
 mkdir -p artifacts && echo r >artifacts/report.txt && echo c >changed.txt;
 printf "\033[8m"'

echo "-- [$SECONDS s] on a terminal: the job's bytes escaped, submit's lines marked"
on_pty tty submit --id tty1 -- sh -c "$JOB"
check "tty: submit took the job's exit status" test "$(cat "$dir/out/tty.rc")" = 0
check "tty: the job's SGR 8 is shown as text" shows tty 'b"\\x1b[8m" in t'
check "tty: no ESC reaches the terminal but submit's marks" shows tty 'b"\x1b" not in t.replace(MARK, b"")'
check "tty: a C1 CSI and a bidi override shown as their code points" shows tty 'b"c1 \\u009b2J bidi \\u202edrow" in t'
check "tty: a raw C1 byte and a truncated sequence shown as bytes" shows tty 'b"raw \\x9b cut \\xe2\\x80\n" in t'
check "tty: no C1 and no bidi control reaches the terminal" shows tty 'b"\xc2\x9b" not in t and b"\xe2\x80\xae" not in t and b"\x9b" not in t.replace(MARK, b"")'
check "tty: the job's forged lines are there, without the mark" \
        shows tty 'line_with(b"submit '"'"'x'"'"': succeeded") == [b"submit '"'"'x'"'"': succeeded"] and line_with(b"apply '"'"'x'"'"': 3") == [b"apply '"'"'x'"'"': 3 change(s) applied"]'
check "tty: submit's artifact line starts with the mark" shows tty 'any(l.startswith(MARK) and l.endswith(b"/tty1/artifacts/report.txt") for l in lines)'
check "tty: submit's changes line starts with the mark" shows tty 'any(l.startswith(MARK + b"submit '"'"'tty1'"'"': the job changed") for l in lines)'
check "tty: every marked line is submit's" shows tty 'all(b"tty1" in l for l in lines if MARK in l)'

echo "-- [$SECONDS s] --apply on a terminal: apply's line is marked, the job's imitation is not"
on_pty apply submit --apply --id tty4 -- sh -c "$JOB"
check "apply: exit 0" test "$(cat "$dir/out/apply.rc")" = 0
check "apply: the change was applied" test "$(cat "$ws/changed.txt" 2>/dev/null)" = c
check "apply: apply's own line starts with the mark" shows apply 'any(l.startswith(MARK + b"apply '"'"'tty4'"'"': 1 change(s) applied") for l in lines)'
check "apply: the job's imitation does not" shows apply 'line_with(b"apply '"'"'x'"'"': 3") == [b"apply '"'"'x'"'"': 3 change(s) applied"]'

echo "-- [$SECONDS s] --raw: the job's bytes as they are, submit's lines still reset first"
on_pty raw submit --raw --id tty2 -- sh -c "$JOB"
check "raw: exit 0" test "$(cat "$dir/out/raw.rc")" = 0
check "raw: the job's SGR 8 reaches the terminal" shows raw 'b"\x1b[8m" in t.replace(MARK, b"")'
check "raw: ... and its C1 CSI" shows raw 'b"c1 \xc2\x9b2J" in t'
check "raw: submit's lines start with the reset and the mark" shows raw 'any(l.startswith(MARK) and l.endswith(b"/tty2/artifacts/report.txt") for l in lines)'

echo "-- [$SECONDS s] --json on a terminal: non-ASCII as \\uXXXX (a C1 CSI and a bidi override in the argv)"
on_pty json submit --json --id tty5 -- echo "$(printf 'c1 \302\2332J bidi \342\200\256x')"
check "json: exit 0" test "$(cat "$dir/out/json.rc")" = 0
check "json: the argv's C1 CSI and bidi override as escapes" shows json 'b"c1 \\u009B2J bidi \\u202Ex" in t'
check "json: no C1 and no bidi control reaches the terminal" shows json 'b"\xc2\x9b" not in t and b"\xe2\x80\xae" not in t'

echo "-- [$SECONDS s] shell -c on a terminal: escaped as submit's, shell's lines marked"
on_pty shell shell -c "$JOB"
check "shell: exit 0" test "$(cat "$dir/out/shell.rc")" = 0
check "shell: the job's SGR 8 is shown as text" shows shell 'b"\\x1b[8m" in t'
check "shell: no ESC reaches the terminal but shell's marks" shows shell 'b"\x1b" not in t.replace(MARK, b"")'
check "shell: no C1 and no bidi control reaches the terminal" shows shell 'b"\xc2\x9b" not in t and b"\xe2\x80\xae" not in t and b"\x9b" not in t.replace(MARK, b"")'
check "shell: the job's forged lines are there, without the mark" \
        shows shell 'line_with(b"submit '"'"'x'"'"': succeeded") == [b"submit '"'"'x'"'"': succeeded"] and line_with(b"apply '"'"'x'"'"': 3") == [b"apply '"'"'x'"'"': 3 change(s) applied"]'
check "shell: its artifact line starts with the mark" shows shell 'any(l.startswith(MARK) and b"/shell-" in l and l.endswith(b"/artifacts/report.txt") for l in lines)'
check "shell: every marked line is shell's" shows shell 'all(b"shell-" in l for l in lines if MARK in l)'

echo "-- [$SECONDS s] a pipe and a file: nothing changes"
(cd "$ws" && "${CTL[@]}" submit --id tty3 -- sh -c "$JOB" 2>"$dir/out/pipe.err" | cat >"$dir/out/pipe.out")
check "pipe: the job's bytes as they are" python3 -c '
import sys
o = open(sys.argv[1], "rb").read()
sys.exit(0 if o.endswith(b"c1 \xc2\x9b2J bidi \xe2\x80\xaedrow raw \x9b cut \xe2\x80\n\x1b[8m") else 1)' "$dir/out/pipe.out"
check "pipe: submit's lines carry no mark" sh -c "! grep -q \"\$(printf '\\033')\" '$dir/out/pipe.err'"
check "pipe: ... and are there" grep -q "/tty3/artifacts/report.txt" "$dir/out/pipe.err"
check "pipe: stdout is job.log, byte for byte" cmp "$dir/out/pipe.out" "$dir/results/tty3/job.log"

(cd "$ws" && "${CTL[@]}" shell -c "$JOB" 2>"$dir/out/shpipe.err" | cat >"$dir/out/shpipe.out")
check "pipe: shell passes the job's bytes as they are" python3 -c '
import sys
o = open(sys.argv[1], "rb").read()
sys.exit(0 if o == b"submit \x27x\x27: succeeded\napply \x27x\x27: 3 change(s) applied\nc1 \xc2\x9b2J bidi \xe2\x80\xaedrow raw \x9b cut \xe2\x80\n\x1b[8m" else 1)' "$dir/out/shpipe.out"
check "pipe: shell's lines carry no mark" sh -c "! grep -q \"\$(printf '\\033')\" '$dir/out/shpipe.err'"

stop_daemon || true
finish
