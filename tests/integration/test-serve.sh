#!/usr/bin/env bash
# The validation plane end to end (contract section 8; threats 7 and 11): real workers
# (`tentaflake-worker serve`, real runsc) against the test-double forge of tests/server/,
# which serves a real `git init --object-format=sha256` repository.
#   - a passing and a failing check end as a signed pass and a signed fail, each verified by
#     an implementation that is not ours (Python's DSSE PAE + `openssl pkeyutl -verify -rawin`)
#     and naming the right tree and environment digest;
#   - every misbehaviour of the server ends as the CI worker page's table says, and nothing is
#     signed for a worker fault: wrong blob / wrong manifest -> retried, never signed, failed
#     after 5 attempts; a ".." path and an outward symlink -> permanent failure; stale ->
#     completed as stale without attestation; lease lost -> check killed, result dropped, job
#     handed out again; 401 -> the worker stops with the server's message;
#   - ceilings, network and a pinned digest the worker does not produce -> fail with retry;
#   - the token and the key never reach the check (threat 7);
#   - kill -9 mid-check: the lease expires, a second worker gets the job, exactly one
#     attestation is accepted;
#   - two lanes, many jobs: no job completed by a lane that did not claim it, no conflicts;
#   - SIGTERM finishes the running check; a second signal hands the job back and exits;
#   - a lane runs its next job in a capsule started ahead when the job's limits are the
#     defaults, cold otherwise, and leaves none behind (issue 12).
set -uo pipefail
. "$(dirname "$0")/lib.sh"
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v openssl >/dev/null || { echo "SKIP: openssl is not installed"; exit 77; }
. "$(dirname "$0")/serve-lib.sh"
SERVE_FLAGS=(--system-mounts-identity debian-12)

start_worker ci-1
W1=$wpid

# ---- 1. pass and fail, verified independently -------------------------------------------
enqueue pass1 "$TREE" '{"argv":["sh","-c","cat ok.txt inlink && ./run.sh"],"timeout_secs":60,"env":{"FOO":"bar"}}'
final pass1
check "pass1 completed as pass" [ "$(q "jobs['pass1']['history'][-1].get('status')")" = pass ]
attestation pass1 pass1.att
DIGEST=$(q "jobs['pass1']['history'][-1]['result']['environment_digest']")
# RESULT (contract section 8): times, exit code and signal, peak memory from the capsule's
# cgroup, and each limit with how it was enforced.
check "pass1 RESULT: times, exit 0, no signal, peak memory, each limit and its enforcement" \
        [ "$(q "(lambda r: (r['started_at'].endswith('Z'), r['finished_at'] >= r['started_at'], r['exit_code'], r['signal'], r['peak_memory_bytes'] > 0, r['limits']['timeout_secs']['enforced'], r['limits']['memory']['enforced'], r['limits']['pids']['enforced'], r['limits']['cpu_secs']['enforced'], r['limits']['memory']['value'] == 2048 << 20))(jobs['pass1']['history'][-1]['result'])")" = "(True, True, 0, None, True, 'host_timer', 'cgroup', 'rlimit', 'sampled', True)" ]
check "pass1 attestation verifies (python PAE + openssl) and names the tree, pass and the digest" \
        verify pass1.att --expect "subject.gitTree=$TREE" --expect predicate.result=pass \
        --expect "predicate.environment_digest=$DIGEST" --expect predicate.job=pass1 --expect predicate.worker=ci-1-$RUN \
        --expect predicate.issuer=service:ci-1
check "pass1 ran the tree's files and the symlink inside it" \
        [ "$(q "'hello\nsub\nscript-ran' in jobs['pass1']['history'][-1]['result']['log']['tail']")" = True ]
check "an attestation does not verify with another key" \
        bash -c "! python3 '$SRC/tests/server/verify_attestation.py' AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= pass1.att >/dev/null 2>&1"

