#!/usr/bin/env bash
# The units under a real systemd, with the real worker and real runsc capsules.
#
# systemd is not pid 1 on the machines this runs on, so the test boots one: systemd-nspawn
# starts the host's own systemd as pid 1 of a container whose root is a throw-away overlay of
# the host's root (--volatile=overlay), with `make install`'s files bound into /usr/local and a
# controller $W ("it-" and 8 hex digits of the run's directory) set up as docs/install.md says
# (config, workspace drop-ins, tmpfiles line). One thing differs from a host: nspawn mounts the
# cgroup v1 controller hierarchies read-only inside a container, where the worker needs to create
# one cgroup per capsule, so the test remounts them writable in the container (on a host they
# are writable for root). Those hierarchies are the host's: the controller's name is this run's
# own, so its cgroup group is never a real worker's or another run's, and it is removed after.
#
# Checked, each through systemctl and the files the worker publishes:
#  - the tmpfiles line made the results directory at boot (root:10000 02750);
#  - tentaflake-worker@$W.service starts (Type=notify) and its process really is sandboxed
#    (no_new_privs, a seccomp filter, the unit's capability bounding set, a read-only root,
#    the workspace/state/results writable, /home hidden, a private /tmp);
#  - jobs run in capsules under all that: output, artifacts, modes 02750/0640 with the
#    controller's group, a workspace file only its owner may read, a timeout;
#  - a one-second watchdog (a test drop-in) never fires: the daemon pings while it works;
#  - the store's unit mounts the generation store (in the container's namespace, under its own
#    sandbox) and unmounts it when stopped; `systemctl reload` reads the configuration again;
#    after `systemctl restart` the first job walks its kept lane (nothing copied);
#  - `systemctl stop` lets a running job finish (KillMode=mixed; control-group kills it);
#  - with network.allow and the network drop-in (docs/egress.md), a job's request goes through
#    the egress proxy that the sandboxed daemon starts (its uid change to an id of its own, locked
#    in the drop-in's runtime directory; its sockets) to a server on the host's loopback, and an
#    unlisted port is refused;
#  - the path unit starts `drain` for each request, eight in a row without a start-rate
#    limit disabling the queue (with the default limit the sixth fails: tested by hand, see
#    docs/install.md), and starting the daemon stops the path unit (Conflicts);
#  - a second controller $R on the runc engine, under the same unit with the runc drop-in
#    (controller-runc.conf.in): its job runs, its result names the engine (isolation runc, kernel
#    host, Landlock among the walls), `unshare -U` is refused and told as a `syscall` wall, and a
#    direct connection is told with its destination (the listener reads the job's memory).
set -uo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
source tests/integration/lib.sh
source tests/integration/nspawn-lib.sh # the boot harness: install, boot, ct, die, cleanup
require_root
nspawn_require_tools

# ---- the installed files, the controller $W ------------------------------------------------
nspawn_install
W=it-$(printf %s "$tmp" | sha256sum | cut -c1-8)
ws=$tmp/ws
mkdir -p "$ws/priv" "$etc/tentaflake/workers" "$etc/tmpfiles.d"
echo "only the controller may read this" >"$ws/priv/secret"
chmod 0700 "$ws/priv"; chmod 0600 "$ws/priv/secret"
chown -R 10000:10000 "$ws"
# An upstream on the host's loopback (the container shares the host's network) for egress.
EGRESS_PORT=$(free_port)
egress_upstream "$tmp/upstream" 127.0.0.1 "$EGRESS_PORT" || die "the egress upstream did not start"
upstream=$UPSTREAM_PID
trap 'kill $upstream 2>/dev/null; nspawn_cleanup; remove_cgroup_group "tentaflake-worker-$W"; remove_cgroup_group "tentaflake-worker-$R"' EXIT
cat >"$etc/tentaflake/workers/$W.json" <<JSON
{"version": 1, "name": "$W", "workspace": "/srv/tfw-ws", "container_uid": 10000, "container_gid": 10000,
 "limits": {"memory": "512m", "memory_swap": "512m", "pids": 128},
 "network": {"allow": ["127.0.0.1:$EGRESS_PORT"]}}
