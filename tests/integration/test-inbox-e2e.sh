#!/usr/bin/env bash
# The inbox plane end to end (issue 5; contract sections 3, 4, 5, 7; threats 2 and 9): the
# real daemon (`run` in the background) and real runsc capsules, driven as a controller and an
# operator would. Covers every action class, every rejection code of contract section 4
# reaching the inbox, hostile inbox entries (FIFO, symlink to a root-only secret, socket,
# directory, device, hard link, oversize, a mount point), a request rewritten after capture, an id used twice,
# approve after deny and deny after approve (and the two racing), pending expiry, and the owner
# and modes of everything published. After every hostile entry the daemon must still be alive.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-e2e)
chmod 0755 "$dir" # the controller (uid 10000) must reach its results, as on a real host
trap 'umount -l "$dir/ws/.tentaflake-worker/inbox/mnt1.json" 2>/dev/null; worker_cleanup "$dir"' EXIT

new_worker "$dir" ', "concurrency": 2, "pending_ttl_hours": 1,
 "limits": {"memory": "512m", "memory_swap": "512m", "pids": 128}'
echo "hello from the workspace" >"$dir/ws/hello.txt"
chown 10000:10000 "$dir/ws/hello.txt"
inbox="$dir/ws/.tentaflake-worker/inbox"
res="$dir/results"
mkdir -p "$dir/fx" "$dir/secret"
chmod 0700 "$dir/secret"

start_daemon "$dir" || exit 1
check "the daemon made the inbox, owned by the controller" \
        test "$(stat -c %u:%g:%a "$inbox")" = "10000:10000:700"

# put NAME FILE: rename a prepared file into the inbox as NAME, as a controller does.
put() {
        cp "$2" "$inbox/.put.tmp"
        mv "$inbox/.put.tmp" "$inbox/$1"
}
req() { # req ID CLASS ARGV_JSON [EXTRA]: the bytes of a request on stdout
        printf '{"version":1,"id":"%s","action_class":"%s","argv":%s%s}' "$1" "$2" "$3" "${4:-}"
}
sha() { sha256sum "$1" | cut -d' ' -f1; }
alive() { check "daemon alive after $1" daemon_alive; }
field_is() { # field_is ID PY_EXPR VALUE
        local got
        got=$(json_get "$res/$1/result.json" "$2" 2>&1)
        if [ "$got" = "$3" ]; then passes=$((passes + 1)); else
                echo "FAIL: $1: $2 is '$got', want '$3'"; fails=$((fails + 1)); fi
}
log_has() { grep -q -- "$2" "$res/$1/job.log"; }

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] local-reversible: queued and run at once"
req lr_ok local-reversible \
        '["sh","-c","cat hello.txt; echo job=$TENTAFLAKE_JOB; mkdir -p artifacts/sub; echo art >artifacts/sub/a.txt"]' \
        >"$dir/fx/lr_ok"
put lr_ok.json "$dir/fx/lr_ok"
req lr_fail local-reversible '["sh","-c","echo failing; exit 3"]' >"$dir/fx/lr_fail"
put lr_fail.json "$dir/fx/lr_fail"
check "lr_ok published" wait_result "$dir" lr_ok
check "lr_fail published" wait_result "$dir" lr_fail
field_is lr_ok 'r["status"]' succeeded
field_is lr_ok 'r["exit_code"]' 0
field_is lr_ok 'r["request_sha256"]' "$(sha "$dir/fx/lr_ok")"
field_is lr_ok 'r["action_class"]' local-reversible
check "lr_ok: the job saw the workspace snapshot" log_has lr_ok "hello from the workspace"
check "lr_ok: the job saw TENTAFLAKE_JOB" log_has lr_ok "job=lr_ok"
check "lr_ok: its artifact was imported" grep -qx art "$res/lr_ok/artifacts/sub/a.txt"
check "lr_ok: the state file is gone once final" test ! -e "$res/lr_ok.state.json"
field_is lr_fail 'r["status"]' failed
field_is lr_fail 'r["exit_code"]' 3
check "lr_ok: one started line in the audit" test "$(audit_count "$dir" started lr_ok)" = 1