enqueue fail1 "$TREE" '{"argv":["sh","-c","echo failing; exit 3"],"timeout_secs":60,"env":{"FOO":"bar"}}'
final fail1
check "fail1 completed as fail" [ "$(q "jobs['fail1']['history'][-1].get('status')")" = fail ]
attestation fail1 fail1.att
check "fail1 attestation verifies and says fail with exit 3 and the same digest (same walls)" \
        verify fail1.att --expect "subject.gitTree=$TREE" --expect predicate.result=fail \
        --expect predicate.exit_code=3 --expect "predicate.environment_digest=$DIGEST"

# Issue 12 item 3: after a job the lane keeps a capsule started ahead for the next one with
# the default limits (--warm-secs, default 60); a job with other limits starts cold.
check "fail1 ran in the capsule the lane started ahead after pass1" grep -q "job 'fail1' runs in a capsule started ahead" ci-1.log
check "pass1, the first job, started cold" bash -c "! grep -q \"job 'pass1' runs in a capsule\" ci-1.log"
enqueue smallmem "$TREE" '{"argv":["sh","-c","cat ok.txt inlink"],"memory_mb":1024,"timeout_secs":60}'
final smallmem
check "a job with other limits passes" [ "$(q "jobs['smallmem']['history'][-1].get('status')")" = pass ]
check "a job with other limits starts cold" bash -c "! grep -q \"job 'smallmem' runs in a capsule\" ci-1.log"

enqueue timeout1 "$TREE" '{"argv":["sleep","30"],"timeout_secs":2}'
final timeout1
attestation timeout1 timeout1.att
check "a check running out of time is a signed fail (timed_out)" \
        verify timeout1.att --expect predicate.result=fail --expect predicate.status=timed_out

# ---- 2. threat 7: the token and the key path never reach the check ------------------------
enqueue secrets "$TREE" "{\"argv\":[\"./probe.sh\",\"$tmp\"],\"timeout_secs\":60,\"env\":{\"GREETING\":\"hello world=1\"}}"
final secrets
TAIL=$(q "jobs['secrets']['history'][-1]['result']['log']['tail']")
check "the check ran and listed its environment" grep -q "HOME=/work" <<<"$TAIL"
check "the policy's env reaches the check as given" grep -qx "GREETING=hello world=1" <<<"$TAIL"
check "the token is not in the check's environment, mounts or fds" bash -c "! grep -q -- '$TOKEN' <<<\"\$0\"" "$TAIL"
check "the key file is not visible in the check" bash -c "! grep -q 'ci.key' <<<\"\$0\"" "$TAIL"

# ---- 3. the server misbehaves -------------------------------------------------------------
# wrong_blob on a tree with a blob no lane has kept: it must be downloaded to be tampered with.
for sw in wrong_blob wrong_manifest; do
        t=$TREE; [ "$sw" = wrong_blob ] && t=$FRESH
        enqueue "$sw" "$t" '{"argv":["true"]}' "[\"$sw\"]"
        final "$sw"
        check "$sw: failed after 5 attempts" [ "$(q "(jobs['$sw']['state'], jobs['$sw']['attempt'])")" = "('failed', 5)" ]
        check "$sw: every failure asks for a retry" \
                [ "$(q "all(not h['permanent'] for h in jobs['$sw']['history'] if h['event']=='fail')")" = True ]
        check "$sw: nothing was signed or completed" [ "$(q "'complete' in [h['event'] for h in jobs['$sw']['history']]")" = False ]
        no_attestation "$sw" || { echo "FAIL: $sw has an attestation"; fails=$((fails + 1)); }
done
check "wrong_blob: the reason names the blob hash" \
        [ "$(q "'does not hash to' in jobs['wrong_blob']['history'][1]['reason']")" = True ]
check "wrong_manifest: the reason names the tree mismatch" \
        [ "$(q "'tree_mismatch' in jobs['wrong_manifest']['history'][1]['reason'] or 'give tree' in jobs['wrong_manifest']['history'][1]['reason']")" = True ]

enqueue dotdot "$TREE" '{"argv":["true"]}' '["dotdot"]'
final dotdot
check "a '..' path fails permanently at the first attempt, unsigned" \
        [ "$(q "(jobs['dotdot']['state'], jobs['dotdot']['attempt'], jobs['dotdot']['history'][-1]['permanent'])")" = "('failed', 1, True)" ]