JSON
sub() { sed -e "s|@NAME@|$W|g; s|@WORKSPACE@|/srv/tfw-ws|g; s|@GROUP@|10000|g" "$share/$1"; }
for u in "tentaflake-worker@$W.service.d" "tentaflake-worker-queue@$W.service.d"; do
        mkdir -p "$etc/system/$u"
        sub controller-workspace.conf.in >"$etc/system/$u/workspace.conf"
        sub controller-network.conf.in >"$etc/system/$u/network.conf"
done
# The test's own drop-in: a watchdog the daemon must feed every half second.
printf '[Service]\nWatchdogSec=1s\n' >"$etc/system/tentaflake-worker@$W.service.d/zz-test-watchdog.conf"
mkdir -p "$etc/system/tentaflake-worker-queue@$W.path.d"
sub controller-inbox.conf.in >"$etc/system/tentaflake-worker-queue@$W.path.d/inbox.conf"
sub controller-tmpfiles.conf.in >"$etc/tmpfiles.d/tentaflake-worker-$W.conf"
binds+=(--bind-ro="$etc/tmpfiles.d/tentaflake-worker-$W.conf:/etc/tmpfiles.d/tentaflake-worker-$W.conf"
        --bind="$ws:/srv/tfw-ws")

# The runc controller $R: its own config, workspace and drop-ins, the runc one among them.
R=ir-${W#it-}
rws=$tmp/rws
mkdir -p "$rws" && chown 10000:10000 "$rws"
cat >"$etc/tentaflake/workers/$R.json" <<JSON
{"version": 1, "name": "$R", "workspace": "/srv/tfw-rws", "container_uid": 10000, "container_gid": 10000,
 "runtime": {"driver": "runc"}, "limits": {"memory": "512m", "memory_swap": "512m", "pids": 128}}
JSON
rsub() { sed -e "s|@NAME@|$R|g; s|@WORKSPACE@|/srv/tfw-rws|g; s|@GROUP@|10000|g" "$share/$1"; }
mkdir -p "$etc/system/tentaflake-worker@$R.service.d"
rsub controller-workspace.conf.in >"$etc/system/tentaflake-worker@$R.service.d/workspace.conf"
rsub controller-runc.conf.in >"$etc/system/tentaflake-worker@$R.service.d/runc.conf"
rsub controller-tmpfiles.conf.in >"$etc/tmpfiles.d/tentaflake-worker-$R.conf"
# nspawn's own seccomp filter (a container's, not a host's) refuses the keyrings, which
# @system-service allows a unit on a host (runc joins a session keyring for the capsule), and
# the calls the runc drop-in allows: the container lets them through, the units decide.
binds+=(--bind-ro="$etc/tmpfiles.d/tentaflake-worker-$R.conf:/etc/tmpfiles.d/tentaflake-worker-$R.conf"
        --bind="$rws:/srv/tfw-rws"
        "--system-call-filter=@keyring pidfd_getfd sethostname landlock_create_ruleset landlock_add_rule landlock_restrict_self")

# ---- boot -----------------------------------------------------------------------------------
nspawn_boot tfw-boot-$$

check "tmpfiles made the results directory at boot: root:10000 02750" \
        test "$(ct stat -c '%a %u:%g' /run/tentaflake-worker-$W/results)" = "2750 0:10000"

# ---- the daemon -----------------------------------------------------------------------------
inbox=$ws/.tentaflake-worker/inbox
submit() { # submit ID JSON_BODY, as the controller (uid 10000): a dot-file, then a rename
        setpriv --reuid 10000 --regid 10000 --clear-groups sh -c \
                'printf "%s" "$2" >"$1/.$0.tmp" && mv "$1/.$0.tmp" "$1/$0.json"' "$1" "$inbox" "$2"
}
result() { # result ID FIELD: wait (bounded) for the result, print one field of it
        local i
        for i in $(seq 600); do ct test -e "/run/tentaflake-worker-$W/results/$1/result.json" && break; sleep 0.1; done
        ct cat "/run/tentaflake-worker-$W/results/$1/result.json" 2>/dev/null |
                python3 -c 'import json,sys; v=json.load(sys.stdin)[sys.argv[1]]; print("null" if v is None else v)' "$2"
}
show() { ct systemctl show -p "$2" --value "$1"; }

ct systemctl start "tentaflake-worker@$W.service" || die "tentaflake-worker@$W.service did not start"
check "the daemon is active (it sent READY=1)" test "$(show "tentaflake-worker@$W.service" ActiveState)" = active
check "it created the inbox for the controller" test -d "$inbox" -a "$(stat -c %u "$inbox")" = 10000
# Issue 15: worker.json, written at start under the unit's sandbox, root-owned for the controller.
check "it wrote worker.json (root:10000 0640)" \
        test "$(ct stat -c '%u:%g:%a' /srv/tfw-ws/.tentaflake-worker/worker.json 2>/dev/null)" = "0:10000:640"
check "worker.json names the results directory" \
        ct grep -q "\"results_dir\": \"/run/tentaflake-worker-$W/results\"" /srv/tfw-ws/.tentaflake-worker/worker.json

pid=$(show "tentaflake-worker@$W.service" MainPID)
status=$(ct cat "/proc/$pid/status")
check "the worker runs with no_new_privs" grep -qP '^NoNewPrivs:\t1$' <<<"$status"
check "the worker runs under a seccomp filter" grep -qP '^Seccomp:\t2$' <<<"$status"
caps=$(sed -n 's/^CapabilityBoundingSet=//p' systemd/tentaflake-worker@.service.in)
want=$(for c in $caps; do awk -v c="$c" '$1 == "#define" && $2 == c { print $3 }' /usr/include/linux/capability.h; done |
        awk '{ m += 2 ^ $1 } END { printf "%016x", m }')
check "its capability bounding set is the unit's ($want)" grep -qP "^CapBnd:\t$want$" <<<"$status"
mounts=$(ct cat "/proc/$pid/mountinfo")
mnt_opts() { awk -v p="$1" '$5 == p { o = $6 } END { print o }' <<<"$mounts"; }
check "its / is read-only (ProtectSystem=strict)" grep -q '^ro' <<<"$(mnt_opts /)"
check "its /usr/local is read-only" grep -q '^ro' <<<"$(mnt_opts /usr/local)"
check "its workspace is writable" grep -q '^rw' <<<"$(mnt_opts /srv/tfw-ws)"
check "its state directory is writable" grep -q '^rw' <<<"$(mnt_opts /var/lib/tentaflake-worker-$W)"
check "its runtime directory is writable" grep -q '^rw' <<<"$(mnt_opts /run/tentaflake-worker-$W)"
check "/home is hidden (ProtectHome)" grep -q '^ro' <<<"$(mnt_opts /home)"
check "the capsules' scratch is a tmpfs of its own mount namespace (issue 12)" \
        grep -q " /var/lib/tentaflake-worker-$W/scratch .* - tmpfs tentaflake-scratch " <<<"$mounts"
check "it has a /tmp of its own (PrivateTmp)" test "$(ct stat -c %i "/proc/$pid/root/tmp")" != "$(ct stat -c %i /tmp)"

submit j1 '{"version":1,"id":"j1","action_class":"local-reversible","argv":["sh","-c","echo hello from the capsule; cat priv/secret; id -u; mkdir -p artifacts/d; echo one > artifacts/d/a.txt; echo two > artifacts/b"]}'
check "a job runs in a capsule under the unit (status)" test "$(result j1 status)" = succeeded
[ "$(result j1 status)" = succeeded ] || echo "  j1 ended $(result j1 status): $(result j1 error): $(result j1 message)"
log=$(ct cat /run/tentaflake-worker-$W/results/j1/job.log)
check "its output is in job.log" grep -qx 'hello from the capsule' <<<"$log"
check "the snapshot read the controller's private file" grep -qx 'only the controller may read this' <<<"$log"
check "the job ran as the controller's uid" grep -qx 10000 <<<"$log"
check "artifacts were imported (the parser could drop its capabilities)" \
        test "$(ct cat /run/tentaflake-worker-$W/results/j1/artifacts/d/a.txt)" = one
modes=$(ct sh -c 'cd /run/tentaflake-worker-'"$W"'/results && stat -c "%a %u:%g %n" j1 j1/result.json j1/job.log j1/artifacts j1/artifacts/b j1/artifacts/d')
check "published modes 02750/0640, root:10000 ($(tr '\n' ' ' <<<"$modes"))" test "$modes" = "2750 0:10000 j1
640 0:10000 j1/result.json
640 0:10000 j1/job.log
2750 0:10000 j1/artifacts
640 0:10000 j1/artifacts/b
2750 0:10000 j1/artifacts/d"

submit ne1 "{\"version\":1,\"id\":\"ne1\",\"action_class\":\"local-reversible\",\"argv\":[\"sh\",\"-c\",\"curl -sS http://127.0.0.1:$EGRESS_PORT/hello; curl -s -o /dev/null -w 'code=%{http_code}' http://127.0.0.1:1/\"]}"
check "egress under the unit: a job reaches an allowlisted server through the proxy ($(result ne1 status))" \
        ct grep -qx "hello from 127.0.0.1:$EGRESS_PORT" /run/tentaflake-worker-$W/results/ne1/job.log
check "  ... and is refused an unlisted port" ct grep -q "code=403" /run/tentaflake-worker-$W/results/ne1/job.log
check "  ... both in its result" test "$(ct cat /run/tentaflake-worker-$W/results/ne1/result.json |
        python3 -c 'import json,sys; n=json.load(sys.stdin)["network"]; print(n["allowed"], n["refused"])')" = "1 1"