# Issue 11 item 5: an argv[0] the capsule cannot execute is the job's failure with the shell's
# exit codes and a stable error that names it (before: failed, error null).
req lr_noexec local-reversible '["no-such-program","x"]' >"$dir/fx/lr_noexec"
put lr_noexec.json "$dir/fx/lr_noexec"
printf '#!/bin/sh\necho hi\n' >"$dir/ws/noexec.sh"
chmod 0644 "$dir/ws/noexec.sh"
chown 10000:10000 "$dir/ws/noexec.sh"
req lr_noperm local-reversible '["./noexec.sh"]' >"$dir/fx/lr_noperm"
put lr_noperm.json "$dir/fx/lr_noperm"
check "lr_noexec published" wait_result "$dir" lr_noexec
check "lr_noperm published" wait_result "$dir" lr_noperm
field_is lr_noexec 'r["status"]' failed
field_is lr_noexec 'r["exit_code"]' 127
field_is lr_noexec 'r["error"]' exec_failed
field_is lr_noexec '"no-such-program" in r["message"]' True
field_is lr_noperm 'r["status"]' failed
field_is lr_noperm 'r["exit_code"]' 126
field_is lr_noperm 'r["error"]' exec_failed
field_is lr_noperm '"./noexec.sh" in r["message"]' True

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] approval classes: pending, then approve or deny"
classes="external-reversible irreversible financial production communicative privileged"
for c in $classes; do
        for v in a d; do
                req "$c-$v" "$c" "[\"sh\",\"-c\",\"echo ran-$c-$v\"]" ',"reason":"needs a human"' >"$dir/fx/$c-$v"
                put "$c-$v.json" "$dir/fx/$c-$v"
        done
done
for c in $classes; do
        for v in a d; do
                check "$c-$v is pending" wait_state "$dir" "$c-$v" pending
                check "$c-$v has no result while pending" test ! -e "$res/$c-$v"
        done
done
check "list --json shows the pending requests" \
        test "$(tfw "$dir" list --json | python3 -c 'import json,sys; print(sum(1 for r in json.load(sys.stdin)["requests"] if r["state"]=="pending"))')" = 12
out=$(tfw "$dir" approve external-reversible-a --expect-sha256 "$(printf 0%.0s {1..64})" 2>&1)
check "approve with the wrong --expect-sha256 is refused (exit 1)" test $? = 1
check "  ... saying why" grep -q "sha256" <<<"$out"
check "  ... and the request stays pending" wait_state "$dir" external-reversible-a pending 1
for c in $classes; do
        h=$(tfw "$dir" show "$c-a" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["record"]["request_sha256"])')
        check "show gives the captured copy's sha256 ($c)" test "$h" = "$(sha "$dir/fx/$c-a")"
        check "approve $c-a" quiet env SUDO_USER=alice "$BIN" --config "$dir/config.json" approve "$c-a" --expect-sha256 "$h"
        check "deny $c-d" quiet env SUDO_USER=bob "$BIN" --config "$dir/config.json" deny "$c-d" --reason "not for $c"
done
for c in $classes; do
        check "$c-a published" wait_result "$dir" "$c-a"
        check "$c-d published" wait_result "$dir" "$c-d"
        field_is "$c-a" 'r["status"]' succeeded
        field_is "$c-a" 'r["approval"]["decision"]' approved
        field_is "$c-a" 'r["approval"]["by"]' alice
        check "$c-a ran its command" log_has "$c-a" "ran-$c-a"
        field_is "$c-d" 'r["status"]' denied
        field_is "$c-d" 'r["approval"]["by"]' bob
        field_is "$c-d" 'r["approval"]["reason"]' "not for $c"
        check "$c-d never started" test "$(audit_count "$dir" started "$c-d")" = 0
        check "$c-a started once" test "$(audit_count "$dir" started "$c-a")" = 1
done