enqueue evil "$EVIL" '{"argv":["true"]}'
final evil
check "an outward symlink fails permanently, unsigned" \
        [ "$(q "(jobs['evil']['state'], jobs['evil']['attempt'], jobs['evil']['history'][-1]['permanent'], 'outside the checkout' in jobs['evil']['history'][-1]['reason'])")" = "('failed', 1, True, True)" ]

enqueue stale "$TREE" '{"argv":["sleep","60"],"timeout_secs":120}' '["stale"]'
final stale 60
check "stale: completed as stale without attestation, the check stopped early" \
        [ "$(q "(jobs['stale']['history'][-1]['event'], jobs['stale']['history'][-1]['status'], jobs['stale']['history'][-1]['attestation'])")" = "('complete', 'stale', None)" ]

enqueue lost "$TREE" '{"argv":["sh","-c","sleep 8; echo done"],"timeout_secs":120}' '["lease_lost"]'
wait_until "'heartbeat_conflict' in [h['event'] for h in jobs['lost']['history']]" 60
# The worker has dropped the job; let the server hand it out again, well behaved this time.
curl -sf -X POST "$URL/test/switch" -d '{"job":"lost","switch":"lease_lost","on":false}' >/dev/null
curl -sf -X POST "$URL/test/expire" -d '{"job":"lost"}' >/dev/null
final lost 90
check "lease lost: the first attempt's result was dropped, the second completed, one attestation" \
        [ "$(q "(jobs['lost']['attempt'], [h['event'] for h in jobs['lost']['history']].count('complete'), sum(1 for h in jobs['lost']['history'] if h['event'].startswith('complete') and h.get('attestation')))")" = "(2, 1, 1)" ]

# ---- 4. refusals before download and the pinned digest -----------------------------------
enqueue bigmem "$TREE" '{"argv":["true"],"memory_mb":999999}'
enqueue net "$TREE" '{"argv":["true"],"network":true}'
enqueue pinned "$TREE" '{"argv":["true"],"environment_digest":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}'
final bigmem; final net; final pinned
check "memory above the ceiling: fail with retry, never run, unsigned" \
        [ "$(q "(jobs['bigmem']['state'], all(h['event'] in ('claim','fail') and not h.get('permanent') for h in jobs['bigmem']['history']), 'ceiling' in jobs['bigmem']['history'][1]['reason'])")" = "('failed', True, True)" ]
check "network on a worker that does not allow it: fail with retry" \
        [ "$(q "(jobs['net']['state'], 'network' in jobs['net']['history'][1]['reason'], jobs['net']['history'][1]['permanent'])")" = "('failed', True, False)" ]
check "a pinned digest this worker does not produce: fail with retry showing both digests" \
        [ "$(q "(__import__('re').search('pins environment_digest sha256:0{64}; this worker produces sha256:[0-9a-f]{64}', jobs['pinned']['history'][1]['reason']) is not None, jobs['pinned']['history'][1]['permanent'])")" = "(True, False)" ]
no_attestation pinned || { echo "FAIL: pinned was signed"; fails=$((fails + 1)); }
# Issue 11 item 5: the digest depends only on the flags and the policy, so a pin this worker
# does not produce is refused before the manifest is fetched (before: after download and run).
check "a pinned digest this worker does not produce: refused before any download" \
        [ "$(q "jobs['pinned'].get('downloads', 0)")" = 0 ]
# Issue 11 item 5: a policy env naming a variable the worker sets itself can never run: one
# permanent fail (before: dropped at claim, handed out again until its attempts ran out).
enqueue reserved "$TREE" '{"argv":["true"],"env":{"PATH":"/evil"}}'
# Issue 11 item 5: an argv[0] the capsule cannot execute is this worker's fault (a toolchain it
# lacks), never a signed fail blaming the tree.
enqueue noexec "$TREE" '{"argv":["no-such-program"],"timeout_secs":60}'
final reserved; final noexec
check "a policy env naming PATH fails permanently at the first attempt, unsigned" \
        [ "$(q "(jobs['reserved']['state'], jobs['reserved']['attempt'], jobs['reserved']['history'][-1]['permanent'], 'PATH' in jobs['reserved']['history'][-1]['reason'])")" = "('failed', 1, True, True)" ]
