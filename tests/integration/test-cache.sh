#!/usr/bin/env bash
# The build cache (issue 20; contract sections 3, 6 and 7; threats 12 and 15), with the real
# daemon and runsc, on a make project of the test's own whose objects go to build/:
#   - the loop: the first job compiles every file, after a one-line change the second compiles
#     that file alone (read from make's own output), a third compiles nothing;
#   - the cache owns its path: the workspace's own build/ is never seen by a job that uses the
#     cache, and neither the workspace nor the results ever hold the cache;
#   - trust: an approved job starts from it read-only (it sees the cache, not the workspace's
#     build/; show names it and approve says so), and leaves it as
#     it was; a link leaving the path, a cache over max_bytes, a job killed by SIGKILL, a
#     capsule SIGKILLed from outside while its cache comes back: each leaves the cache as it
#     was, and the result says why;
#   - every result records the tree id it started from and the one it left; `rm -rf build`
#     leaves an empty cache; `cache clear` empties it; doctor and list --json show its size;
#   - two jobs at once each start from the same cache and the cache is then one of theirs,
#     whole (no mix of both);
#   - the same through capsules started ahead (warm_seconds).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v make >/dev/null && command -v cc >/dev/null || { echo "SKIP: make and cc are needed in the capsule"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=
trap '[ -n "$dir" ] && worker_cleanup "$dir"' EXIT
as_ctl() { setpriv --reuid 10000 --regid 10000 --clear-groups "$@"; }
cache_field() { # cache_field ID FIELD: result.json's cache.FIELD
        python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))["cache"][sys.argv[2]]; print("null" if v is None else str(v).lower() if isinstance(v,bool) else v)' \
                "$res/$1/result.json" "$2"
}
compiles() { grep -c '^compile ' "$res/$1/job.log"; } # how many files a job compiled
run_job() { # run_job ID CLASS ARGV_JSON: submitted, waited for
        submit "$dir" "$1" "$2" "$3"
        wait_result "$dir" "$1" 300 || { echo "no result for $1"; tail -5 "$dir/daemon.log"; return 1; }
}
make_job() { run_job "$1" local-reversible '["make","-s"]'; }
status_is() { [ "$(result_field "$dir" "$1" status)" = "$2" ] || { echo "$1: $(result_field "$dir" "$1" status): $(result_field "$dir" "$1" message)"; tail -3 "$res/$1/job.log"; return 1; }; }
doctor_shows_cache() { grep -q "build_cache: .* in [0-9]* entries (limit .*), tree [0-9a-f]" <<<"$(tfw "$dir" doctor 2>&1)"; }
# kill_mid_take_in ID: once ID's take-in has begun in the daemon's store (its first cache
# directory made by the importer), SIGKILL every runsc process of its capsule: the test's own
# processes naming the container (lib.sh own_procs), never one of another worker's.
kill_mid_take_in() {
        local t=/proc/$TFW_DAEMON_PID/root$dir/state/store/cache/in-$1/data/0 until=$((SECONDS + 240))
        local wn id pids
        wn=$(worker_name "$dir")
        while [ ! -d "$t" ]; do
                [ $SECONDS -gt $until ] && { echo "the take-in of $1 never began"; return 1; }
                [ -e "$res/$1/result.json" ] && { echo "$1 ended before its take-in was seen"; return 1; }
        done
        # A capsule started ahead is named after itself, not the job.
        local c=$1 w
        w=$(sed -n "s/.*job '$1': started in capsule '\(warm-[0-9a-z-]*\)'.*/\1/p" "$dir/daemon.log" | head -1)
        [ -n "$w" ] && c=$w
        id=tfw-$wn-$c
        # an argument that is the id, or a path or an option's value ending in it
        pids=$(own_procs "argv=$id" | awk -v id="$id" '{
                for (i = 4; i <= NF; i++) {
                        n = length($i) - length(id)
                        if (n >= 0 && substr($i, n + 1) == id && (n == 0 || substr($i, n, 1) ~ /[\/=]/)) { print $1; break }
                }
        }')
        [ -n "$pids" ] || { echo "no runsc process of $1 ($id)"; return 1; }
        kill -KILL $pids
}
unchanged() { # unchanged ID PREV: ID started from PREV's cache and left it as it was
        [ "$(cache_field "$1" from)" = "$(cache_field "$2" left)" ] && [ "$(cache_field "$1" left)" = "$(cache_field "$2" left)" ] &&
                [ "$(cache_field "$1" kept)" = false ]
}

