#!/usr/bin/env bash
# A refused output stream is not drained to its end (issue 33, finding 8; threats 3 and 5), with
# the real daemon and runsc. A job leaves a 100 GiB sparse file under artifacts/ or under a cache
# path, then ends by itself with its own exit status; each job asks for a 300 s timeout, so a
# capsule that streamed the file to its end would be reported timed_out:
#   - over the bound the host announced (max_artifact_bytes, cache.max_bytes): init refuses the
#     stream before it reads the file, and says so on the channel;
#   - within the bound, behind an entry the host's importer refuses (a control character in a
#     name): the host tells init to stop that stream, and init stops reading the file;
#   - in both, the job's own ending (status, exit code) is the result, and the output's error is
#     recorded (artifacts.error, cache.error); a refused artifacts stream does not stop the
#     cache's, which is kept.
# Cold capsules (the jobs at once) and capsules started ahead (one job at a time, each in the
# capsule that waits for it: its bounds and input come on the same channel, later).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=
trap '[ -n "$dir" ] && worker_cleanup "$dir"' EXIT

submit_job() { # submit_job ID SCRIPT: a local-reversible `sh -c SCRIPT` with a 300 s timeout
        local inbox=$dir/ws/.tentaflake-worker/inbox
        python3 -c 'import json,sys; print(json.dumps({"version": 1, "id": sys.argv[1], "action_class": "local-reversible",
                "argv": ["sh", "-c", sys.argv[2]], "timeout_seconds": 300}))' "$1" "$2" >"$inbox/.$1.tmp" &&
                mv "$inbox/.$1.tmp" "$inbox/$1.json"
}
field() { json_get "$dir/results/$1/result.json" "$2"; }
# ended ID STATUS EXIT: the job's own ending is the result (not timed_out).
ended() {
        local s e
        s=$(field "$1" 'r["status"]') e=$(field "$1" 'r.get("exit_code")')
        [ "$s" = "$2" ] && [ "$e" = "$3" ] && return 0
        echo "$1: status $s, exit_code $e ($(field "$1" 'r.get("message")')), expected $2 and $3"
        return 1
}
# says ID PY_EXPR TEXT: the field holds TEXT
says() {
        local v
        v=$(field "$1" "$2")
        grep -qF -- "$3" <<<"$v" && return 0
        echo "$1: $2 is '$v', expected it to hold '$3'"
        return 1
}

# The bad name: a directory whose name holds \001, which the importer refuses before the file.
BAD='d=$(printf "b\001"); mkdir -p'

