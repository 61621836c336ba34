#!/usr/bin/env bash
# The build cache under the runc driver (docs/cache.md; docs/capsule-engines.md), with the real
# worker and runc: a job that changes a directory the cache already holds has its take-in kept.
# Init diffs the cache's overlay against the version it was handed after the job, as the job's
# uid and under the job's Landlock ruleset; that version's mount is detached by then, so no path
# from "/" reaches it and Landlock refused init's reads there ("cannot read what the job changed
# in '/work/build': Permission denied") until the ruleset granted reading beneath init's
# descriptors of it (capsule-init/landlock.h). Every later job then started from the first
# version of the cache: a `make` with nothing to do relinked every time (gvisor.sh row 3, 5x).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker
command -v runc >/dev/null || { echo "SKIP: runc is not installed"; exit 77; }

dir=$(test_dir tfw-it-runccache)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir"' EXIT
res=$dir/results
TFW_DRIVER=runc new_worker "$dir" ', "cache": {"paths": ["build"]}'

drain() { "$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log"; }
cache_field() { # cache_field ID FIELD: result.json's cache.FIELD of request ID
        python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cache"][sys.argv[2]])' "$res/$1/result.json" "$2"
}

drain # the first run makes the inbox
submit "$dir" c1 local-reversible '["sh","-c","mkdir -p build/sub && echo one >build/sub/a"]'
drain
check "c1 succeeded" test "$(result_field "$dir" c1 status)" = succeeded
check "c1's take-in was kept (an empty cache before it)" test "$(cache_field c1 kept)" = True

submit "$dir" c2 local-reversible '["sh","-c","cat build/sub/a && echo two >build/sub/b && echo uno >build/sub/a"]'
drain
check "c2 succeeded" test "$(result_field "$dir" c2 status)" = succeeded
check "c2 started from c1's cache" grep -qx one "$res/c2/job.log"
check "c2's take-in was kept though it changed a directory of the cache's version (got: $(cache_field c2 error): $(cache_field c2 message))" \
        test "$(cache_field c2 kept)" = True

submit "$dir" c3 local-reversible '["sh","-c","cat build/sub/a build/sub/b"]'
drain
check "c3 started from c2's cache" test "$(tr '\n' ' ' <"$res/c3/job.log")" = "uno two "
finish
