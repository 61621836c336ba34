#!/usr/bin/env bash
# The controller's side, `submit` (issue 15; contract sections 3 and 9; threat 14), against the
# real daemon and real runsc capsules. The daemon runs as root; every submit runs as the
# controller's own unprivileged uid (10000, no supplementary groups), from the workspace, with
# no configuration file. Covers: worker.json (written at start, root-owned, replacing a FIFO or
# a symlink the controller left without opening or following it, never read back: a forged one
# misleads only the client), each exit mapping (0, the job's code, 124, 128+N, 125 for a
# worker-side rejection, a denial and local refusals), a pending request approved from another
# shell with the command submit printed, --no-wait, --attach, --json, artifacts on stderr, and workspace
# discovery from a subdirectory, where the job then starts (cwd), and a cwd the snapshot lacks,
# a link or a file, or one leaving the workspace: rejected. Issue 35: --wait-timeout, and with no
# worker running, the one line that says so (naming the worker and what runs it) and the exit at
# the bound; worker.json's "job"; item 2: the controller's own list (a pending request, results,
# an inbox entry no worker took, an empty workspace; root's list unchanged).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")

dir=$(test_dir i15-sub)
dir2=$(test_dir i35-sub) # a second worker's config: network.allow and a cache (issue 35)
chmod 0755 "$dir" "$dir2" # the controller (uid 10000) must reach its results, as on a real host
trap 'worker_cleanup "$dir"; worker_cleanup "$dir2"' EXIT
new_worker "$dir" ', "pending_ttl_hours": 1,
 "limits": {"default_timeout_seconds": 60, "max_timeout_seconds": 120, "max_argv": 16, "memory": "512m", "memory_swap": "512m"}'
ws="$dir/ws" inbox="$dir/ws/.tentaflake-worker/inbox" res="$dir/results"
info="$ws/.tentaflake-worker/worker.json"
# The controller runs its own copy: the checkout need not be reachable by uid 10000.
mkdir -p "$dir/bin" "$dir/out" "$dir/home"
# TFW_CONTROLLER_BIN: the controller side from another build (an ASan one, say).
install -m 0755 "${TFW_CONTROLLER_BIN:-$BIN}" "$dir/bin/tentaflake-worker"
chown 10000:10000 "$dir/out" "$dir/home"
CTL_BIN="$dir/bin/tentaflake-worker"

# ctl ARGS...: tentaflake-worker as the controller, in the workspace (cwd), no privilege.
ctl() {
        (cd "${CTL_CWD:-$ws}" && setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs \
                env -i PATH=/usr/bin:/bin HOME="$dir/home" "$CTL_BIN" "$@")
}
# sub NAME ARGS...: `submit ARGS` as the controller; stdout, stderr and the exit status in
# $dir/out/NAME.{out,err,rc}.
sub() {
        local name=$1; shift
        ctl submit "$@" >"$dir/out/$name.out" 2>"$dir/out/$name.err"
        echo $? >"$dir/out/$name.rc"
}
rc_is() { # rc_is NAME WANT
        local got; got=$(cat "$dir/out/$1.rc")
        if [ "$got" = "$2" ]; then passes=$((passes + 1)); else
                echo "FAIL: $1: exit status $got, want $2"; sed 's/^/    /' "$dir/out/$1.err"; fails=$((fails + 1)); fi
}
out_has() { grep -q -- "$2" "$dir/out/$1.out"; }
err_has() { grep -q -- "$2" "$dir/out/$1.err"; }
ctl_reads() { setpriv --reuid=10000 --regid=10000 --clear-groups cat "$1" >/dev/null; }
inbox_empty() { [ -z "$(ls -A "$inbox")" ]; }

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] worker.json: a FIFO the controller left is replaced, never opened"
mkdir -p "$ws/.tentaflake-worker"
chown 10000:10000 "$ws/.tentaflake-worker"
chmod 0700 "$ws/.tentaflake-worker"
mkfifo "$info"
chown -h 10000:10000 "$info"
# Opening the FIFO for reading would block the daemon before it says it is watching.
start_daemon "$dir" || exit 1
check "worker.json is now a regular file" test -f "$info" -a ! -L "$info"
check "worker.json is root-owned, group container_gid, 0640" test "$(stat -c %u:%g:%a "$info")" = "0:10000:640"
check "worker.json names the results directory" test "$(json_get "$info" 'r["results_dir"]')" = "$res"
check "worker.json names the config" test "$(json_get "$info" 'r["config"]')" = "$(realpath "$dir/config.json")"
check "worker.json carries the configured limits" test "$(json_get "$info" 'r["limits"]["max_argv"]')" = 16
check "worker.json carries the action classes" test "$(json_get "$info" 'r["action_classes"]["forbidden"]')" = rejected
check "the controller can read worker.json" ctl_reads "$info"
stop_daemon || true