no_attestation reserved || { echo "FAIL: reserved was signed"; fails=$((fails + 1)); }
check "an argv[0] the capsule cannot execute: fail with retry naming it, never signed" \
        [ "$(q "(jobs['noexec']['state'], all(h['event'] in ('claim','fail') and not h.get('permanent') for h in jobs['noexec']['history']), 'exec_failed' in jobs['noexec']['history'][1]['reason'] and 'no-such-program' in jobs['noexec']['history'][1]['reason'])")" = "('failed', True, True)" ]
no_attestation noexec || { echo "FAIL: noexec was signed"; fails=$((fails + 1)); }
enqueue pinned_ok "$TREE" "{\"argv\":[\"true\"],\"env\":{\"FOO\":\"bar\"},\"timeout_secs\":60,\"environment_digest\":\"$DIGEST\"}"
final pinned_ok
check "the digest of pass1's walls, pinned, is satisfied by the same configuration" \
        [ "$(q "jobs['pinned_ok']['history'][-1].get('status')")" = pass ]

# ---- 5. SIGTERM finishes the running check; a second signal hands it back -----------------
enqueue term1 "$TREE" '{"argv":["sh","-c","sleep 3; echo finished"],"timeout_secs":60}'
wait_until "jobs['term1']['state'] == 'claimed'" 60
kill -TERM "$W1"
wait "$W1"; rc=$?
check "after SIGTERM the worker exits 0" [ "$rc" = 0 ]
check "after SIGTERM the running check finished and passed" [ "$(q "jobs['term1']['history'][-1].get('status')")" = pass ]
check "secrets ran in a capsule started ahead (its probe saw the same walls)" grep -q "job 'secrets' runs in a capsule started ahead" ci-1.log
check "after SIGTERM no capsule is left, the one started ahead included" \
        test -z "$(runsc --root "$tmp/state-ci-1/runsc" list -quiet 2>/dev/null)"
check "after SIGTERM no scratch is left but the lanes' kept checkouts" \
        test -z "$(ls -A "$tmp/state-ci-1/scratch" 2>/dev/null | grep -v '^lane-[0-9]*-tree$')"

# ---- 5b. output and CPU time end the check: signed fails naming the limit ------------------
start_worker ci-7 --output-mb 1 --default-cpu-secs 2
W7=$wpid
enqueue flood "$TREE" '{"argv":["sh","-c","yes flooding | head -c 200000000; echo never-here"],"timeout_secs":120}'
enqueue spin "$TREE" '{"argv":["sh","-c","while :; do :; done & while :; do :; done"],"timeout_secs":120}'
final flood 120; final spin 120
for j in flood spin; do
        attestation "$j" "$j.att"
        check "$j: a signed fail, status killed" verify "$j.att" --expect predicate.result=fail --expect predicate.status=killed
done
check "flood: ended for output beyond --output-mb, soon after the limit" \
        [ "$(q "(jobs['flood']['history'][-1]['result']['reason'], jobs['flood']['history'][-1]['result']['log']['bytes'] < 50000000)")" = "('output_limit', True)" ]
check "spin: ended at 2 CPU seconds, long before its 120 s" \
        [ "$(q "(jobs['spin']['history'][-1]['result']['reason'], jobs['spin']['history'][-1]['result']['duration_ms'] < 60000)")" = "('cpu_limit', True)" ]
check "the CPU-seconds limit is in the environment digest" \
        [ "$(q "jobs['spin']['history'][-1]['result']['environment_digest'] != '$DIGEST'")" = True ]
kill -TERM "$W7"; wait "$W7" || { echo "ci-7 log:"; tail -20 ci-7.log; }

