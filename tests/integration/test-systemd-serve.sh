#!/usr/bin/env bash
# The serve worker's units under a real systemd (issue 13, item 1), booted as
# tests/integration/nspawn-lib.sh says, against the test forge of tests/server/ (started on the
# host by serve-lib.sh; the container shares the host's network, the worker does not: it gets
# to the forge through its proxy's socket). A worker "i13-ci-1" is set up as
# docs/validation.md says: /etc/tentaflake/serve/i13-ci-1.{conf,key,token}.
#
# Checked, through systemctl, the worker's /proc and the forge's state:
#  - tentaflake-worker-serve@i13-ci-1.service starts (Type=notify: READY came, and the worker
#    had logged that it claims) and is sandboxed: no_new_privs, a seccomp filter, no network
#    interface but lo, the key and the token only in its credentials directory (the originals
#    in /etc/tentaflake/serve are inaccessible), neither in its environment nor its command line;
#  - it claims through the proxy, runs a check in a real capsule, and the pass it signs
#    verifies; a three-second watchdog (a test drop-in) never fires while a seven-second
#    check runs;
#  - the unit's MemoryMax=1280M and TasksMax=320 are what systemd and the kernel apply to its
#    cgroup, and the running check's sandbox is not in that cgroup (issue 33);
#  - `systemctl stop` while a check runs: the check finishes and passes, the worker exits 0
#    (Result=success);
#  - kill -9 of the worker while a check runs: systemd restarts it (Restart=on-failure), the
#    restarted worker removes the killed one's capsule (its log says so and runsc lists no
#    container of the killed run), and the job, handed out again when its lease ran out,
#    passes.
set -uo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
source tests/integration/lib.sh
source tests/integration/nspawn-lib.sh
require_root
nspawn_require_tools
command -v openssl >/dev/null || { echo "SKIP: openssl is not installed"; exit 77; }
[ -x /usr/lib/systemd/systemd-socket-proxyd ] || { echo "SKIP: systemd-socket-proxyd is not installed"; exit 77; }
source tests/integration/serve-lib.sh # $tmp, the forge ($URL, $TOKEN), $tmp/ci.key, q, enqueue ...

label=i13-ci-1-$RUN # this run's own: its cgroup group in the host's hierarchies is never another's
unit=tentaflake-worker-serve@$label.service
state=/var/lib/tentaflake-worker-serve-$label

