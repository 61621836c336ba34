#!/usr/bin/env bash
# Snapshot generations bound into the capsule (issue 18; contract section 6 step 1; threats 1,
# 12 and 17), with the real daemon and runsc:
#   - each job sees exactly the workspace as the walk read it (every file's sha256, listed by
#     the job and by the host, compared), through its generation bound at /work;
#   - a change that restores mtime and size is seen (ctime cannot be set back);
#   - deletes, renames, a file turned into a directory: the next job sees the workspace;
#   - a job that writes, deletes, renames, truncates and chmods in /work changes neither the
#     workspace nor the generation: the next job sees the workspace again, and the tree id
#     is the same;
#   - on the host the generation is a read-only mount in the daemon's namespace only;
#   - the same through capsules started ahead (warm_seconds), whose generation is changed
#     after they booted;
#   - with the workspace's watch, an unchanged workspace is taken on its word, and a change
#     made just before a request is seen by that request's walk;
#   - state_dir/store.json reports the store and doctor shows it.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-gen)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir"' EXIT
ws=$dir/ws
res=$dir/results

# What a job lists: every regular file below /work (but the control directory) with its
# sha256, sorted; the host lists the workspace the same way.
LIST='cd /work && find . -path ./.tentaflake-worker -prune -o -type f -print0 | sort -z | xargs -0 -r sha256sum'
host_list() { (cd "$ws" && find . -path ./.tentaflake-worker -prune -o -type f -print0 | sort -z | xargs -0 -r sha256sum); }
n=0
# run_list ID: a job that prints the listing; its job.log must equal the host's listing.
run_list() {
        submit "$dir" "$1" local-reversible "[\"sh\",\"-c\",\"$LIST\"]"
        wait_result "$dir" "$1" || return 1
        [ "$(result_field "$dir" "$1" status)" = succeeded ] || { cat "$res/$1/job.log"; return 1; }
        if ! diff <(host_list) "$res/$1/job.log" >"$dir/diff.out"; then
                echo "job $1 saw another tree than the workspace:"; head -20 "$dir/diff.out"; return 1
        fi
}
tree_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["snapshot"]["tree"])' "$res/$1/result.json"; }
as_ctl() { setpriv --reuid 10000 --regid 10000 --clear-groups "$@"; }

setup_tree() {
        as_ctl sh -c "cd '$ws' && mkdir -p src/lib docs empty && printf 'int main;\n' >src/main.c &&
                printf lib >src/lib/a.c && printf docs >docs/README && seq 1 50000 >big.txt &&
                printf '#!/bin/sh\necho hi\n' >run.sh && chmod 755 run.sh && ln -s src link"
}