echo "-- [$SECONDS s] worker.json: a symlink to a root file is replaced, not written through"
mkdir -p "$dir/secret"
echo "root data" >"$dir/secret/target"
rm -f "$info"
ln -s "$dir/secret/target" "$info"
# drain: nothing to do, so it exits at once.
check "drain ran" "$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log"
check "drain wrote worker.json too" test -f "$info" -a ! -L "$info"
check "the symlink's target is untouched" test "$(cat "$dir/secret/target")" = "root data"

start_daemon "$dir" || exit 1

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] exit mappings"
echo "from the workspace" >"$ws/hello.txt"
chown 10000:10000 "$ws/hello.txt"
sub ok -- sh -c 'cat hello.txt; mkdir -p artifacts/d; echo art >artifacts/d/a.txt'
rc_is ok 0
check "ok: the job's log on stdout" out_has ok "from the workspace"
check "ok: the artifact's path on stderr" grep -qx "$res/sub-.*/artifacts/d/a.txt" "$dir/out/ok.err"
check "ok: the artifact is readable at that path" \
        test "$(setpriv --reuid=10000 --regid=10000 --clear-groups cat "$(grep artifacts/d/a.txt "$dir/out/ok.err")")" = art
# A running worker takes a request at once: no word of a missing one (issue 35, item 4).
check "ok: no word of a missing worker" sh -c "! grep -q 'no worker has taken it' '$dir/out/ok.err'"

sub fail -- sh -c 'echo failing; exit 3'
rc_is fail 3
check "fail: its output on stdout" out_has fail failing

sub tmo --timeout 1 -- sleep 60
rc_is tmo 124
check "tmo: says it timed out" err_has tmo "timed_out"

sub sig -- sh -c 'kill -TERM $$'
rc_is sig 143

# A FIFO in the workspace: the worker's snapshot rejects it (snapshot_special_file).
mkfifo "$ws/pipe"
chown 10000:10000 "$ws/pipe"
sub rej -- true
rc_is rej 125
check "rej: says rejected, with the worker's code" err_has rej "rejected: snapshot_special_file"
rm -f "$ws/pipe"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] refused before anything is written"
sub forbidden --class forbidden -- true
rc_is forbidden 125
check "forbidden: the reason" err_has forbidden "forbidden"
sub badid --id BAD_ID -- true
rc_is badid 125
check "badid: the worker's code" err_has badid "bad_id"
sub badclass --class nonsense -- true
rc_is badclass 125
check "badclass: the worker's code" err_has badclass "bad_action_class"
sub bigtimeout --timeout 121 -- true
rc_is bigtimeout 125
check "bigtimeout: the configured ceiling (from worker.json)" err_has bigtimeout "timeout_above_policy"
sub notnum --timeout 5s -- true
rc_is notnum 125
sub manyargs -- a b c d e f g h i j k l m n o p q
rc_is manyargs 125
check "manyargs: the configured max_argv (from worker.json)" err_has manyargs "argv_too_large"
sub noargv
rc_is noargv 2
sub longreason --reason "$(head -c 1025 /dev/zero | tr '\0' r)" -- true
rc_is longreason 125
check "longreason: reason_too_large" err_has longreason "reason_too_large"
check "nothing refused reached the inbox" inbox_empty

echo "-- [$SECONDS s] --no-wait, --json, --id and its reuse"
sub nowait --no-wait --id i15nowait -- sh -c 'echo later'
rc_is nowait 0
check "nowait: prints the id" test "$(cat "$dir/out/nowait.out")" = i15nowait
check "nowait: its result arrives" wait_result "$dir" i15nowait
sub again --id i15nowait -- true
rc_is again 125
check "again: an id in use is refused locally" err_has again "duplicate_id"
sub json --json --id i15json -- sh -c 'exit 7'
rc_is json 7
check "json: prints result.json" test "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$dir/out/json.out")" = failed