echo "-- [$SECONDS s] forbidden: always rejected"
req forb forbidden '["rm","-rf","/"]' >"$dir/fx/forb"
put forb.json "$dir/fx/forb"
check "forb published" wait_result "$dir" forb
field_is forb 'r["status"]' rejected
field_is forb 'r["error"]' forbidden
check "forb never started" test "$(audit_count "$dir" started forb)" = 0

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] every rejection code of contract section 4 reaches the inbox"
python3 - "$dir/fx" <<'PY'
import json, os, sys
d = sys.argv[1]
def req(i, **kw):
    r = {"version": 1, "id": i, "action_class": "local-reversible", "argv": ["true"]}
    r.update(kw)
    return r
def put(name, data):
    if isinstance(data, dict):
        data = json.dumps(data)
    if isinstance(data, str):
        data = data.encode()
    open(os.path.join(d, name), "wb").write(data)
put("r-too-large", json.dumps(req("r-too-large", reason="x" * 1000)) + " " * 70000)
put("r-nul", b'{"version":1,"id":"r-nul","action_class":"local-reversible","argv":["a\x00b"]}')
put("r-nul-esc", '{"version":1,"id":"r-nul-esc","action_class":"local-reversible","argv":["a\\u0000b"]}')
put("r-utf8", b'{"version":1,"id":"r-utf8","action_class":"local-reversible","argv":["\xff\xfe"]}')
put("r-badjson", '{"version":1,"id":"r-badjson",')
put("r-empty", "")
put("r-dupkey", '{"version":1,"id":"r-dupkey","id":"r-dupkey","action_class":"local-reversible","argv":["true"]}')
put("r-type-str", req("r-type-str", timeout_seconds="300"))
put("r-type-float", '{"version":1,"id":"r-type-float","action_class":"local-reversible","argv":["true"],"timeout_seconds":300.0}')
put("r-missing", {"version": 1, "id": "r-missing", "action_class": "local-reversible"})
put("r-unknown", req("r-unknown", env={"A": "b"}))
put("r-version", req("r-version", version=2))
put("r-badid", req("Bad ID"))
put("r-mismatch", req("someone-else"))
put("r-class", req("r-class", action_class="Local-Reversible"))
put("r-empty-argv", req("r-empty-argv", argv=[]))
put("r-argv-big", req("r-argv-big", argv=["x"] * 257))
put("r-range", req("r-range", timeout_seconds=0))
put("r-timeout", req("r-timeout", timeout_seconds=901))
put("r-reason", req("r-reason", reason="r" * 1025))
put("bad-name", req("bad-name"))
PY
codes="r-too-large:too_large r-nul:nul_byte r-nul-esc:nul_byte r-utf8:invalid_utf8
        r-badjson:bad_json r-empty:bad_json r-dupkey:duplicate_key r-type-str:bad_type
        r-type-float:bad_type r-missing:missing_field r-unknown:unknown_field
        r-version:unsupported_version r-badid:bad_id r-mismatch:id_mismatch
        r-class:bad_action_class r-empty-argv:empty_argv r-argv-big:argv_too_large
        r-range:out_of_range r-timeout:timeout_above_policy r-reason:reason_too_large"
for pair in $codes; do
        put "${pair%%:*}.json" "$dir/fx/${pair%%:*}"
done
for pair in $codes; do
        check "${pair%%:*} published" wait_result "$dir" "${pair%%:*}" 30
done
# One pass over the results and the audit log: status rejected with the code, never started,
# consumed from the inbox.
out=$(python3 - "$dir" $codes <<'PY'
import json, os, sys
d, pairs = sys.argv[1], sys.argv[2:]
started = set()
for f in os.listdir(d + "/state/audit"):
    if f.endswith(".jsonl"):
        for line in open(os.path.join(d, "state/audit", f)):
            r = json.loads(line)
            if r["event"] == "started":
                started.add(r.get("id"))
for p in pairs:
    i, code = p.split(":")
    r = json.load(open(f"{d}/results/{i}/result.json"))
    if r["status"] != "rejected" or r["error"] != code:
        print(f"FAIL: {i}: status {r['status']} error {r['error']}, want rejected {code}")
    if i in started:
        print(f"FAIL: {i}: a rejected request was started")
    if os.path.lexists(f"{d}/ws/.tentaflake-worker/inbox/{i}.json"):
        print(f"FAIL: {i}: still in the inbox")
PY
)
check "each rejection has its code, never ran, left the inbox ${out:+$out}" test -z "$out"
alive "the rejections"