# The proxy's id was locked in /run/tentaflake-egress-ids, which the network drop-in adds to the
# unit's runtime directories: ProtectSystem=strict leaves the rest of /run read-only (systemd 252
# in this container leaves /run writable when ProtectKernelTunables= or ProtectProc= is set, so
# the unit's own settings are read back rather than relied on).
rtdirs=$(ct systemctl show -p RuntimeDirectory --value tentaflake-worker@$W.service)
check "  ... the drop-in gives the proxies' lock directory (RuntimeDirectory=$rtdirs)" \
        grep -qw tentaflake-egress-ids <<<"$rtdirs"
check "  ... where the proxy's id was locked ($(ct stat -c '%U %a' /run/tentaflake-egress-ids 2>&1))" \
        test "$(ct stat -c '%U %a %F' /run/tentaflake-egress-ids/ids.lock 2>&1)" = "root 600 regular empty file"

submit j2 '{"version":1,"id":"j2","action_class":"local-reversible","argv":["sleep","60"],"timeout_seconds":2}'
check "a timeout ends the capsule" test "$(result j2 status)" = timed_out

# The generation store (docs/snapshot.md, "After a restart"): mounted by its own unit in the
# container's namespace, outside the daemon's PrivateMounts=, so that a restart keeps it.
journal() { nsenter -t "$leader" -a journalctl -u "tentaflake-worker@$W.service" -o cat; }
in_journal() { journal | grep -qF -- "$1"; }
kept_all() { journal | grep -F "job '$1': generation " | grep -qE 'kept ([0-9]+) of \1 files'; }
check "the store's unit is active (RemainAfterExit)" test "$(show "tentaflake-worker-store@$W.service" ActiveState)" = active
check "  ... and mounted the generation store in the container's namespace" ct mountpoint -q "/var/lib/tentaflake-worker-$W/store"
check "  ... so the daemon did not mount one of its own" eval '! in_journal "was not mounted by tentaflake-worker-store"'
ct systemctl reload "tentaflake-worker@$W.service"
for _ in $(seq 100); do in_journal 'configuration reload:' && break; sleep 0.1; done
check "systemctl reload: the daemon read its configuration again, nothing changed" in_journal 'configuration reload: nothing to apply'
ct systemctl restart "tentaflake-worker@$W.service" || die "tentaflake-worker@$W.service did not restart"
submit j1r '{"version":1,"id":"j1r","action_class":"local-reversible","argv":["cat","priv/secret"]}'
check "after systemctl restart a job runs ($(result j1r status))" test "$(result j1r status)" = succeeded
check "  ... on the lane kept across the restart: a walk, every file kept, none copied" kept_all j1r
check "  ... nothing of the store dropped" eval '! in_journal "generation store:"'