phase() { # phase NAME WARM_SECONDS
        local name=$1 warm=$2 p=$3
        echo "-- [$SECONDS s] $name"
        new_worker "$dir" ", \"runtime\": {\"warm_seconds\": $warm}, \"limits\": {\"workspace_tmpfs\": \"16m\", \"max_snapshot_bytes\": \"16m\"}"
        rm -rf "${ws:?}"/* "$ws/.tentaflake-worker"
        setup_tree
        sleep 1.2 # past the racy window (gen-index.h): the first walk may vouch for what it read
        start_daemon "$dir" || return 1
        check "$name: the first job sees the workspace" run_list "${p}1"
        check "$name: it ran on a generation" grep -q "job '${p}1': generation " "$dir/daemon.log"
        pre=$(stat -c '%y %s' "$ws/src/lib/a.c")
        as_ctl sh -c "cd '$ws' && m=\$(stat -c %y src/lib/a.c) && printf LIB >src/lib/a.c && touch -d \"\$m\" src/lib/a.c"
        check "$name: (the change kept mtime and size)" test "$(stat -c '%y %s' "$ws/src/lib/a.c")" = "$pre"
        check "$name: a change restoring mtime and size is seen" run_list "${p}2"
        if [ "$warm" -eq 0 ]; then
                check "$name: the second job read the changed file alone" grep -q "job '${p}2': generation .*, kept 4 of 5 files" "$dir/daemon.log"
        fi
        as_ctl sh -c "cd '$ws' && rm docs/README && mv big.txt big2.txt && rm src/main.c && mkdir src/main.c && printf x >src/main.c/f && rmdir empty"
        check "$name: deletes, renames and a file turned into a directory are seen" run_list "${p}3"
        # A capsule started ahead holds the lane its job will use while the previous job runs on
        # the other: lanes alternate, each changed from two requests back.
        [ "$warm" -gt 0 ] && check "$name: the third job kept what did not change since the first" \
                grep -q "job '${p}3': generation .*, kept [1-9] of" "$dir/daemon.log"
        before=$(host_list)
        submit "$dir" "${p}4" local-reversible '["sh","-c","cd /work && echo new >new.txt && echo more >>big2.txt && : >run.sh && chmod 777 src && mv src moved && rm -rf moved/lib && mkdir -p deep/er && touch deep/er/x && echo wrote"]'
        check "$name: a job writes, deletes, renames, truncates and chmods in /work" wait_result "$dir" "${p}4"
        check "$name: ... and it succeeded" test "$(result_field "$dir" "${p}4" status)" = succeeded
        check "$name: the workspace is unchanged by it" test "$(host_list)" = "$before"
        check "$name: the next job sees the workspace, not the writes" run_list "${p}5"
        check "$name: the tree id is the one before the writing job" test "$(tree_of "${p}5")" = "$(tree_of "${p}3")"
        # The job's layer (docs/capsule.md, "The job's writes as a layer"): what it writes under
        # /work is bounded by limits.workspace_tmpfs (16m here; before, only by its memory), and
        # init, root in the sandbox only to mount it, left the job and itself nothing of root.
        submit "$dir" "${p}b" local-reversible '["sh","-c","echo written-by-a-relative-name >relative && cat relative; grep -E \"^(Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd)):\" /proc/self/status /proc/1/status; dd if=/dev/zero of=/work/big bs=1M count=64 2>&1; echo size=$(stat -c %s /work/big)"]'
        check "$name: a job writes into /work" wait_result "$dir" "${p}b"
        check "$name: ... in the directory it started in, by a relative name" grep -qx 'written-by-a-relative-name' "$res/${p}b/job.log"
        check "$name: ... and /work is full at limits.workspace_tmpfs" grep -q 'No space left on device' "$res/${p}b/job.log"
        check "$name: ... which it did not pass" python3 -c "import re,sys; s=int(re.search(r'size=([0-9]+)', open(sys.argv[1]).read()).group(1)); assert 0 < s <= 16 << 20, s" "$res/${p}b/job.log"
        for who in /proc/self /proc/1; do
                for f in Uid Gid; do
                        check "$name: $who: $f is the job's (10000) in every slot" grep -Pq "^$who/status:$f:\t10000\t10000\t10000\t10000$" "$res/${p}b/job.log"
                done
                for c in CapInh CapPrm CapEff CapBnd; do
                        check "$name: $who: $c is empty" grep -Pq "^$who/status:$c:\t0000000000000000$" "$res/${p}b/job.log"
                done
        done
        # The watch (docs/snapshot.md, "The watch"): with nothing changed, a walk reads no
        # directory but the root; a change made just before the request is seen all the same.
        # Opening a file counts as a change of its directory (a write through a mapping makes no
        # other event), so the host's own listing is not taken between these jobs; and a file
        # read while racy is read (opened) by every walk, hence the wait.
        sleep 1.2
        for j in 6 7 8; do
                submit "$dir" "${p}$j" local-reversible '["true"]'
                wait_result "$dir" "${p}$j" >/dev/null
        done
        check "$name: unchanged, the walk took the workspace on the watch's word" \
                grep -Eq "job '${p}8': generation .*, [1-9][0-9]* entries unchanged by the watch's word" "$dir/daemon.log"
        as_ctl sh -c "cd '$ws' && printf changed-just-before >src/main.c/f && mkdir -p src/new/deeper && printf n >src/new/deeper/n"
        check "$name: a change made just before the request is seen by its walk" run_list "${p}9"
        check "$name: ... which read only what the watch saw change" \
                grep -Eq "job '${p}9': generation .*, [1-9][0-9]* entries unchanged by the watch's word" "$dir/daemon.log"
        lane=$(grep -o " $dir/state/store/lane-[0-9]*/ro " "/proc/$TFW_DAEMON_PID/mountinfo" | head -1 | tr -d ' ')
        check "$name: the generation is a read-only mount in the daemon's namespace" \
                sh -c "grep ' $lane ' /proc/$TFW_DAEMON_PID/mountinfo | grep -q ' ro,'"
        check "$name: ... and not in the host's" sh -c "! grep -q ' $dir/state/store/lane-' /proc/self/mountinfo"
        check "$name: ... where even root cannot write it" sh -c "! nsenter -t $TFW_DAEMON_PID -m touch '$lane/x' 2>/dev/null"
        if [ "$warm" -gt 0 ]; then
                for j in 2 3 4 5 6 7 8 9; do
                        check "$name: ${p}$j ran in a capsule started ahead" grep -q "job '${p}$j': started in capsule 'warm-" "$dir/daemon.log"
                done
        fi
        check "$name: store.json reports the store" python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['generations']>=1 and s['bytes']>0 and s['max_bytes']>0" "$dir/state/store.json"
        stop_daemon || true
        worker_cleanup "$dir" >/dev/null 2>&1
        dir=$(test_dir tfw-it-gen); chmod 0755 "$dir"; ws=$dir/ws; res=$dir/results
}

phase "capsules started for their job" 0 c
phase "capsules started ahead" 30 w
finish