setup_project() {
        as_ctl sh -c "cd '$ws' && mkdir -p src && for f in a b c; do printf 'int %s(void) { return 1; }\n' \$f >src/\$f.c; done &&
                printf 'int a(void); int b(void); int c(void);\nint main(void) { return a() + b() + c() - 3; }\n' >src/main.c &&
                cat >Makefile" <<'MAKE'
B := build
OBJS := $(B)/a.o $(B)/b.o $(B)/c.o $(B)/main.o
$(B)/prog: $(OBJS)
	cc -o $@ $(OBJS)
$(B)/%.o: src/%.c | $(B)
	@echo "compile $<"
	cc -c -o $@ $<
$(B):
	mkdir -p $(B)
MAKE
}

phase() { # phase NAME WARM_SECONDS PREFIX
        local name=$1 warm=$2 p=$3
        echo "-- [$SECONDS s] $name"
        dir=$(test_dir tfw-it-cache); chmod 0755 "$dir"; ws=$dir/ws; res=$dir/results
        new_worker "$dir" ", \"runtime\": {\"warm_seconds\": $warm}, \"concurrency\": 2,
 \"cache\": {\"paths\": [\"build\"], \"max_bytes\": \"64m\", \"max_entries\": 5000}"
        setup_project
        # The workspace's own build/: a job that uses the cache never sees it.
        as_ctl sh -c "mkdir '$ws/build' && echo host >'$ws/build/host-only'"
        start_daemon "$dir" || return 1

        check "$name: the first job builds" make_job "${p}1"
        check "$name: ... and succeeds" status_is "${p}1" succeeded
        check "$name: ... compiling every file" test "$(compiles "${p}1")" = 4
        check "$name: ... from no cache" test "$(cache_field "${p}1" from)" = null
        check "$name: ... and its build/ is kept" test "$(cache_field "${p}1" kept)" = true
        check "$name: ... under a tree id" grep -Eq '^[0-9a-f]{64}$' <<<"$(cache_field "${p}1" left)"
        check "$name: the workspace's build/ is not what the job saw" sh -c "! grep -q host-only '$res/${p}1/job.log'"
        as_ctl sh -c "cd '$ws' && sleep 1 && printf 'int b(void) { return 7; }\n' >src/b.c"
        check "$name: after a one-line change" make_job "${p}2"
        check "$name: ... the second build compiles that file alone" test "$(compiles "${p}2")" = 1
        check "$name: ... it is b.c" grep -q '^compile src/b.c$' "$res/${p}2/job.log"
        check "$name: ... it started from the first job's cache" test "$(cache_field "${p}2" from)" = "$(cache_field "${p}1" left)"
        check "$name: ... and left another" test "$(cache_field "${p}2" left)" != "$(cache_field "${p}1" left)"
        check "$name: ... the capsule sent the files the build changed, the rest was kept" \
                test "$(cache_field "${p}2" files_sent) $(cache_field "${p}2" files_unchanged)" = "2 3"
        check "$name: nothing changed: nothing compiled" make_job "${p}3"
        check "$name: ... (zero compiles)" test "$(compiles "${p}3")" = 0
        check "$name: ... and nothing sent" test "$(cache_field "${p}3" files_sent) $(cache_field "${p}3" files_unchanged)" = "0 5"
        check "$name: ... and the same tree left" test "$(cache_field "${p}3" left)" = "$(cache_field "${p}2" left)"
        check "$name: the workspace holds no object" sh -c "! find '$ws' -name '*.o' | grep -q ."
        check "$name: the workspace's build/ is as the controller left it" test "$(ls -A "$ws/build")" = host-only
        check "$name: no result holds the cache" sh -c "! find '$res' -name '*.o' -o -name prog | grep -q ."
        check "$name: cache.json reports the cache" python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['tree']==sys.argv[2] and s['bytes']>0 and s['entries']>=5" "$dir/state/cache.json" "$(cache_field "${p}3" left)"
        check "$name: list --json shows its size" sh -c "'$BIN' --config '$dir/config.json' list --json | python3 -c 'import json,sys; c=json.load(sys.stdin)[\"cache\"]; assert c[\"bytes\"]>0'"

        # Links: one inside the path is kept; one leaving it keeps nothing.
        check "$name: a link inside build/" run_job "${p}4" local-reversible '["sh","-c","make -s && ln -s prog build/link"]'
        check "$name: ... is kept" test "$(cache_field "${p}4" kept)" = true
        check "$name: a link leaving build/" run_job "${p}5" local-reversible '["sh","-c","ln -s ../../etc/passwd build/evil && echo linked"]'
        check "$name: ... keeps nothing" unchanged "${p}5" "${p}4"
        check "$name: ... and says why" grep -q "build/evil" <<<"$(cache_field "${p}5" message)"
        check "$name: ... the job itself succeeded" status_is "${p}5" succeeded
        # The bound.
        check "$name: a cache over max_bytes" run_job "${p}6" local-reversible '["sh","-c","head -c 70000000 /dev/zero >build/big && echo big"]'
        check "$name: ... keeps nothing" unchanged "${p}6" "${p}4"
        check "$name: ... and says so" grep -qi "too_large\|more than" <<<"$(cache_field "${p}6" error) $(cache_field "${p}6" message)"
        # A job killed mid-build.
        check "$name: a job SIGKILLed after writing" run_job "${p}7" local-reversible '["sh","-c","echo torn >build/a.o; kill -9 $$"]'
        check "$name: ... keeps nothing" unchanged "${p}7" "${p}4"
        check "$name: ... the next job sees the cache as it was" run_job "${p}8" local-reversible '["sh","-c","ls build; cat build/a.o | head -c 4 | od -c | head -1"]'
        check "$name: ... (no torn a.o)" sh -c "! grep -q torn '$res/${p}8/job.log' && grep -q '^link$' '$res/${p}8/job.log'"
        check "$name: ... from the cache left by the last kept job" test "$(cache_field "${p}8" from)" = "$(cache_field "${p}4" left)"

        # A capsule SIGKILLed from outside while its cache comes back (the take-in begun).
        submit "$dir" "${p}k" local-reversible '["sh","-c","mkdir -p build/many && cd build/many && head -c 48000000 /dev/urandom | split -b 12000 -a 4 - f && echo made"]'
        check "$name: a capsule killed while its cache comes back" kill_mid_take_in "${p}k"
        check "$name: ... ends" wait_result "$dir" "${p}k" 300
        check "$name: ... keeps nothing" unchanged "${p}k" "${p}4"
        check "$name: ... and leaves no take-in behind" sh -c "! ls '/proc/$TFW_DAEMON_PID/root$dir/state/store/cache' | grep -q '^in-'"

        # An approved job starts from the cache, read-only: it sees the cache, not the
        # workspace's build/, and what it leaves there is dropped (issue 36).
        submit "$dir" "${p}9" external-reversible '["sh","-c","ls build; echo approved >build/marker"]'
        check "$name: an approval-class job waits" wait_state "$dir" "${p}9" pending
        check "$name: ... show names the cache it will start from, read-only" \
                sh -c "tfw_show() { '$BIN' --config '$dir/config.json' show '${p}9'; }; tfw_show | grep -q '^build cache:  tree $(cache_field "${p}4" left) .*read-only'"
        check "$name: ... is approved" sh -c "tfw_approve() { '$BIN' --config '$dir/config.json' approve '${p}9'; }; tfw_approve >'$dir/approve-${p}9.out'"
        check "$name: ... approve says it starts from the build cache, read-only" \
                grep -q "^approve '${p}9': it starts from the build cache, read-only" "$dir/approve-${p}9.out"
        check "$name: ... and runs" wait_result "$dir" "${p}9" 300
        check "$name: ... seeing the cache" grep -qx prog "$res/${p}9/job.log"
        check "$name: ... not the workspace's build/" sh -c "! grep -q host-only '$res/${p}9/job.log'"
        check "$name: ... its result names the cache it started from" test "$(cache_field "${p}9" from)" = "$(cache_field "${p}4" left)"
        check "$name: ... and keeps nothing" test "$(cache_field "${p}9" kept)" = false
        check "$name: ... saying why" test "$(cache_field "${p}9" error)" = cache_read_only
        check "$name: the next job still starts from the cache as it was" run_job "${p}10" local-reversible '["sh","-c","ls build"]'
        check "$name: ... (the same tree)" test "$(cache_field "${p}10" from)" = "$(cache_field "${p}4" left)"
        check "$name: ... without the approved job's marker" sh -c "! grep -q marker '$res/${p}10/job.log'"

        # Two jobs at once: each from the same cache; the cache is then one of theirs, whole.
        submit "$dir" "${p}11" local-reversible '["sh","-c","sleep 2; echo one >build/one; echo one"]'
        submit "$dir" "${p}12" local-reversible '["sh","-c","sleep 2; echo two >build/two; echo two"]'
        check "$name: two jobs at once" wait_result "$dir" "${p}11" 300
        check "$name: ... both end" wait_result "$dir" "${p}12" 300
        check "$name: ... both started from the same cache" test "$(cache_field "${p}11" from)" = "$(cache_field "${p}12" from)"
        check "$name: ... both kept theirs" test "$(cache_field "${p}11" kept)$(cache_field "${p}12" kept)" = truetrue
        check "$name: then a job" run_job "${p}13" local-reversible '["sh","-c","ls build"]'
        check "$name: ... sees exactly one of them" test "$(grep -cx 'one\|two' "$res/${p}13/job.log")" = 1
        seen=$(grep -x 'one\|two' "$res/${p}13/job.log" | head -1); want=${p}11
        [ "$seen" = two ] && want=${p}12
        check "$name: ... whole: the cache it saw is that job's" test "$(cache_field "${p}13" from)" = "$(cache_field "$want" left)"

        # Init keeps the layer's directories and the cache's version open for after the job;
        # gVisor lets a process of the same uid list them in /proc/1/fd, but every directory
        # above them is root's (0700): they lead to no other version and to no other layer.
        check "$name: init's descriptors lead nowhere else" run_job "${p}fd" local-reversible \
                '["sh","-c","for f in /proc/1/fd/*; do [ -d $f ] && ls -a $f/.. $f/../.. 2>/dev/null; done; echo probed"]'
        check "$name: ... (the job looked)" grep -qx probed "$res/${p}fd/job.log"
        check "$name: ... no version, list or layer directory listed" \
                sh -c "! grep -Exq '(work|cache[0-9]+)\\.(upper|work)|pin|meta|oids|data|[0-9]+' '$res/${p}fd/job.log'"

        # rm -rf build leaves an empty cache; cache clear removes it.
        check "$name: rm -rf build" run_job "${p}14" local-reversible '["rm","-rf","build"]'
        check "$name: ... is kept as an empty cache" test "$(cache_field "${p}14" kept)" = true
        check "$name: ... the next job finds build/ empty" run_job "${p}15" local-reversible '["sh","-c","ls -A build | wc -l"]'
        check "$name: ... (0 entries)" grep -qx 0 "$res/${p}15/job.log"
        check "$name: make again" make_job "${p}16"
        check "$name: ... compiles everything" test "$(compiles "${p}16")" = 4
        check "$name: cache clear" quiet tfw "$dir" cache clear
        check "$name: ... is audited" grep -q '"event":"cache-cleared"' "$dir/state/audit/audit.jsonl"
        check "$name: ... the next job starts without a cache" make_job "${p}17"
        check "$name: ... (from null)" test "$(cache_field "${p}17" from)" = null
        check "$name: ... and compiles everything" test "$(compiles "${p}17")" = 4
        check "$name: doctor shows the cache" doctor_shows_cache
        if [ "$warm" -gt 0 ]; then
                # Which job a capsule started ahead serves depends on when the previous one was
                # reaped; that some of them did is the point.
                check "$name: jobs ran in capsules started ahead" \
                        grep -qE "job '${p}([2-9]|1[0-7])': started in capsule 'warm-" "$dir/daemon.log"
        fi
        stop_daemon || true
        worker_cleanup "$dir" >/dev/null 2>&1
        dir=
}

phase "capsules started for their job" 0 c
phase "capsules started ahead" 5 w
finish