# Names that cannot own an id: a .rejected/ record instead.
anon_rejected() { # anon_rejected NAME CODE WHAT
        local rec
        check "$3: the inbox entry is consumed" wait_gone "$inbox/$1" 30
        if rec=$(rejected_record "$dir" "$1"); then
                passes=$((passes + 1))
                check "$3: the record's error is $2" test "$(json_get "$rec" 'r["error"]')" = "$2"
                check "$3: the record is root:10000 0640" test "$(stat -c %u:%g:%a "$rec")" = "0:10000:640"
        else
                echo "FAIL: $3: no .rejected record named '$1'"; fails=$((fails + 1))
        fi
        alive "$3"
}
put Bad-Name.json "$dir/fx/bad-name"
anon_rejected Bad-Name.json bad_name "an upper-case name"
put no-suffix "$dir/fx/bad-name"
anon_rejected no-suffix bad_name "a name without .json"
python3 -c 'import sys; sys.stdout.write("{" + " " * 70000 + "}")' >"$dir/fx/big-anon"
put BIG "$dir/fx/big-anon"
anon_rejected BIG too_large "an oversize entry without an id"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] hostile inbox entries (threat 2)"
marker="tfw-secret-$RANDOM$RANDOM$RANDOM"
# The secret is itself a valid request for the id its link is named after: if the worker ever
# followed the link it would run it and the result would say succeeded.
printf '{"version":1,"id":"sym1","action_class":"local-reversible","argv":["echo","%s"]}' "$marker" \
        >"$dir/secret/shadow"
chmod 0600 "$dir/secret/shadow"
ln -s "$dir/secret/shadow" "$inbox/sym1.json" # a symlink to /etc/shadow, in kind
anon_rejected sym1.json not_regular_file "a symlink to a root-only secret"
check "the symlink was not followed: no result for its id" test ! -e "$res/sym1"
check "the secret is intact" grep -q "$marker" "$dir/secret/shadow"

# A FIFO must not block the worker (an open without O_NONBLOCK would hang it forever).
mkfifo "$inbox/fifo1.json"
anon_rejected fifo1.json not_regular_file "a FIFO created in the inbox"
mkfifo "$inbox/.fifo2.tmp"
mv "$inbox/.fifo2.tmp" "$inbox/fifo2.json"
anon_rejected fifo2.json not_regular_file "a FIFO renamed into the inbox"

python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$inbox/sock1.json"
anon_rejected sock1.json not_regular_file "a socket"

mkdir "$inbox/dir1.json"
req dir1 local-reversible '["true"]' >"$inbox/dir1.json/inner.json"
anon_rejected dir1.json not_regular_file "a directory"
check "the directory was not taken as a request" test ! -e "$res/dir1"

mknod "$inbox/dev1.json" c 1 5 # /dev/zero: reading it would never end
anon_rejected dev1.json not_regular_file "a character device"

mkdir -p "$dir/outside"
req hl1 local-reversible "[\"echo\",\"$marker\"]" >"$dir/outside/hl1.json"
chmod 0600 "$dir/outside/hl1.json"
ln "$dir/outside/hl1.json" "$inbox/hl1.json" # a hard link to a root file
anon_rejected hl1.json hard_link "a hard link to a file outside the inbox"
check "the hard-linked request did not run" test ! -e "$res/hl1"
check "the hard link's target is intact" grep -q "$marker" "$dir/outside/hl1.json"
check "no secret byte reached the results or the state" \
        sh -c "! grep -rqa -- '$marker' '$res' '$dir/state' '$dir/daemon.log'"