# Stop while a job runs: the job finishes, the worker exits cleanly.
submit j3 '{"version":1,"id":"j3","action_class":"local-reversible","argv":["sh","-c","sleep 3; echo finished"]}'
for _ in $(seq 300); do ct grep -q '"running"' /run/tentaflake-worker-$W/results/j3.state.json 2>/dev/null && break; sleep 0.1; done
check "j3 is running before the stop" ct grep -q '"running"' /run/tentaflake-worker-$W/results/j3.state.json
check "the watchdog never fired (NRestarts=0)" test "$(show "tentaflake-worker@$W.service" NRestarts)" = 0
ct systemctl stop "tentaflake-worker@$W.service"
check "the stop was clean (Result=success)" test "$(show "tentaflake-worker@$W.service" Result)" = success
check "the job running at stop finished (KillMode=mixed)" test "$(result j3 status)" = succeeded
check "no watchdog timeout in the journal" bash -c "! nsenter -t $leader -a journalctl -u 'tentaflake-worker@$W.service' -o cat | grep -qi watchdog"

# ---- path activation --------------------------------------------------------------------------
ct systemctl start "tentaflake-worker-queue@$W.path" || die "the path unit did not start"
for i in 1 2 3 4 5 6 7 8; do
        submit "f$i" "{\"version\":1,\"id\":\"f$i\",\"action_class\":\"forbidden\",\"argv\":[\"true\"]}"
        check "request f$i was drained by a path-activated drain" test "$(result "f$i" status)" = rejected