echo "-- [$SECONDS s] --attach"
# A request sent with --no-wait, followed later as submit follows its own: output, exit status.
sub att_sent --no-wait --id i35att -- sh -c 'echo first; sleep 2; echo second; exit 3'
rc_is att_sent 0
sub att --attach i35att
rc_is att 3
check "attach: the job's output, each line once" test "$(grep -c -x -e first -e second "$dir/out/att.out")" = 2
sub att_ended --attach i15nowait
rc_is att_ended 0
check "attach: an ended request: its log" out_has att_ended later
sub att_unknown --attach i35nosuch
rc_is att_unknown 125
check "attach: an id of no request of this workspace is refused, named" err_has att_unknown "attach 'i35nosuch': this workspace has no request with that id"
sub att_cmd --attach i35att -- true
rc_is att_cmd 2

echo "-- [$SECONDS s] --wait-timeout"
sub wt_ok --wait-timeout 300 -- sh -c 'echo in-time'
rc_is wt_ok 0
check "wt_ok: a result within the bound is submit's as ever" out_has wt_ok in-time
# The bound passes while the job runs: submit says where it is and exits 125; the job goes on.
sub wt_slow --wait-timeout 2 --id i35slow -- sh -c 'sleep 6; echo slept'
rc_is wt_slow 125
check "wt_slow: says the bound passed and where the request is" \
        grep -Eq "^submit 'i35slow': no result after 2 s \(--wait-timeout\): the request is (queued|running|taken by the worker)\. It stays in the worker's hands" "$dir/out/wt_slow.err"
check "wt_slow: ... naming its state file" err_has wt_slow "$res/i35slow.state.json"
check "wt_slow: the worker took it: no word of a missing worker" sh -c "! grep -q 'no worker has taken it' '$dir/out/wt_slow.err'"
check "wt_slow: the job still ends, with its result" wait_result "$dir" i35slow
check "wt_slow: ... having run to its end" test "$(result_field "$dir" i35slow status)" = succeeded
sub wt_zero --wait-timeout 0 -- true
rc_is wt_zero 2
sub wt_nowait --no-wait --wait-timeout 5 -- true
rc_is wt_nowait 2

echo "-- [$SECONDS s] discovery from a subdirectory"
mkdir -p "$ws/sub/deeper"
chown -R 10000:10000 "$ws/sub"
CTL_CWD="$ws/sub/deeper" sub subdir -- sh -c 'echo found-it; echo "pwd=$(pwd)"; echo x >rel.txt && ls'
rc_is subdir 0
check "subdir: ran" out_has subdir found-it
# The working directory (contract sections 4 and 9): the caller's, relative to the workspace.
check "subdir: the job started in the caller's directory" out_has subdir '^pwd=/work/sub/deeper$'
check "subdir: ... and wrote there by a relative name" out_has subdir '^rel.txt$'
# Nothing a job changes is lost without a word (issue 34): submit says what and where.
check "subdir: submit says the job changed a path, and where it is" \
        err_has subdir "the job changed 1 path(s) of /work: 1 added, 0 modified, 0 deleted, 0 directories made, 0 refused; the workspace is unchanged"
check "subdir: ... the new file is in the result's changes/" test "$(cat "$res/$(ls -t "$res" | grep -v '\.' | head -1)/changes/sub/deeper/rel.txt")" = x
CTL_CWD="$ws/sub/deeper" sub applied --apply -- sh -c 'echo applied >applied.txt && exit 3'
rc_is applied 3
check "--apply: the job's file is in the workspace, even from a failing job" test "$(cat "$ws/sub/deeper/applied.txt")" = applied
check "--apply: ... the controller's own" test "$(stat -c %u "$ws/sub/deeper/applied.txt")" = 10000
check "--apply: ... and submit said so" err_has applied "1 change(s) applied to"
sub applied2 --apply -- sh -c 'mkdir -p .git/hooks && echo hook >.git/hooks/post-checkout && echo again >sub/deeper/applied.txt'
rc_is applied2 125
check "--apply: a change in .git/: nothing applied, exit 125, named" err_has applied2 "refused: '.git/hooks/post-checkout'"
check "--apply: ... the workspace's file as it was" test "$(cat "$ws/sub/deeper/applied.txt")" = applied
sub rootdir -- sh -c 'echo "pwd=$(pwd)"'
rc_is rootdir 0
check "root: a submit from the workspace's root starts in /work" out_has rootdir '^pwd=/work$'
# A cwd the snapshot does not hold as a directory is the request's fault: rejected (125), named.
printf '{"version":1,"id":"i15cwdgone","action_class":"local-reversible","argv":["true"],"cwd":"sub/gone"}' >"$inbox/.i15cwdgone.json"
chown 10000:10000 "$inbox/.i15cwdgone.json"; mv "$inbox/.i15cwdgone.json" "$inbox/i15cwdgone.json"
check "cwd missing: published" wait_result "$dir" i15cwdgone
check "cwd missing: rejected" test "$(result_field "$dir" i15cwdgone status)" = rejected
check "cwd missing: error cwd_not_found" test "$(result_field "$dir" i15cwdgone error)" = cwd_not_found
check "cwd missing: the message names it" sh -c "python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"message\"])' '$res/i15cwdgone/result.json' | grep -q \"cwd 'sub/gone' is not a directory\""
check "cwd missing: the audit's captured line names the cwd" python3 -c '
import json, os, sys
d = sys.argv[1]
hits = [r for f in sorted(os.listdir(d)) if f.endswith(".jsonl") for r in map(json.loads, open(os.path.join(d, f)))
        if r.get("event") == "captured" and r.get("id") == "i15cwdgone"]