# Something mounted over an inbox entry (a bind mount here; a FUSE file system would block any
# stat or open that reaches its server): rejected from statx's mount-root attribute, nothing
# behind it is stat'ed, read or removed. A mount makes no inotify event: the start-up scan
# meets it.
stop_daemon
mkdir "$inbox/mnt1.json" "$dir/victim"
req mnt1 local-reversible '["true"]' >"$dir/victim/inner.json"
mount --bind "$dir/victim" "$inbox/mnt1.json"
start_daemon "$dir" || exit 1
check "a mount point in the inbox is rejected" wait_for 30 quiet rejected_record "$dir" mnt1.json
rec=$(rejected_record "$dir" mnt1.json)
check "its record says it is a mount point" grep -q "is a mount point" "$rec"
check "what is mounted there is untouched" test -s "$dir/victim/inner.json"
check "the request behind the mount did not run" test ! -e "$res/mnt1"
alive "a mount point in the inbox"
# It cannot be unlinked while mounted; `drain` must not wait for it for ever.
stop_daemon
check "drain ends although a mount point stays in the inbox" \
        bash -c "timeout 60 '$BIN' --config '$dir/config.json' drain >>'$dir/drain.log' 2>&1"
start_daemon "$dir" || exit 1
umount "$inbox/mnt1.json" && rmdir "$inbox/mnt1.json"

req after-hostile local-reversible '["echo","still working"]' >"$dir/fx/after-hostile"
put after-hostile.json "$dir/fx/after-hostile"
check "a request after the hostile entries still runs" wait_result "$dir" after-hostile
field_is after-hostile 'r["status"]' succeeded

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] a request rewritten after capture (threat 9): the captured copy is what runs"
req rw1 irreversible '["echo","version-A"]' >"$dir/fx/rw1-a"
req rw1 irreversible '["echo","version-B-rewritten"]' >"$dir/fx/rw1-b"
# The controller keeps its file open after the rename and writes through it once captured.
exec 3<>"$inbox/.rw1.tmp"
cat "$dir/fx/rw1-a" >&3
mv "$inbox/.rw1.tmp" "$inbox/rw1.json"
check "rw1 captured as pending" wait_state "$dir" rw1 pending
python3 -c 'import os,sys; b=open(sys.argv[1],"rb").read(); os.pwrite(3,b,0); os.ftruncate(3,len(b))' "$dir/fx/rw1-b"
exec 3>&-
put rw1.json "$dir/fx/rw1-b" # and submits the new version under the same id
anon_rejected rw1.json duplicate_id "the same id again with other bytes"
h=$(tfw "$dir" show rw1 --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["record"]["request_sha256"])')
check "show still gives version A's sha256" test "$h" = "$(sha "$dir/fx/rw1-a")"
check "approve binds to version A" quiet env SUDO_USER=alice "$BIN" --config "$dir/config.json" approve rw1 --expect-sha256 "$(sha "$dir/fx/rw1-a")"
check "rw1 published" wait_result "$dir" rw1
check "rw1 ran version A" log_has rw1 version-A
check "rw1 did not run version B" sh -c "! grep -q version-B '$res/rw1/job.log'"
field_is rw1 'r["request_sha256"]' "$(sha "$dir/fx/rw1-a")"

# The same for a request that runs at once: rewrite it as soon as it left the inbox.
req rw2 local-reversible '["echo","version-A"]' >"$dir/fx/rw2-a"
req rw2 local-reversible '["echo","version-B-rewritten"]' >"$dir/fx/rw2-b"
exec 3<>"$inbox/.rw2.tmp"
cat "$dir/fx/rw2-a" >&3
mv "$inbox/.rw2.tmp" "$inbox/rw2.json"
wait_gone "$inbox/rw2.json" 30
python3 -c 'import os,sys; b=open(sys.argv[1],"rb").read(); os.pwrite(3,b,0); os.ftruncate(3,len(b))' "$dir/fx/rw2-b"
exec 3>&-
check "rw2 published" wait_result "$dir" rw2
check "rw2 ran version A" log_has rw2 version-A
check "rw2 did not run version B" sh -c "! grep -q version-B '$res/rw2/job.log'"