start_worker ci-2 --shutdown-grace-secs 20
W2=$wpid
enqueue term2 "$TREE" '{"argv":["sleep","100"],"timeout_secs":200}'
wait_until "jobs['term2']['state'] == 'claimed' and jobs['term2']['history'][-1]['worker'] == 'ci-2-$RUN'" 60
wait_until "jobs['term2'].get('heartbeats', 0) >= 1" 30
# Two TERMs (a background job of a non-interactive shell has SIGINT ignored), the second once
# the first was taken (two pending signals of one kind would merge).
kill -TERM "$W2"
wait_log ci-2 "finishing the running checks"
kill -TERM "$W2"
wait "$W2"; rc=$?
check "after a second signal the worker exits" [ "$rc" = 0 ]
check "the interrupted job was handed back with fail (retry), unsigned" \
        [ "$(q "(jobs['term2']['history'][-1]['event'], jobs['term2']['history'][-1]['permanent'], jobs['term2']['state'])")" = "('fail', False, 'queued')" ]
curl -sf -X POST "$URL/test/switch" -d '{"job":"term2","switch":"unauthorized","on":true}' >/dev/null

# ---- 6. 401 stops the worker with the server's message -------------------------------------
start_worker ci-3
W3=$wpid
wait "$W3"; rc=$?
check "401: the worker stops with exit 1" [ "$rc" = 1 ]
check "401: the server's message is shown" grep -q "token revoked by the test server" ci-3.log
TENTAFLAKE_TOKEN=wrong "$BIN" serve --server "$URL" --key "$tmp/ci.key" --label "ci-4-$RUN" --state-dir "$tmp/state-ci-4" \
        --wait-secs 1 >ci-4.log 2>&1
rc=$?
check "a wrong token: the worker stops with exit 1 and 'invalid token'" bash -c "[ $rc = 1 ] && grep -q 'invalid token' ci-4.log"
check "the token never appears in a worker's log" bash -c "! grep -q -- '$TOKEN' ci-*.log"
# Issue 19: a --state-dir below a directory anyone may write is refused before anything is made.
mkdir -m 1777 "$tmp/sticky"
TENTAFLAKE_TOKEN=$TOKEN "$BIN" serve --server "$URL" --key "$tmp/ci.key" --label "ci-st-$RUN" --state-dir "$tmp/sticky/state" \
        --wait-secs 1 >ci-st.log 2>&1
rc=$?
state_dir_refused() {
        [ "$rc" = 1 ] && [ ! -e "$tmp/sticky/state" ] &&
                grep -qF -e "--state-dir: '$tmp/sticky/state' is below '$tmp/sticky', which is owned by 0:0 with mode 1777" ci-st.log ||
                { echo "  exit $rc:"; sed 's/^/    /' ci-st.log; return 1; }
}
check "--state-dir below a world-writable directory: exit 1, naming it, nothing made" state_dir_refused
curl -sf -X POST "$URL/test/switch" -d '{"job":"term2","switch":"unauthorized","on":false}' >/dev/null
curl -sf -X POST "$URL/test/switch" -d '{"job":"term2","switch":"dotdot","on":true}' >/dev/null

# ---- 7. kill -9 mid-check: the lease expires, another worker completes, one attestation -----
start_worker ci-5
W5=$wpid
final term2 60   # drained (fails permanently with dotdot)
enqueue k9 "$TREE" '{"argv":["sh","-c","sleep 5; echo survived"],"timeout_secs":60}'
wait_until "jobs['k9']['state'] == 'claimed' and jobs['k9']['history'][-1]['worker'] == 'ci-5-$RUN'" 60
kill -9 "$W5"
wait "$W5" 2>/dev/null
start_worker ci-6
W6=$wpid
final k9 90
check "kill -9: the lease expired and a second worker completed the job" \
        [ "$(q "([h['event'] for h in jobs['k9']['history']].count('expire') >= 1, jobs['k9']['history'][-1]['worker'], jobs['k9']['history'][-1].get('status'))")" = "(True, 'ci-6-$RUN', 'pass')" ]