assert hits and hits[0].get("cwd") == "sub/gone", hits
' "$dir/state/audit"
ln -s deeper "$ws/sub/link"; echo f >"$ws/sub/file"; chown -h 10000:10000 "$ws/sub/link" "$ws/sub/file"
printf '{"version":1,"id":"i15cwdlnk","action_class":"local-reversible","argv":["true"],"cwd":"sub/link"}' >"$inbox/.i15cwdlnk.json"
printf '{"version":1,"id":"i15cwdfile","action_class":"local-reversible","argv":["true"],"cwd":"sub/file"}' >"$inbox/.i15cwdfile.json"
chown 10000:10000 "$inbox/.i15cwdlnk.json" "$inbox/.i15cwdfile.json"
mv "$inbox/.i15cwdlnk.json" "$inbox/i15cwdlnk.json"; mv "$inbox/.i15cwdfile.json" "$inbox/i15cwdfile.json"
for j in i15cwdlnk i15cwdfile; do
        check "cwd $j: published" wait_result "$dir" $j
        check "cwd $j: rejected as cwd_not_found (never through a link, never a file)" \
                test "$(result_field "$dir" $j status) $(result_field "$dir" $j error)" = "rejected cwd_not_found"
done
printf '{"version":1,"id":"i15cwddots","action_class":"local-reversible","argv":["true"],"cwd":"../etc"}' >"$inbox/.i15cwddots.json"
chown 10000:10000 "$inbox/.i15cwddots.json"; mv "$inbox/.i15cwddots.json" "$inbox/i15cwddots.json"
check "cwd '../etc': rejected by the parser" wait_result "$dir" i15cwddots
check "cwd '../etc': bad_cwd" test "$(result_field "$dir" i15cwddots error)" = bad_cwd

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] pending: approved from another shell"
ctl submit --class irreversible --id i15pend --reason "a human decides" -- sh -c 'echo approved-run; exit 4' \
        >"$dir/out/pend.out" 2>"$dir/out/pend.err" &
pend_pid=$!
check "pend: says it waits for an operator" wait_for 60 grep -q "pending" "$dir/out/pend.err"
cmd=$(sed -n 's/.*as root: //p' "$dir/out/pend.err")
# The controller's own list (issue 35 item 2), as the controller, no root and no config: the
# pending request, ended ones with their status, exit code and command; root's list unchanged.
echo "-- [$SECONDS s] list as the controller"
ctl list >"$dir/out/list.out" 2>"$dir/out/list.err"; echo $? >"$dir/out/list.rc"
rc_is list 0
check "list: a header" out_has list "^ID  *STATE  *EXIT  *CLASS  *SINCE  *COMMAND$"
check "list: the pending request, its class and command (from its state file)" \
        out_has list "^i15pend  *pending  *-  *irreversible  *[0-9TZ:-]*  *sh -c 'echo approved-run; exit 4'$"
check "list: an ended one, its status, exit code, class and command" \
        out_has list "^i15json  *failed  *7  *local-reversible  *[0-9TZ:-]*  *sh -c 'exit 7'$"