echo "-- [$SECONDS s] the same id twice: the second is rejected, the first untouched"
before=$(sha "$res/lr_ok/result.json")
req lr_ok local-reversible '["echo","second"]' >"$dir/fx/lr_ok-2"
put lr_ok.json "$dir/fx/lr_ok-2"
anon_rejected lr_ok.json duplicate_id "a used id with other bytes"
put lr_ok.json "$dir/fx/lr_ok" # the identical bytes again
check "an identical resubmission is consumed" wait_gone "$inbox/lr_ok.json" 30
alive "an identical resubmission"
check "the first result is untouched" test "$(sha "$res/lr_ok/result.json")" = "$before"
check "the first job never ran again" test "$(audit_count "$dir" started lr_ok)" = 1

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] approve after deny, deny after approve, and the two racing"
req ad1 financial '["echo","must-not-run"]' >"$dir/fx/ad1"
put ad1.json "$dir/fx/ad1"
req da1 production '["echo","approved-run"]' >"$dir/fx/da1"
put da1.json "$dir/fx/da1"
check "ad1 pending" wait_state "$dir" ad1 pending
check "da1 pending" wait_state "$dir" da1 pending
check "deny ad1" quiet env SUDO_USER=bob "$BIN" --config "$dir/config.json" deny ad1 --reason nope
out=$(SUDO_USER=alice tfw "$dir" approve ad1 2>&1)
check "approve after deny fails (exit 1)" test $? = 1
check "  ... and says it was denied, by whom" grep -q "approve 'ad1': it was already denied by bob at" <<<"$out"
check "ad1 published" wait_result "$dir" ad1
field_is ad1 'r["status"]' denied
check "ad1 never started" test "$(audit_count "$dir" started ad1)" = 0
out=$(SUDO_USER=alice tfw "$dir" approve da1 --wait)
check "approve --wait da1 waits for the result and prints it: $out" grep -q "^status: succeeded, exit code 0" <<<"$out"
out=$(SUDO_USER=bob tfw "$dir" deny da1 2>&1)
check "deny after approve fails (exit 1)" test $? = 1
check "  ... and says it was approved, by whom" grep -q "deny 'da1': it was already approved by alice at" <<<"$out"
check "da1 published" wait_result "$dir" da1
field_is da1 'r["status"]' succeeded
field_is da1 'r["approval"]["by"]' alice

for i in 0 1 2 3 4 5; do
        req "race$i" privileged '["true"]' >"$dir/fx/race$i"
        put "race$i.json" "$dir/fx/race$i"
done
for i in 0 1 2 3 4 5; do
        check "race$i pending" wait_state "$dir" "race$i" pending
done
racers=()
for i in 0 1 2 3 4 5; do
        (SUDO_USER=alice "$BIN" --config "$dir/config.json" approve "race$i" >/dev/null 2>&1; echo $? >"$dir/race$i.approve") &
        racers+=($!)
        (SUDO_USER=bob "$BIN" --config "$dir/config.json" deny "race$i" >/dev/null 2>&1; echo $? >"$dir/race$i.deny") &
        racers+=($!)
done
wait "${racers[@]}"
for i in 0 1 2 3 4 5; do
        a=$(cat "$dir/race$i.approve") d=$(cat "$dir/race$i.deny")
        check "race$i: exactly one of approve ($a) and deny ($d) won" test "$((a == 0 ? 1 : 0))$((d == 0 ? 1 : 0))" = 10 -o "$((a == 0 ? 1 : 0))$((d == 0 ? 1 : 0))" = 01
        check "race$i published" wait_result "$dir" "race$i"
        want=denied; [ "$a" = 0 ] && want=succeeded
        field_is "race$i" 'r["status"]' "$want"