check "kill -9: exactly one attestation was accepted" \
        [ "$(q "sum(1 for h in jobs['k9']['history'] if h['event']=='complete' and h.get('attestation'))")" = 1 ]
kill -TERM "$W6"; wait "$W6"
# The killed worker's container is removed by its successor's start-up cleanup.
start_worker ci-5
W5=$wpid
wait_ready ci-5
kill -TERM "$W5"; wait "$W5"

# ---- 8. two lanes, many jobs ------------------------------------------------------------------
start_worker lanes --concurrency 2
WL=$wpid
for i in $(seq 1 8); do enqueue "many$i" "$TREE" '{"argv":["sh","-c","sleep 1"],"timeout_secs":60}'; done
wait_until "all(jobs['many%d' % i]['state'] == 'done' for i in range(1, 9))" 180
check "two lanes: each job completed by the lane that claimed it, no conflicts, both lanes used" \
        [ "$(q "(all([h for h in jobs['many%d' % i]['history'] if h['event']=='claim'][-1]['worker'] == [h for h in jobs['many%d' % i]['history'] if h['event']=='complete'][-1]['worker'] for i in range(1, 9)), sum(1 for i in range(1, 9) for h in jobs['many%d' % i]['history'] if 'conflict' in h['event']), sorted(set(h['worker'] for i in range(1, 9) for h in jobs['many%d' % i]['history'] if h['event']=='complete')))")" = "(True, 0, ['lanes-$RUN-1', 'lanes-$RUN-2'])" ]
kill -TERM "$WL"; wait "$WL"; rc=$?
# Issue 11 item 8: the lanes' long polls end at different moments; a lane joined once must
# never be joined again (before: pthread_tryjoin_np(0) and exit status -11, 3 times out of 3).
check "two lanes: SIGTERM ends the worker with status 0 (got $rc)" [ "$rc" = 0 ]
# ---- 9. the CI worker's flags (issue 13): constant CI variables, rlimits, the RESULT tail ------
start_worker ci-9 --open-files 256 --file-size-mb 2 --result-tail-kb 1
W9=$wpid
enqueue envj "$TREE" '{"argv":["sh","-c","head -c 3000000 /dev/zero >/tmp/big; b=$?; yes x | head -c 5000; echo; echo ci=$CI check=$TENTAFLAKE_CHECK nofile=$(ulimit -n) fsize=$(ulimit -f) big=$b"],"timeout_secs":60}'
final envj
check "CI=true and TENTAFLAKE_CHECK in the capsule, RLIMIT_NOFILE and RLIMIT_FSIZE from the flags" \
        [ "$(q "__import__('re').search(r'ci=true check=tests nofile=256 fsize=4096 big=(153|1)\\b', jobs['envj']['history'][-1]['result']['log']['tail']) is not None")" = True ]
check "--result-tail-kb 1: RESULT carries at most 1 KiB of the log, its end" \
        [ "$(q "(lambda t: (len(t) <= 1024, t.rstrip().split(chr(10))[-1].startswith('ci=true'), t.count('x') < 1000))(jobs['envj']['history'][-1]['result']['log']['tail'])")" = "(True, True, True)" ]
check "RESULT: the file size and open files limits are rlimits" \
        [ "$(q "(lambda l: (l['open_files']['value'], l['open_files']['enforced'], l['file_size']['value'], l['file_size']['enforced']))(jobs['envj']['history'][-1]['result']['limits'])")" = "(256, 'rlimit', 2097152, 'rlimit')" ]
kill -TERM "$W9"; wait "$W9"

# ---- 10. serve --check: the live proof of serve's walls (issue 13 item 3) --------------------
chk() { TENTAFLAKE_TOKEN=${CHK_TOKEN-$TOKEN} "$BIN" serve --check --server "$URL" --state-dir "$tmp/state-check" \
        "${SERVE_FLAGS[@]}" "$@"; }
