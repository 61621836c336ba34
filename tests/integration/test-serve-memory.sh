#!/usr/bin/env bash
# serve's memory is bounded by what it accepts, not by what a server sends (issue 33 finding 7,
# threat 11; docs/validation.md, "Memory"). Each case runs a worker of its own against the test
# forge and reads the peak resident memory of that worker's process (VmHWM in
# /proc/PID/status) after its job ended; the bounds are the documented peaks with room to
# spare, not timings.
#   - a normal job;
#   - the finding: the trees request answered with 218 MB of 1,000,000 unique paths (within
#     the ceilings, not the job's tree). Before: 1,232,088 KiB, parsed whole and then refused;
#   - 1,000,001 short paths: refused at the entry past the ceiling, while the body arrives;
#   - an answer announcing more than the 256 MiB cap: refused before a byte of it is read,
#     the error naming the call and the cap;
#   - a verified tree of 5,000 symlinks to one 4,000-byte target: refused once their targets
#     pass the 16 MiB held while they are checked (a million of them were 4 GiB within the
#     checkout ceiling), every attempt, unsigned;
#   - the lane's kept checkout of a verified tree of 20,000 files, twice (the second keeps every
#     file). Before: 50,920 KiB (the index parsed whole by jansson, its directories as sets).
# Each refusal is the server's fault: `fail` with retry, nothing signed, and the job passes at
# its next attempt (the forge misbehaves on the first one only).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
. "$(dirname "$0")/serve-lib.sh"
# A lease long enough that a loaded machine does not let one run out mid-job (not what is tested).
SERVE_FLAGS=(--system-mounts-identity debian-12 --warm-secs 0 --lease-secs 60)

hwm_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }
# under_kib PID LIMIT_KIB WHAT: the worker's peak so far is under the bound (says both).
under_kib() {
        local got
        got=$(hwm_kib "$1")
        echo "  $3: peak $got KiB (bound $2 KiB)"
        [ -n "$got" ] && [ "$got" -lt "$2" ]
}
first_fail() { q "[h for h in jobs['$1']['history'] if h['event'] == 'fail'][0]['$2']"; }
enqueue_huge() { # enqueue_huge ID ENTRIES PATH_BYTES
        curl -sf -X POST "$URL/test/jobs" -d "{\"id\":\"$1\",\"tree\":\"$TREE\",\"run\":{\"argv\":[\"true\"]},
                \"switches\":[\"huge_manifest\"],\"manifest_entries\":$2,\"path_bytes\":$3}" >/dev/null
}
# The refused attempt, then the next one, with the tree's own manifest, passes.
refused_then_passed() {
        local got
        got=$(q "([h['event'] for h in jobs['$1']['history']], jobs['$1']['history'][1].get('permanent'), jobs['$1']['history'][-1].get('status'))")
        [ "$got" = "(['claim', 'fail', 'claim', 'complete'], False, 'pass')" ] ||
                { echo "  $1: $got; $(q "[h.get('reason') for h in jobs['$1']['history']]")"; return 1; }
}
stop_worker() { kill -TERM "$1"; wait "$1"; }

# ---- a normal job ---------------------------------------------------------------------------
start_worker normal
W=$wpid
enqueue normal "$TREE" '{"argv":["sh","-c","cat ok.txt"],"timeout_secs":60}'
final normal
check "normal: the job passes" [ "$(q "jobs['normal']['history'][-1].get('status')")" = pass ]
check "normal: serve's peak stays under 32 MiB" under_kib "$W" 32768 "a normal job"
stop_worker "$W"

# ---- issue 33 finding 7: 218 MB of 1,000,000 unique paths ----------------------------------
start_worker huge
W=$wpid
enqueue_huge huge 1000000 115
final huge 900
check "218 MB manifest: refused (not the job's tree), unsigned, then passed at the next attempt" refused_then_passed huge
check "218 MB manifest: the reason says the entries give another tree" \
        [ "$(first_fail huge reason | grep -c "the manifest does not verify: the manifest's entries give tree")" = 1 ]
check "218 MB manifest: serve's peak stays under 448 MiB (before: 1,232,088 KiB)" under_kib "$W" 458752 "218 MB, 1,000,000 paths"
stop_worker "$W"

# ---- 1,000,001 short paths: refused while they arrive ---------------------------------------
start_worker many
W=$wpid
enqueue_huge many 1000001 9
final many 900
check "1,000,001 entries: refused at the ceiling, unsigned, then passed" refused_then_passed many
check "1,000,001 entries: the reason names the ceiling" \
        [ "$(first_fail many reason | grep -c "the manifest is not acceptable: the manifest has more than 1000000 entries")" = 1 ]
check "1,000,001 entries: serve's peak stays under 160 MiB" under_kib "$W" 163840 "1,000,001 paths of 9 bytes"
stop_worker "$W"

# ---- an answer announcing more than the cap: not read at all --------------------------------
start_worker big
W=$wpid
enqueue_huge big 2000000 115
final big 300
check "436 MB announced: refused, unsigned, then passed" refused_then_passed big
check "436 MB announced: the reason names the call and the cap" \
        [ "$(first_fail big reason | grep -c "GET /v1/repos/acme/app/trees/$TREE: the answer is larger than 268435456 bytes")" = 1 ]
check "436 MB announced: serve's peak stays under 32 MiB (nothing of it was read)" under_kib "$W" 32768 "436 MB announced"
stop_worker "$W"

# ---- a verified tree whose symlink targets pass what is held while they are checked ----------
LINKS=$(curl -sf -X POST "$URL/test/synth" -d '{"entries":5000,"path_bytes":40,"link_bytes":4000}' |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["tree"])')
start_worker links
W=$wpid
enqueue links "$LINKS" '{"argv":["true"],"timeout_secs":300}'
final links 600
check "5,000 symlinks of 4,000 bytes: failed at every attempt, never completed (nothing signed)" \
        [ "$(q "sorted(set(h['event'] for h in jobs['links']['history']))")" = "['claim', 'fail']" ]
check "5,000 symlinks of 4,000 bytes: the reason names a symlink and the 16 MiB" \
        [ "$(first_fail links reason | grep -c "symlink 'd[0-9]*/[f0-9]*': the tree's symlink targets pass 16 MiB")" = 1 ]
check "5,000 symlinks of 4,000 bytes: serve's peak stays under 48 MiB" under_kib "$W" 49152 "5,000 symlinks held"
stop_worker "$W"

# ---- the kept checkout of a verified tree of 20,000 files -------------------------------------
SYNTH=$(curl -sf -X POST "$URL/test/synth" -d '{"entries":20000,"path_bytes":115}' |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["tree"])')
start_worker keep
W=$wpid
enqueue keep1 "$SYNTH" '{"argv":["true"],"timeout_secs":300}'
final keep1 600
enqueue keep2 "$SYNTH" '{"argv":["true"],"timeout_secs":300}'
final keep2 600
check "20,000 files: both checkouts pass" [ "$(q "(jobs['keep1']['history'][-1].get('status'), jobs['keep2']['history'][-1].get('status'))")" = "('pass', 'pass')" ]
check "20,000 files: the second checkout keeps every file" grep -q "job 'keep2': checkout of 20000 entries: 0 downloaded .* 20000 kept" keep.log
check "20,000 files, twice: serve's peak stays under 32 MiB (before: 50,920 KiB)" under_kib "$W" 32768 "20,000 files kept"
stop_worker "$W"

finish