warm_ready() { runsc --root "$root" list -quiet 2>/dev/null | grep -q "^tfw-$wname-warm-"; }
# run_jobs ID SCRIPT [ID SCRIPT ...]: cold, submitted at once; started ahead, one at a time, each
# once a capsule waits for it, and then run in it.
run_jobs() {
        local ids=()
        while [ $# -gt 0 ]; do
                if ((warm)); then
                        check "$name: a capsule waits for $1" wait_for 120 warm_ready
                        submit_job "$1" "$2"
                        check "$name: $1 ends" wait_result "$dir" "$1" 600
                        check "$name: $1 ran in a capsule started ahead" grep -q "job '$1': started in capsule 'warm-" "$dir/daemon.log"
                else
                        submit_job "$1" "$2"
                        ids+=("$1")
                fi
                shift 2
        done
        for j in "${ids[@]}"; do check "$name: $j ends" wait_result "$dir" "$j" 600; done
}
# prime ID: a first request, after which a capsule is started ahead (warm_seconds)
prime() { ((warm)) || return 0; submit_job "$1" true; check "$name: $1 ends" wait_result "$dir" "$1" 600; }

phase() { # phase NAME WARM_SECONDS
        local name=$1 warm=$2 p
        p=$( ((warm)) && echo w || echo c)
        echo "-- [$SECONDS s] $name"
        dir=$(test_dir tfw-it-refused); chmod 0755 "$dir"
        new_worker "$dir" ", \"concurrency\": 3, \"runtime\": {\"warm_seconds\": $warm},
 \"limits\": {\"max_artifact_bytes\": \"8m\"}, \"cache\": {\"paths\": [\"build\"], \"max_bytes\": \"8m\"}"
        wname=$(worker_name "$dir") root=$(runsc_root "$dir")
        start_daemon "$dir" || return 1
        prime "${p}p1"

        # Over the announced bound: refused in the capsule, the file never read.
        run_jobs "${p}a1" 'mkdir -p artifacts && truncate -s 100G artifacts/s && echo exiting-0' \
                "${p}c1" 'mkdir -p build && truncate -s 100G build/s && echo exiting-0' \
                "${p}x1" 'mkdir -p artifacts && truncate -s 100G artifacts/s; exit 3'
        check "$name: artifacts over the bound: the job's exit 0 survives" ended "${p}a1" succeeded 0
        check "$name: ... artifacts.error says which bound and which file" says "${p}a1" 'r["artifacts"]["error"]' "more than 8388608 bytes (at 's')"
        check "$name: ... the capsule did not send it" says "${p}a1" 'r["artifacts"]["error"]' "the capsule did not send it"
        check "$name: ... nothing of it kept" test "$(field "${p}a1" 'r["artifacts"]["files"]')" = 0
        check "$name: a cache over the bound: the job's exit 0 survives" ended "${p}c1" succeeded 0
        check "$name: ... cache.error" test "$(field "${p}c1" 'r["cache"]["error"]')" = cache_too_large
        check "$name: ... which file" says "${p}c1" 'r["cache"]["message"]' "(at 'build/s')"
        check "$name: ... not kept" test "$(field "${p}c1" 'r["cache"]["kept"]')" = False
        check "$name: a job that exits 3 with its artifacts over the bound: failed, exit 3" ended "${p}x1" failed 3
        check "$name: ... and the artifacts' error" says "${p}x1" 'r["artifacts"]["error"]' "more than 8388608 bytes"
        stop_daemon || true

        # Within the bound, behind an entry the importer refuses: the host stops the stream.
        python3 - "$dir/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["limits"]["max_artifact_bytes"] = "1024g"
c["cache"]["max_bytes"] = "200g"
json.dump(c, open(sys.argv[1], "w"))
PY
        start_daemon "$dir" || return 1
        prime "${p}p2"
        run_jobs "${p}a2" "$BAD"' "artifacts/$d" && truncate -s 100G "artifacts/$d/s" && echo exiting-0' \
                "${p}c2" "$BAD"' "build/$d" && truncate -s 100G "build/$d/s" && echo exiting-0' \
                "${p}b2" "$BAD"' "artifacts/$d" && truncate -s 100G "artifacts/$d/s" && echo small >build/small && exit 3'
        check "$name: artifacts the importer refused: the job's exit 0 survives" ended "${p}a2" succeeded 0
        check "$name: ... artifacts.error is the importer's" says "${p}a2" 'r["artifacts"]["error"]' "control character in the name"
        check "$name: a cache the importer refused: the job's exit 0 survives" ended "${p}c2" succeeded 0
        check "$name: ... cache.error is the importer's" test "$(field "${p}c2" 'r["cache"]["error"]')" = cache_rejected
        check "$name: ... not kept" test "$(field "${p}c2" 'r["cache"]["kept"]')" = False
        check "$name: refused artifacts, then the cache: failed, exit 3" ended "${p}b2" failed 3
        check "$name: ... the artifacts' error" says "${p}b2" 'r["artifacts"]["error"]' "control character in the name"
        check "$name: ... the cache still came: it is sent whole" test "$(field "${p}b2" 'r["cache"]["error"]')" = null
        check "$name: ... (its file)" test "$(field "${p}b2" 'r["cache"]["files_sent"]')" = 1
        stop_daemon || true
        worker_cleanup "$dir" >/dev/null 2>&1
        dir=
}

phase "capsules started for their job" 0
phase "capsules started ahead" 120
finish