done

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] pending expiry (pending_ttl_hours 1)"
req exp1 communicative '["true"]' >"$dir/fx/exp1"
put exp1.json "$dir/fx/exp1"
req exp2 communicative '["true"]' >"$dir/fx/exp2"
put exp2.json "$dir/fx/exp2"
check "exp1 pending" wait_state "$dir" exp1 pending
check "exp2 pending" wait_state "$dir" exp2 pending
check "the daemon stops with exit 0" stop_daemon TERM
# The clock cannot move: move exp1's submission two hours back instead, as root, while stopped.
python3 - "$dir/state/requests/exp1/state.json" <<'PY'
import datetime, json, os, sys
p = sys.argv[1]
r = json.load(open(p))
t = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=2)
r["submitted_at"] = r["updated_at"] = t.strftime("%Y-%m-%dT%H:%M:%SZ")
open(p + ".new", "w").write(json.dumps(r, sort_keys=True, separators=(",", ":")))
os.rename(p + ".new", p)
PY
start_daemon "$dir" || exit 1
check "exp1 published at start" wait_result "$dir" exp1 30
field_is exp1 'r["status"]' expired
field_is exp1 'r["error"]' expired
field_is exp1 'r["approval"]["decision"]' expired
check "exp1 audited as expired" test "$(audit_count "$dir" expired exp1)" = 1
check "exp2 (not yet due) is still pending" _state_is "$dir" exp2 pending
check "exp2 has no result" test ! -e "$res/exp2"
check "approve an expired request fails" sh -c "! '$BIN' --config '$dir/config.json' approve exp1 2>/dev/null"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] owner and modes of everything published (contract section 3)"
check "results_dir is root:10000 02750" test "$(stat -c %u:%g:%a "$res")" = "0:10000:2750"
# root:container_gid 02700: what is built there inherits the group, and the controller,
# whose group has no bits on it, cannot look in.
check "the staging area is closed to the controller" test "$(stat -c %u:%g:%a "$res/.staging")" = "0:10000:2700"
check "the controller cannot list the staging area" \
        bash -c "! setpriv --reuid 10000 --regid 10000 --clear-groups ls '$res/.staging' >/dev/null 2>&1"
bad=$(find "$res" -path "$res/.staging" -prune -o -mindepth 1 \
        \( -type d ! -perm 2750 -o -type f ! -perm 0640 -o ! -user 0 -o ! -group 10000 -o ! -type d ! -type f \) -print)
check "every published directory is root:10000 02750 and every file 0640 ${bad:+(not: $bad)}" test -z "$bad"
check "published files exist to check" test "$(find "$res" -path "$res/.staging" -prune -o -type f -print | wc -l)" -gt 60
as_ctl() { setpriv --reuid=10000 --regid=10000 --clear-groups "$@"; }
check "the controller reads its result" quiet as_ctl cat "$res/lr_ok/result.json"
check "the controller reads its artifact" quiet as_ctl cat "$res/lr_ok/artifacts/sub/a.txt"
check "the controller cannot change its result" sh -c "! setpriv --reuid=10000 --regid=10000 --clear-groups sh -c 'echo x >>$res/lr_ok/result.json' 2>/dev/null"
check "the controller cannot remove its result" sh -c "! setpriv --reuid=10000 --regid=10000 --clear-groups rm -f $res/lr_ok/result.json 2>/dev/null"
check "the controller cannot add to the results" sh -c "! setpriv --reuid=10000 --regid=10000 --clear-groups touch $res/lr_ok/x 2>/dev/null"
check "the controller cannot read the private state" sh -c "! setpriv --reuid=10000 --regid=10000 --clear-groups ls $dir/state 2>/dev/null"

# ---------------------------------------------------------------------------------------------
alive "the whole run"
check "the daemon stops with exit 0" stop_daemon TERM
check "audit verify passes on the real log" quiet tfw "$dir" audit verify
check "no runsc container is left" test -z "$(runsc --root "$(runsc_root "$dir")" list -quiet 2>/dev/null)"
check "no scratch (bundle, snapshot) is left" test -z "$(ls -A "$dir/state/scratch")"
check "no staging directory is left" test -z "$(ls -A "$res/.staging")"
if [ "$fails" -ne 0 ]; then echo "daemon log:"; tail -n 40 "$dir/daemon.log"; fi
finish