# ---- the installed files, the worker i13-ci-1 -----------------------------------------------
nspawn_install
install -d -m 0700 "$etc/tentaflake/serve"
cat >"$etc/tentaflake/serve/$label.conf" <<EOF
TENTAFLAKE_SERVE_ADDRESS=${URL#http://}
TENTAFLAKE_SERVE_FLAGS="--server $URL --system-mounts-identity debian-12 --lease-secs 6 --wait-secs 1 --retry-after-secs 1"
EOF
install -m 0600 "$tmp/ci.key" "$etc/tentaflake/serve/$label.key"
install -m 0600 "$tmp/token" "$etc/tentaflake/serve/$label.token"
# The test's own drop-in: a watchdog the worker must feed every second.
mkdir -p "$etc/system/$unit.d"
printf '[Service]\nWatchdogSec=3s\n' >"$etc/system/$unit.d/zz-test-watchdog.conf"

# ---- boot -----------------------------------------------------------------------------------
nspawn_boot "i13-serve-$$"
show() { ct systemctl show -p "$2" --value "$1"; }
journal() { ct journalctl -u "$unit" -o cat --no-pager; }

# ---- start, claim, pass -----------------------------------------------------------------------
# nspawn gave the container's systemd the v1 controller hierarchies read-only at boot, so it put
# no unit in them (no MemoryMax= or TasksMax= could apply); re-executed now that nspawn_boot
# has made them writable, it does, as on a host.
ct systemctl daemon-reexec || die "daemon-reexec"
ct systemctl start "$unit" || die "$unit did not start"
check "the worker is active (it sent READY=1)" test "$(show "$unit" ActiveState)" = active
check "READY came once it claims (the log line before the first claim)" grep -q "claiming from $URL" <<<"$(journal)"
pid=$(show "$unit" MainPID)
status=$(ct cat "/proc/$pid/status")
check "the worker runs with no_new_privs" grep -qP '^NoNewPrivs:\t1$' <<<"$status"
check "the worker runs under a seccomp filter" grep -qP '^Seccomp:\t2$' <<<"$status"
check "the worker has no network interface but lo (PrivateNetwork)" \
        test "$(ct cat "/proc/$pid/net/dev" | tail -n +3 | cut -d: -f1 | tr -d ' ')" = lo
creds=$(ct sh -c "ls /run/credentials/$unit")
check "the key and the token are its credentials" test "$(tr '\n' ' ' <<<"$creds")" = "key token "
check "the originals in /etc/tentaflake/serve are out of its reach (InaccessiblePaths)" \
        test -z "$(ct nsenter -t "$pid" -m ls -A /etc/tentaflake/serve 2>/dev/null)"
check "the token is not in its environment" bash -c "! nsenter -t $leader -a cat /proc/$pid/environ | tr '\0' '\n' | grep -qF -- '$TOKEN'"
cmdline=$(ct cat "/proc/$pid/cmdline" | tr '\0' ' ')
check "its command line names the credentials, not the files ($cmdline)" \
        grep -q -- "--key /run/credentials/$unit/key --token-file /run/credentials/$unit/token" <<<"$cmdline"
check "the token is not on its command line" bash -c "! grep -qF -- '$TOKEN' <<<'$cmdline'"

enqueue pass1 "$TREE" '{"argv":["sh","-c","cat ok.txt && ./run.sh"],"timeout_secs":60}'
final pass1 120
check "pass1 was claimed by the unit's worker and passed" \
        [ "$(q "(jobs['pass1']['history'][-1].get('worker'), jobs['pass1']['history'][-1].get('status'))")" = "('$label', 'pass')" ]
attestation pass1 pass1.att
check "its attestation verifies and names the tree and the label" \
        verify pass1.att --expect "subject.gitTree=$TREE" --expect predicate.result=pass --expect "predicate.worker=$label"

# A check that runs for more than twice the watchdog period, the worker active all along: the
# watchdog must not fire (the same process, no restart). The wait is on the job's end.
enqueue wd1 "$TREE" '{"argv":["sh","-c","sleep 7; echo awake"],"timeout_secs":60}'
# Issue 33: the unit's cgroup is bounded (MemoryMax=1280M, TasksMax=320 for one lane), and what
# it bounds is the worker's side: the capsule running wd1 is in a cgroup of its own outside it.
cg=$(show "$unit" ControlGroup)
unit_limit() { # unit_limit CONTROLLER V1_FILE V2_FILE: the unit's own cgroup's value
        if ct test -e "/sys/fs/cgroup/$1$cg/$2"; then ct cat "/sys/fs/cgroup/$1$cg/$2"; else ct cat "/sys/fs/cgroup$cg/$3"; fi
}
check "systemd applies MemoryMax=1280M and TasksMax=320 to the unit ($(show "$unit" MemoryMax) $(show "$unit" TasksMax))" \
        test "$(show "$unit" MemoryMax) $(show "$unit" TasksMax)" = "1342177280 320"
check "the kernel holds the unit's cgroup to them (memory $(unit_limit memory memory.limit_in_bytes memory.max), pids $(unit_limit pids pids.max pids.max))" \
        test "$(unit_limit memory memory.limit_in_bytes memory.max) $(unit_limit pids pids.max pids.max)" = "1342177280 320"
sandbox_pid() { ct runsc --root "$state/runsc" list -format=json 2>/dev/null |
        python3 -c 'import json,sys; l=[c for c in json.load(sys.stdin) or [] if c.get("status") == "running"]; print(l[0]["pid"] if l else "")'; }
# A process's memory cgroup as the kernel shows it (v1's memory line, else the unified one).
memcg() {
        local c; c=$(ct cat "/proc/$1/cgroup" 2>/dev/null) || return 1
        sed -n 's/^[0-9]*:memory:\(.*\)/\1/p' <<<"$c" | grep . || sed -n 's/^0:://p' <<<"$c"
}
wait_until "jobs['wd1']['state'] == 'claimed'" 60
sp= sp_cg=
for _ in $(seq 300); do sp=$(sandbox_pid); [ -n "$sp" ] && sp_cg=$(memcg "$sp") && break; sleep 0.1; done
w_cg=$(memcg "$(show "$unit" MainPID)")
outside_unit() { [ "$w_cg" = "$cg" ] && [ -n "$sp_cg" ] && [ "${sp_cg#"$cg"}" = "$sp_cg" ]; }
check "a running capsule's sandbox ($sp, in '$sp_cg') is outside the unit's cgroup, where the worker is ('$w_cg')" outside_unit
final wd1 60
check "wd1 passed" [ "$(q "jobs['wd1']['history'][-1].get('status')")" = pass ]
check "the watchdog never fired while it ran (same process, NRestarts=0)" \
        test "$(show "$unit" MainPID) $(show "$unit" NRestarts)" = "$pid 0"

# ---- systemctl stop while a check runs: it finishes, exit 0 ------------------------------------
enqueue stop1 "$TREE" '{"argv":["sh","-c","sleep 3; echo finished"],"timeout_secs":60}'
wait_until "jobs['stop1']['state'] == 'claimed'" 60
ct systemctl stop "$unit"
check "the stop was clean (Result=success, exit status 0)" \
        test "$(show "$unit" Result) $(show "$unit" ExecMainStatus)" = "success 0"
final stop1 60
check "the check running at stop finished and passed" [ "$(q "jobs['stop1']['history'][-1].get('status')")" = pass ]
check "no watchdog timeout in the journal" bash -c "! nsenter -t $leader -a journalctl -u '$unit' -o cat | grep -qi watchdog"

# ---- kill -9 while a check runs: restart, the predecessor's capsule removed --------------------
ct systemctl start "$unit" || die "$unit did not start again"
enqueue k9 "$TREE" '{"argv":["sh","-c","sleep 8; echo survived"],"timeout_secs":60}'
wait_until "jobs['k9']['state'] == 'claimed'" 60
capsules() { ct runsc --root "$state/runsc" list -quiet 2>/dev/null | grep -c .; }
for _ in $(seq 300); do [ "$(capsules)" -ge 1 ] && break; sleep 0.1; done
check "k9's capsule is running" test "$(capsules)" -ge 1
old=$(show "$unit" MainPID)
ct kill -KILL "$old"
for _ in $(seq 600); do # RestartSec=10s, then READY
        [ "$(show "$unit" NRestarts)" -ge 1 ] && [ "$(show "$unit" ActiveState)" = active ] && break
        sleep 0.1
done
check "systemd restarted the killed worker" test "$(show "$unit" NRestarts) $(show "$unit" ActiveState)" = "1 active"
check "the restarted worker is another process" test "$(show "$unit" MainPID)" != "$old"
check "it removed the killed worker's capsule" grep -qE 'removed [1-9][0-9]* container\(s\) left by a previous run' <<<"$(journal)"
final k9 120
check "k9 was handed out again and passed" \
        [ "$(q "(jobs['k9']['history'][-1].get('status'), 'expire' in [h['event'] for h in jobs['k9']['history']])")" = "('pass', True)" ]
check "exactly one attestation for k9" \
        [ "$(q "sum(1 for h in jobs['k9']['history'] if h['event']=='complete' and h.get('attestation'))")" = 1 ]
ct systemctl stop "$unit"
check "after the last stop no capsule is left" test "$(capsules)" = 0
check "the proxy ran as a dynamic user" \
        test "$(show "tentaflake-worker-serve-proxy@$label.service" DynamicUser)" = yes

finish