ctl list --json --recent 100 >"$dir/out/listj.out" 2>"$dir/out/listj.err"; echo $? >"$dir/out/listj.rc"
rc_is listj 0
check "list --json: pending in active, with its since" test "$(json_get "$dir/out/listj.out" \
        '[(a["state"], len(a["since"]), a["action_class"]) for a in r["active"] if a["id"] == "i15pend"]')" = \
        "[('pending', 20, 'irreversible')]"
check "list --json: a recent one, its status and command" test "$(json_get "$dir/out/listj.out" \
        '[x["status"] + " " + x["command"] for x in r["recent"] if x["id"] == "i15nowait"][0]')" = "succeeded sh -c 'echo later'"
check "list --json: recent ones newest first" test "$(json_get "$dir/out/listj.out" \
        '[x["finished_at"] or "" for x in r["recent"]] == sorted([x["finished_at"] or "" for x in r["recent"]], reverse=True)')" = True
ctl list --recent 101 >/dev/null 2>"$dir/out/listbad.err"; echo $? >"$dir/out/listbad.rc"
rc_is listbad 2
root_list() { tfw "$dir" list | grep -q '^ID  *STATE  *CLASS  *SUBMITTED  *SHA256$'; }
check "root's list is unchanged: the worker's own table" root_list
check "pend: the command approves exactly these bytes" grep -q -- "approve i15pend --expect-sha256 [0-9a-f]\{64\}" <<<"$cmd"
# The operator's shell runs the printed command (its tentaflake-worker is this build).
check "pend: the printed command approves it" eval "\"$BIN\" ${cmd#tentaflake-worker } >/dev/null"
wait "$pend_pid"; echo $? >"$dir/out/pend.rc"
rc_is pend 4
check "pend: the job's log after approval" out_has pend approved-run
check "pend: the pending message was printed once" test "$(grep -c pending "$dir/out/pend.err")" = 1

echo "-- [$SECONDS s] pending: denied"
ctl submit --class production --id i15deny -- true >"$dir/out/deny.out" 2>"$dir/out/deny.err" &
deny_pid=$!
check "deny: pending" wait_for 60 grep -q "pending" "$dir/out/deny.err"
quiet tfw "$dir" deny i15deny --reason "not today"
wait "$deny_pid"; echo $? >"$dir/out/deny.rc"
rc_is deny 125
check "deny: says denied" err_has deny "denied"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] a forged worker.json misleads only the client (threat 14)"
# The controller owns the directory: it can replace the file with anything.
forged="$ws/.tentaflake-worker/.forged"
python3 - "$info" "$forged" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["limits"]["max_argv"] = 1000
r["limits"]["max_timeout_seconds"] = 100000
json.dump(r, open(sys.argv[2], "w"))
PY
chown 10000:10000 "$forged"
setpriv --reuid=10000 --regid=10000 --clear-groups mv -f "$forged" "$info"
sub forged_argv --id i15forged -- a b c d e f g h i j k l m n o p q
rc_is forged_argv 125
check "forged: the worker still applied its own max_argv" err_has forged_argv "argv_too_large"
check "forged: the worker's rejection is the result" test "$(json_get "$res/i15forged/result.json" 'r["error"]')" = argv_too_large
sub forged_tmo --id i15forgedt --timeout 5000 -- true
rc_is forged_tmo 125
check "forged: the worker still applied its own max_timeout_seconds" \
        test "$(json_get "$res/i15forgedt/result.json" 'r["error"]')" = timeout_above_policy