chk --key "$tmp/ci.key" >check.out 2>&1; rc=$?
check "serve --check on good flags exits 0 (got $rc)" [ "$rc" = 0 ]
check "serve --check: no ✗ line, and the key, token, walls, platform and probe lines are there" \
        sh -c '! grep -q "^✗" check.out && grep -q "^✓ key:" check.out && grep -q "^✓ token:" check.out &&
               grep -q "^✓ walls:" check.out && grep -q "^✓ platform:" check.out && grep -q "^✓ probe_memory_limit:" check.out'
check "serve --check lists the mounts without an identity (here: none, every mount has debian-12)" \
        grep -q "^✓ mount_identities: every mount carries an identity" check.out
cp "$tmp/ci.key" "$tmp/loose.key"; chmod 0644 "$tmp/loose.key"
chk --key "$tmp/loose.key" --json >check.json 2>&1; rc=$?
check "serve --check --json with a key of mode 0644: exit 1, key and walls false (the key does not load), valid JSON" \
        [ "$rc:$(python3 -c "import json; c={x['check']: x['ok'] for x in json.load(open('check.json'))}; print(c['key'], c['token'], c['walls'], c.get('platform'))")" = "1:False True False None" ]
CHK_TOKEN= chk --key "$tmp/ci.key" >check2.out 2>&1; rc=$?
check "serve --check without a token: exit 1 with ✗ token" sh -c "[ $rc = 1 ] && grep -q '^✗ token:' check2.out"

# ---- 11. checkouts kept between jobs (issue 18 item 3) --------------------------------------
start_worker keep1
WK=$wpid
wait_ready keep1
gets() { q "json.load(open('$tmp/state.json'))['blob_gets']"; }
n_blobs=$(git -C repo ls-tree -r "$TREE" | wc -l)
g0=$(gets)
enqueue keep_a "$TREE" '{"argv":["sh","-c","cat ok.txt; ls -a"],"timeout_secs":60}'
final keep_a
g1=$(gets)
check "keep_a: the first checkout of the lane downloads every blob ($n_blobs; got $((g1 - g0)))" [ $((g1 - g0)) = "$n_blobs" ]
enqueue keep_b "$TREE2" '{"argv":["sh","-c","cat ok.txt; ls -a; cat inlink; ./run.sh"],"timeout_secs":60}'
final keep_b
g2=$(gets)
check "keep_b: a tree that differs by one blob downloads that blob alone (got $((g2 - g1)))" [ $((g2 - g1)) = 1 ]
check "keep_b passed, and saw the changed file, the kept symlink and the kept script" \
        [ "$(q "(jobs['keep_b']['history'][-1]['result']['result'], 'hello2' in jobs['keep_b']['history'][-1]['result']['log']['tail'], 'script-ran' in jobs['keep_b']['history'][-1]['result']['log']['tail'], 'sub' in jobs['keep_b']['history'][-1]['result']['log']['tail'])")" = "('pass', True, True, True)" ]
check "keep_b: the worker says what it kept" grep -q "job 'keep_b': checkout of $n_blobs entries: 1 downloaded .* $((n_blobs - 1)) kept" keep1.log
enqueue keep_c "$TREE" '{"argv":["sh","-c","cat ok.txt"],"timeout_secs":60}'
final keep_c
g3=$(gets)
check "keep_c: back to the first tree, one blob again (got $((g3 - g2)))" [ $((g3 - g2)) = 1 ]
check "keep_c passed and saw the first tree's file" \
        [ "$(q "(jobs['keep_c']['history'][-1]['result']['result'], 'hello' in jobs['keep_c']['history'][-1]['result']['log']['tail'], 'hello2' in jobs['keep_c']['history'][-1]['result']['log']['tail'])")" = "('pass', True, False)" ]
kill -TERM "$WK"; wait "$WK"

start_worker lanes2 --concurrency 3 --wait-secs 3
WL2=$wpid
wait_ready lanes2
kill -TERM "$WL2"; wait "$WL2"; rc=$?
check "three idle lanes in long polls: SIGTERM ends the worker with status 0 (got $rc)" [ "$rc" = 0 ]

finish
