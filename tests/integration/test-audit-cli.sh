#!/usr/bin/env bash
# `tentaflake-worker audit verify` on a real audit log (issue 5; docs/audit.md): written by
# the real daemon (`drain`) and the operator's CLI, it passes; each kind of damage makes it
# exit 1 with one line naming the file and the line of the first break: an edited line, a
# deleted line, two lines swapped, a file truncated in the middle of a line. A torn last line
# is repaired by the next writer, visibly. Real runsc runs the one job.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-audit)
trap 'worker_cleanup "$dir"' EXIT
new_worker "$dir" ', "limits": {"memory": "256m", "memory_swap": "256m", "pids": 64}'
inbox="$dir/ws/.tentaflake-worker/inbox"
"$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log" # an empty first run makes the inbox
drop() {
        printf '%s' "$2" >"$inbox/.$1.tmp"
        mv "$inbox/.$1.tmp" "$inbox/$1"
}
drop ok1.json '{"version":1,"id":"ok1","action_class":"local-reversible","argv":["true"]}'
drop forb1.json '{"version":1,"id":"forb1","action_class":"forbidden","argv":["true"]}'
drop bad1.json '{"version":1,"id":"bad1","action_class":"local-reversible","argv":["true"],"x":1}'
drop pend1.json '{"version":1,"id":"pend1","action_class":"irreversible","argv":["true"]}'
drop pend2.json '{"version":1,"id":"pend2","action_class":"financial","argv":["true"]}'
"$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log"
check "drain ran" test -e "$dir/results/ok1/result.json"
SUDO_USER=alice "$BIN" --config "$dir/config.json" deny pend1 --reason "audit test" >/dev/null
log="$dir/state/audit/audit.jsonl"
n=$(wc -l <"$log")
check "a real log with enough lines ($n)" test "$n" -ge 12
cp "$log" "$dir/pristine"

# verify_fails WHAT LINE: audit verify exits 1 with one stderr line naming audit.jsonl and LINE.
verify_fails() {
        local out rc=0
        out=$("$BIN" --config "$dir/config.json" audit verify 2>&1 >/dev/null) || rc=$?
        check "$1: audit verify exits 1 (exit $rc)" test "$rc" = 1
        check "$1: the message names the file and line $2: $out" \
                grep -q "audit log broken at 'audit/audit.jsonl' line $2:" <<<"$out"
        check "$1: one line on stderr" test "$(wc -l <<<"$out")" = 1
        cp "$dir/pristine" "$log"
}
sedit() { python3 -c "$1" "$log"; } # edit the log with a few lines of Python (l: its lines)

out=$("$BIN" --config "$dir/config.json" audit verify)
check "audit verify passes on the real log (exit $?)" grep -q "audit log intact: $n lines in 1 file(s), seq 1..$n" <<<"$out"

# An edited line: the outcome of the forbidden request's rejection (line 5 or so), rewritten
# with valid JSON in canonical form, so only the chain can tell.
k=$(grep -n '"event":"rejected","id":"forb1"' "$log" | cut -d: -f1)
check "the forbidden rejection is in the log (line $k)" test -n "$k" -a "$k" -lt "$((n - 1))"
sed -i "${k}s/\"error\":\"forbidden\"/\"error\":\"forgiven\"/" "$log"
check "the edit changed the file" sh -c "! cmp -s '$log' '$dir/pristine'"
verify_fails "an edited line" "$k"

sed -i '4d' "$log"
verify_fails "a deleted line" 4

sed -i '3{h;d};4{G}' "$log" # swap lines 3 and 4
check "the swap kept every line" test "$(sort "$log" | md5sum)" = "$(sort "$dir/pristine" | md5sum)"
verify_fails "two lines swapped" 3

size=$(stat -c %s "$log")
truncate -s $((size / 2)) "$log"
cut_line=$(wc -l <"$log") # full lines before the cut
verify_fails "a file truncated in the middle of a line" "$((cut_line + 1))"

truncate -s $((size - 7)) "$log"
verify_fails "a torn last line" "$n"

check "the restored log passes again" quiet "$BIN" --config "$dir/config.json" audit verify

# A torn last line (a crash mid-write) is repaired by the next writer, and the repair is
# itself in the chain.
truncate -s $((size - 7)) "$log"
SUDO_USER=bob "$BIN" --config "$dir/config.json" deny pend2 >/dev/null
check "the next writer repaired the torn line" grep -q '"event":"audit-repaired"' "$log"
out=$("$BIN" --config "$dir/config.json" audit verify)
check "verify passes after the repair and reports it: $out" grep -q "repair" <<<"$out"
finish