done
submit p1 '{"version":1,"id":"p1","action_class":"local-reversible","argv":["echo","drained"]}'
check "a job runs through drain" test "$(result p1 status)" = succeeded
check "the path unit is still active after nine activations" test "$(show "tentaflake-worker-queue@$W.path" ActiveState)" = active
for _ in $(seq 100); do [ "$(show "tentaflake-worker-queue@$W.service" ActiveState)" = inactive ] && break; sleep 0.1; done
check "drain exited when idle, successfully" test "$(show "tentaflake-worker-queue@$W.service" ActiveState) $(show "tentaflake-worker-queue@$W.service" Result)" = "inactive success"
starts=$(ct journalctl -u "tentaflake-worker-queue@$W.service" -o cat | grep -c '^Starting ')
# ... plus the one the path unit's own start runs (Wants=: it makes a new controller's inbox).
check "drain was started once per request or fewer, and once at the path unit's start ($starts)" \
        test "$starts" -ge 1 -a "$starts" -le 10
ct systemctl start "tentaflake-worker@$W.service"
check "starting the daemon stops the path unit (Conflicts)" test "$(show "tentaflake-worker-queue@$W.path" ActiveState)" = inactive
ct systemctl stop "tentaflake-worker@$W.service"

# ---- path mode with approvals, and expiry without a daemon (issue 14) -------------------------
# Under the path unit only: an approved request starts drain by itself (the wake file approve
# leaves, PathExists= in the inbox drop-in) and `approve --wait` prints its result; with no unit
# active approve --wait says so at once, and starting the path unit later runs what was
# approved; deny publishes at once; the hourly gc timer's service expires a pending request.
i14_state() { # i14_state ID: the state in <id>.state.json, or "final" once result.json exists
        if ct test -e "/run/tentaflake-worker-$W/results/$1/result.json"; then echo final; return; fi
        ct cat "/run/tentaflake-worker-$W/results/$1.state.json" 2>/dev/null |
                python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null
}
i14_wait_state() { local i; for i in $(seq 600); do [ "$(i14_state "$1")" = "$2" ] && return 0; sleep 0.1; done; return 1; }
i14_drain_idle() { local i; for i in $(seq 600); do [ "$(show "tentaflake-worker-queue@$W.service" ActiveState)" = inactive ] && return 0; sleep 0.1; done; return 1; }
i14_tfw() { # the CLI in the container, as an operator; 300 s is the harness's bound, not a check
        ct env SUDO_USER=i14-operator timeout 300 /usr/local/bin/tentaflake-worker --config /etc/tentaflake/workers/$W.json "$@"
}
i14_pending() { # i14_pending ID ARGV_JSON: submit an irreversible request, wait until it is pending and drain is gone
        submit "$1" "{\"version\":1,\"id\":\"$1\",\"action_class\":\"irreversible\",\"argv\":$2,\"timeout_seconds\":60}"
        check "$1 was captured as pending by a path-activated drain" i14_wait_state "$1" pending
        check "  ... and drain exited with $1 pending" i14_drain_idle
}