# A worker.json that points elsewhere: the client waits in the wrong place; the worker runs the
# job and publishes where its config says. --results sets the client right.
mkdir -p "$dir/elsewhere"
echo '{"version":1,"results_dir":"'"$dir"'/elsewhere"}' >"$forged"
chown 10000:10000 "$forged"
setpriv --reuid=10000 --regid=10000 --clear-groups mv -f "$forged" "$info"
sub forged_dir --id i15elsewhere --no-wait -- sh -c 'echo real'
check "forged: the job still ran and published under the configured results" wait_result "$dir" i15elsewhere
check "forged: and nothing went elsewhere" test -z "$(ls -A "$dir/elsewhere")"
sub forged_fix --results "$res" -- sh -c 'echo set-right'
rc_is forged_fix 0
check "forged: --results overrides worker.json" out_has forged_fix set-right
check "daemon alive" daemon_alive
# The next start replaces the forgery.
stop_daemon || true
start_daemon "$dir" || exit 1
check "a restart rewrites worker.json" test "$(json_get "$info" 'r["results_dir"]')" = "$res"
check "a restart rewrites it root-owned" test "$(stat -c %u "$info")" = 0
# What a job gets (issue 35, item 5), from this config: no network, no cache, the limits.
check "worker.json: job.network is null without network.allow" test "$(json_get "$info" 'r["job"]["network"]')" = null
check "worker.json: job.cache is null without cache.paths" test "$(json_get "$info" 'r["job"]["cache"]')" = null
check "worker.json: job.limits.memory_bytes is limits.memory" test "$(json_get "$info" 'r["job"]["limits"]["memory_bytes"]')" = 536870912
check "worker.json: changesets come back (runsc)" test "$(json_get "$info" 'r["job"]["changes"]')" = True
stop_daemon || true
# ... and from a config with network.allow and cache.paths (drain writes worker.json, then exits).
new_worker "$dir2" ', "network": {"allow": ["registry.npmjs.org:443"], "max_upload_bytes": "2m"}, "cache": {"paths": ["node_modules"]}'
check "the second worker's drain ran" tfw "$dir2" drain 2>>"$dir2/daemon.log"
info2="$dir2/ws/.tentaflake-worker/worker.json"
check "worker.json: job.network.allow is network.allow" test "$(json_get "$info2" 'r["job"]["network"]["allow"]')" = "['registry.npmjs.org:443']"
check "worker.json: job.network carries the per-job bounds" \
        test "$(json_get "$info2" '(r["job"]["network"]["max_upload_bytes"], r["job"]["network"]["max_connections"])')" = "(2097152, 128)"
check "worker.json: job.cache.paths is cache.paths" test "$(json_get "$info2" 'r["job"]["cache"]["paths"]')" = "['node_modules']"

# ---------------------------------------------------------------------------------------------
# Saying when nothing answers (issue 35, item 4): no worker runs for this workspace now. Before,
# submit waited without a word and without a bound; `timeout` keeps this test bounded anyway.
echo "-- [$SECONDS s] no worker: submit says so once and stops at --wait-timeout"
t0=$(date +%s)
timeout 60 setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs env -i PATH=/usr/bin:/bin HOME="$dir/home" \
        sh -c "cd '$ws' && exec '$CTL_BIN' submit --wait-timeout 8 --id i35none -- true" \
        >"$dir/out/none.out" 2>"$dir/out/none.err"
echo $? >"$dir/out/none.rc"
elapsed=$(( $(date +%s) - t0 ))
rc_is none 125
check "none: waited the whole --wait-timeout (${elapsed} s)" test "$elapsed" -ge 8 -a "$elapsed" -lt 40
check "none: said once that no worker took it" test "$(grep -c 'no worker has taken it\. This' "$dir/out/none.err")" = 1
check "none: ... after 5 s, naming the request" err_has none "^submit 'i35none': request 'i35none' is still in the inbox after 5 s: no worker has taken it"
check "none: ... naming the worker from worker.json" err_has none "This workspace's worker is '$(worker_name "$dir")' (as worker.json says: config '$(realpath "$dir/config.json")', last started "
check "none: ... and what runs it: no unit, this config outside $(printf %s /etc/tentaflake/workers)" \
        err_has none "no unit of the package runs it (its config is not /etc/tentaflake/workers/$(worker_name "$dir").json)"
check "none: ... and that it still waits, up to the bound" err_has none "Still waiting, up to --wait-timeout 8 s\.$"
check "none: then where it is, at the bound" \
        err_has none "^submit 'i35none': no result after 8 s (--wait-timeout): the request is still in the inbox: no worker has taken it\."
check "none: nothing on stdout" test ! -s "$dir/out/none.out"
check "none: the request is not withdrawn" test -f "$inbox/i35none.json"
ctl list >"$dir/out/list-none.out" 2>"$dir/out/list-none.err"; echo $? >"$dir/out/list-none.rc"
rc_is list-none 0
check "list: a request no worker took, from the inbox, with its class and command" \
        out_has list-none "^i35none  *inbox  *-  *local-reversible  *[0-9TZ:-]*  *true$"
ctl list --workspace "$dir2/ws" >"$dir/out/list-empty.out" 2>"$dir/out/list-empty.err"; echo $? >"$dir/out/list-empty.rc"
rc_is list-empty 0
check "list: a workspace without requests says so" out_has list-empty "^No requests in this workspace: none in its inbox"
rm -f "$inbox/i35none.json"

finish