ct systemctl start "tentaflake-worker-queue@$W.path" || die "the path unit did not start again"
i14_pending a1 '["echo","approved in path mode"]'
out=$(i14_tfw approve a1 --wait --timeout 180 2>&1); rc=$?
check "path mode: approve --wait returns (rc $rc)" test $rc = 0
check "  ... and prints the result of the irreversible request: $(tr '\n' '|' <<<"$out")" grep -qx 'status: succeeded, exit code 0' <<<"$out"
check "  ... which ran in a capsule" grep -qx 'approved in path mode' <<<"$(ct cat /run/tentaflake-worker-$W/results/a1/job.log 2>/dev/null)"
check "  ... approved by the operator" test "$(result a1 approval | grep -o i14-operator)" = i14-operator
check "drain took the wake file" i14_drain_idle
check "  ... none is left behind" ct test ! -e /var/lib/tentaflake-worker-$W/.wake

i14_pending d1 '["echo","must not run"]'
check "path mode: deny d1" quiet i14_tfw deny d1 --reason 'not today'
check "  ... d1 is published denied, no daemon needed" test "$(result d1 status)" = denied

i14_pending n1 '["echo","approved while no worker could start"]'
ct systemctl stop "tentaflake-worker-queue@$W.path"
out=$(i14_tfw approve n1 --wait 2>&1); rc=$?
check "no unit active: approve --wait exits 1 at once (rc $rc)" test $rc = 1
check "  ... saying no worker can start: $out" grep -q "approve 'n1': approved and queued, but no worker runs for '$W'" <<<"$out"
check "  ... having asked systemd, not guessed" grep -q "none of tentaflake-worker@$W.service, tentaflake-worker-queue@$W.path is active" <<<"$out"
ct systemctl start "tentaflake-worker-queue@$W.path" || die "the path unit did not start a third time"
check "starting the path unit runs what was approved meanwhile" test "$(result n1 status)" = succeeded

# Expiry without a daemon: a pending request made 100 hours old (pending_ttl_hours is 72).
i14_pending e1 '["echo","never approved"]'
ct python3 - /var/lib/tentaflake-worker-$W/requests/e1/state.json <<'PY'
import json, sys, time
p = sys.argv[1]; r = json.load(open(p))
r["submitted_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 100 * 3600))
open(p, "w").write(json.dumps(r))
PY
ct systemctl start "tentaflake-worker-gc@$W.service"
check "the gc service ran under its sandbox (Result=success)" test "$(show "tentaflake-worker-gc@$W.service" Result)" = success
check "  ... and expired the old pending request" test "$(result e1 status)" = expired
check "  ... publishing why" grep -q pending_ttl_hours <<<"$(result e1 message)"
check "  ... the audit log was not rotated within its day (gc --scheduled)" \
        test -z "$(ct find /var/lib/tentaflake-worker-$W/audit -name 'audit-*.jsonl' 2>/dev/null)"
ct systemctl start "tentaflake-worker-gc@$W.timer" || die "the gc timer did not start"
check "the gc timer is active" test "$(show "tentaflake-worker-gc@$W.timer" ActiveState)" = active
check "  ... with a next run ($(show "tentaflake-worker-gc@$W.timer" NextElapseUSecRealtime))" \
        test -n "$(show "tentaflake-worker-gc@$W.timer" NextElapseUSecRealtime)"
check "  ... of the gc service" test "$(show "tentaflake-worker-gc@$W.timer" Triggers)" = "tentaflake-worker-gc@$W.service"
ct systemctl stop "tentaflake-worker-queue@$W.path" "tentaflake-worker-gc@$W.timer"

# The store's unit under its own sandbox (issue 47: no capability but SYS_ADMIN, no socket, no
# privileged system call but @mount's, a network namespace but no mount namespace): it mounted
# the store in the container's namespace (checked above), and stopping it unmounts it there.
ct systemctl stop "tentaflake-worker-store@$W.service"
check "stopping the store's unit succeeds ($(show "tentaflake-worker-store@$W.service" Result))" \
        test "$(show "tentaflake-worker-store@$W.service" Result)" = success
check "  ... and unmounts the generation store in the container's namespace" \
        ct sh -c "! mountpoint -q /var/lib/tentaflake-worker-$W/store"

# ---- the runc engine under the same unit, with the runc drop-in ------------------------------
echo "-- [$SECONDS s] the runc controller"
ct systemctl start "tentaflake-worker@$R.service" || die "tentaflake-worker@$R.service did not start"
rres=/run/tentaflake-worker-$R/results
# The job: output, a refused unshare, a direct connection (python3 of the host's /usr).
r1=$(python3 -c 'import json, sys; print(json.dumps({"version": 1, "id": "r1", "action_class": "local-reversible",
    "argv": ["sh", "-c", sys.argv[1]]}))' 'echo hello from runc; unshare -U true; echo unshare=$?
exec python3 -c "import socket
try: socket.create_connection((\"203.0.113.1\", 443), 5)
except OSError as e: print(e.errno)"')
setpriv --reuid 10000 --regid 10000 --clear-groups sh -c 'printf "%s" "$1" >"$0/.r1.tmp" && mv "$0/.r1.tmp" "$0/r1.json"' \
        "$rws/.tentaflake-worker/inbox" "$r1"
for _ in $(seq 600); do ct test -e "$rres/r1/result.json" && break; sleep 0.1; done
rget() { ct cat "$rres/r1/result.json" 2>/dev/null | python3 -c 'import json,sys; r=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
check "runc under the unit: the job succeeded ($(rget 'r["status"], r.get("message")'))" test "$(rget 'r["status"]')" = succeeded
check "  ... its output is in job.log" ct grep -qx 'hello from runc' "$rres/r1/job.log"
check "  ... its result names the engine: $(rget 'r["isolation"]')" \
        test "$(rget 'r["isolation"]["engine"], r["isolation"]["kernel"], "landlock" in r["isolation"]["walls"]')" = "('runc', 'host', True)"
check "  ... unshare -U was refused (EPERM, exit 1)" ct grep -qx 'unshare=1' "$rres/r1/job.log"
check "  ... and told as a syscall wall: $(rget 'r["walls"]')" \
        test "$(rget '[w["count"] for w in r["walls"] if w["wall"] == "syscall" and w["detail"] == "unshare"]')" = "[1]"
check "  ... a direct connection was refused (ENETUNREACH)" ct grep -qx 101 "$rres/r1/job.log"
check "  ... and told with its destination (the listener read the job's memory)" \
        test "$(rget '[w["count"] for w in r["walls"] if w["wall"] == "network" and "203.0.113.1:443" in w["detail"]]')" = "[1]"
ct systemctl stop "tentaflake-worker@$R.service" "tentaflake-worker-store@$R.service"
check "the runc worker stopped cleanly ($(show "tentaflake-worker@$R.service" Result))" \
        test "$(show "tentaflake-worker@$R.service" Result)" = success
echo "-- [$SECONDS s] done"

finish
