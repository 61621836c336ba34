#!/usr/bin/env bash
# The systemd units as `make install` installs them, checked offline:
#  - make install puts the five units (ExecStart naming the installed binary) and the
#    per-controller templates where SYSTEMDUNITDIR and PKGDATADIR say;
#  - systemd-analyze verify accepts every unit with a controller's drop-ins, and refuses the
#    daemon when the installed binary is missing and the path unit without its inbox drop-in;
#  - systemd-analyze security --offline=yes: the exposure of every service is at most
#    MAX_EXPOSURE (docs/install.md), the generation store's included, and much higher without
#    the sandboxing block;
#  - the sandboxing block is the same in every service, and each hardening setting the issue
#    asks for is either set or explained by a comment on the line before;
#  - the settings the worker's behaviour depends on (Type=notify, watchdog, stop timeout above
#    the 60 s grace, KillMode=mixed, Delegate, no start-rate limit, Conflicts), and the bounds
#    of the daemon's, drain's and serve's cgroups (MemoryMax, TasksMax; issue 33);
#  - the path unit's drop-in also watches the wake file approve leaves (issue 14), and the
#    hourly gc timer runs `gc --scheduled` (expiry without a daemon);
#  - the tmpfiles template creates the results directory root:<gid> 02750 (as root);
#  - the serve worker's units (issue 13): verify, exposure at most MAX_EXPOSURE for the worker
#    and its proxy, the inbox sandboxing block with only the state directory changed, the key
#    and the token as credentials and never in the environment or on the command line;
#  - network for jobs (docs/egress.md): make install puts the egress proxy in LIBEXECDIR and the
#    network drop-in's template in PKGDATADIR; a second controller "net" with that drop-in on
#    its daemon and drain, and a serve worker "ci-2" with it (--allow-host), verify, get the
#    host's network (PrivateNetwork=no, IP and netlink sockets, no IPAddressDeny) and keep the
#    rest of the sandbox, their exposure bounded by MAX_NET_EXPOSURE;
#  - the runc engine (docs/install.md, "The runc engine"): a third controller "rc" and a serve
#    worker "ci-3" with the runc drop-in verify, get exactly what runc's own work needs
#    (CAP_SYS_PTRACE, the hostname, IP and netlink sockets, every namespace) and keep the rest
#    of the sandbox, the network included, their exposure bounded by MAX_RUNC_EXPOSURE.
# What the settings do to a running worker is tests/integration/test-systemd-boot.sh.
set -uo pipefail
BUILD=${BUILD:-build}
MAX_EXPOSURE=3.1
# The daemon and drain of a controller, and a serve worker, with the network drop-in
# (PrivateNetwork, RestrictAddressFamilies and IPAddressDeny opened): each measured 4.0 with
# systemd 252; the bound is one step above.
MAX_NET_EXPOSURE=4.1
# ... and with the runc drop-in (CAP_SYS_PTRACE, the hostname, IP and netlink sockets, every
# namespace): measured 3.8 with systemd 252; the bound is one step above.
MAX_RUNC_EXPOSURE=3.9
cd "$(dirname "$0")/../.."
source tests/integration/lib.sh

if ! command -v systemd-analyze >/dev/null; then
        echo "SKIP: systemd-analyze is not installed"
        exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
units=$root/usr/local/lib/systemd/system
share=$root/usr/local/share/tentaflake-worker
# systemd-analyze verify runs man(1) for each unit's Documentation=man:tentaflake-worker(8):
# let it find the page make install put below $root (so verify also proves it is installed).
export MANPATH=$root/usr/local/share/man

# 1. make install (a nested make: drop the outer make's jobserver).
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s install DESTDIR="$root" PREFIX=/usr/local \
        BUILD="$BUILD" >"$tmp/install.log" 2>&1; then
        echo "FAIL: make install:"; cat "$tmp/install.log"; exit 1
fi
for u in 'tentaflake-worker@.service' 'tentaflake-worker-queue@.service' 'tentaflake-worker-queue@.path' \
         'tentaflake-worker-gc@.service' 'tentaflake-worker-gc@.timer' 'tentaflake-worker-store@.service' \
         'tentaflake-worker-serve@.service' 'tentaflake-worker-serve-proxy@.service' 'tentaflake-worker-serve-proxy@.socket'; do
        check "make install installs $u 0644" test "$(stat -c %a "$units/$u" 2>/dev/null)" = 644
done
for t in controller-workspace.conf.in controller-inbox.conf.in controller-tmpfiles.conf.in controller-network.conf.in \
         controller-runc.conf.in; do
        check "make install installs the template $t" test -f "$share/$t"
done
check "make install installs the egress proxy beside the capsule init, 0755" \
        test "$(stat -c %a "$root/usr/local/libexec/tentaflake-worker/tentaflake-egress-proxy" 2>/dev/null)" = 755
check "ExecStart names the installed binary (run)" \
        grep -qx 'ExecStart=/usr/local/bin/tentaflake-worker --config /etc/tentaflake/workers/%i.json run' "$units/tentaflake-worker@.service"
check "ExecStart names the installed binary (drain)" \
        grep -qx 'ExecStart=/usr/local/bin/tentaflake-worker --config /etc/tentaflake/workers/%i.json drain' "$units/tentaflake-worker-queue@.service"
check "ExecStart names the installed binary (gc --scheduled)" \
        grep -qx 'ExecStart=/usr/local/bin/tentaflake-worker --config /etc/tentaflake/workers/%i.json gc --scheduled' "$units/tentaflake-worker-gc@.service"
check "systemctl reload sends the daemon SIGHUP" grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$units/tentaflake-worker@.service"
check "ExecStart names the installed binary (store mount)" \
        grep -qx 'ExecStart=/usr/local/bin/tentaflake-worker --config /etc/tentaflake/workers/%i.json store mount' "$units/tentaflake-worker-store@.service"
# systemd 252 makes a mount namespace for each of these (and for PrivateNetwork= unless
# PrivateMounts=no is set): the store's mount would land there, not in the host's.
check "the daemon requires the store's unit, which mounts in the host's namespace (nothing that makes a mount namespace)" \
        sh -c "grep -qx 'Requires=tentaflake-worker-store@%i.service' '$units/tentaflake-worker@.service' &&
               grep -qx 'Requires=tentaflake-worker-store@%i.service' '$units/tentaflake-worker-queue@.service' &&
               ! grep -qE '^(ProtectSystem|PrivateTmp|PrivateDevices|PrivateIPC|ProtectHome|ProtectKernelTunables|ProtectKernelModules|ProtectKernelLogs|ProtectControlGroups|ProtectProc|ProcSubset|ReadWritePaths|ReadOnlyPaths|InaccessiblePaths|TemporaryFileSystem|BindPaths|BindReadOnlyPaths|RootDirectory|RootImage|MountFlags)=' '$units/tentaflake-worker-store@.service' &&
               grep -qx 'PrivateMounts=no' '$units/tentaflake-worker-store@.service'"
check "ExecStart names the installed binary (serve), the credentials and the proxy's socket" \
        grep -qx 'ExecStart=/usr/local/bin/tentaflake-worker serve $TENTAFLAKE_SERVE_FLAGS --label %i --key %d/key --token-file %d/token --state-dir /var/lib/tentaflake-worker-serve-%i --server-socket /run/tentaflake-worker-serve-%i.sock' "$units/tentaflake-worker-serve@.service"
check "the proxy runs systemd-socket-proxyd" \
        grep -qx 'ExecStart=/usr/lib/systemd/systemd-socket-proxyd ${TENTAFLAKE_SERVE_ADDRESS}' "$units/tentaflake-worker-serve-proxy@.service"
check "no placeholder is left in the installed units" bash -c "! grep -q '@[A-Z]*@' '$units'/*"

# A controller "demo", set up as docs/install.md says, plus the distribution's own units
# (sysinit.target, ...) so that verify can resolve the dependencies inside the root.
sysunits=/usr/lib/systemd/system
[ -d "$sysunits" ] || sysunits=/lib/systemd/system
mkdir -p "$root/usr/lib/systemd" "$root/etc/systemd/system" "$root/etc/tmpfiles.d"
cp -a "$sysunits" "$root/usr/lib/systemd/"
# ... but not the units of a package of this worker installed on the host: only make install's
# are checked.
rm -f "$root/usr/lib/systemd/system/tentaflake-worker"*
sub() { sed -e "s|@NAME@|demo|g; s|@WORKSPACE@|/srv/demo/ws|g; s|@GROUP@|10000|g" "$share/$1"; }
for u in 'tentaflake-worker@demo.service.d' 'tentaflake-worker-queue@demo.service.d'; do
        mkdir -p "$root/etc/systemd/system/$u"
        sub controller-workspace.conf.in >"$root/etc/systemd/system/$u/workspace.conf"
done
mkdir -p "$root/etc/systemd/system/tentaflake-worker-queue@demo.path.d"
sub controller-inbox.conf.in >"$root/etc/systemd/system/tentaflake-worker-queue@demo.path.d/inbox.conf"
sub controller-tmpfiles.conf.in >"$root/etc/tmpfiles.d/tentaflake-worker-demo.conf"
# A second controller "net" with network for its jobs (docs/install.md, "Network for jobs"):
# its workspace and inbox drop-ins, and the network drop-in on its daemon and drain.
subnet() { sed -e "s|@NAME@|net|g; s|@WORKSPACE@|/srv/net/ws|g; s|@GROUP@|10001|g" "$share/$1"; }
for u in 'tentaflake-worker@net.service.d' 'tentaflake-worker-queue@net.service.d'; do
        mkdir -p "$root/etc/systemd/system/$u"
        subnet controller-workspace.conf.in >"$root/etc/systemd/system/$u/workspace.conf"
        subnet controller-network.conf.in >"$root/etc/systemd/system/$u/network.conf"
done
# A third controller "rc" on the runc engine (docs/install.md, "The runc engine"): the runc
# drop-in on its daemon and drain, and on a serve worker "ci-3" (--sandbox runc).
subrc() { sed -e "s|@NAME@|rc|g; s|@WORKSPACE@|/srv/rc/ws|g; s|@GROUP@|10002|g" "$share/$1"; }
for u in 'tentaflake-worker@rc.service.d' 'tentaflake-worker-queue@rc.service.d'; do
        mkdir -p "$root/etc/systemd/system/$u"
        subrc controller-workspace.conf.in >"$root/etc/systemd/system/$u/workspace.conf"
        subrc controller-runc.conf.in >"$root/etc/systemd/system/$u/runc.conf"
done
mkdir -p "$root/etc/systemd/system/tentaflake-worker-queue@rc.path.d"
subrc controller-inbox.conf.in >"$root/etc/systemd/system/tentaflake-worker-queue@rc.path.d/inbox.conf"
mkdir -p "$root/etc/systemd/system/tentaflake-worker-queue@net.path.d"
subnet controller-inbox.conf.in >"$root/etc/systemd/system/tentaflake-worker-queue@net.path.d/inbox.conf"
# A serve worker "ci-1", set up as docs/validation.md says; the proxy binary the unit names.
mkdir -p "$root/etc/tentaflake/serve" "$root/usr/lib/systemd"
printf 'TENTAFLAKE_SERVE_ADDRESS=forge.example:443\nTENTAFLAKE_SERVE_FLAGS="--server https://forge.example"\n' \
        >"$root/etc/tentaflake/serve/ci-1.conf"
install -m 0600 /dev/null "$root/etc/tentaflake/serve/ci-1.key"
install -m 0600 /dev/null "$root/etc/tentaflake/serve/ci-1.token"
[ -x "$root/usr/lib/systemd/systemd-socket-proxyd" ] || cp /usr/lib/systemd/systemd-socket-proxyd "$root/usr/lib/systemd/"
# ExecReload= of the daemon's unit: /bin/kill, as on the host.
mkdir -p "$root/bin" && { [ -x "$root/bin/kill" ] || cp /bin/kill "$root/bin/kill"; }
# A serve worker "ci-2" whose flags give policies network (--allow-network --allow-host), with
# the network drop-in (docs/validation.md, "Network for checks").
printf 'TENTAFLAKE_SERVE_ADDRESS=forge.example:443\nTENTAFLAKE_SERVE_FLAGS="--server https://forge.example --allow-network --allow-host registry.npmjs.org:443"\n' \
        >"$root/etc/tentaflake/serve/ci-2.conf"
install -m 0600 /dev/null "$root/etc/tentaflake/serve/ci-2.key"
install -m 0600 /dev/null "$root/etc/tentaflake/serve/ci-2.token"
mkdir -p "$root/etc/systemd/system/tentaflake-worker-serve@ci-2.service.d"
sed -e "s|@NAME@|ci-2|g" "$share/controller-network.conf.in" >"$root/etc/systemd/system/tentaflake-worker-serve@ci-2.service.d/network.conf"
printf 'TENTAFLAKE_SERVE_ADDRESS=forge.example:443\nTENTAFLAKE_SERVE_FLAGS="--server https://forge.example --sandbox runc"\n' \
        >"$root/etc/tentaflake/serve/ci-3.conf"
install -m 0600 /dev/null "$root/etc/tentaflake/serve/ci-3.key"
install -m 0600 /dev/null "$root/etc/tentaflake/serve/ci-3.token"
mkdir -p "$root/etc/systemd/system/tentaflake-worker-serve@ci-3.service.d"
sed -e "s|@NAME@|ci-3|g" "$share/controller-runc.conf.in" >"$root/etc/systemd/system/tentaflake-worker-serve@ci-3.service.d/runc.conf"

# 2. verify: clean, and able to fail.
all=('tentaflake-worker@demo.service' 'tentaflake-worker-queue@demo.service' 'tentaflake-worker-queue@demo.path'
     'tentaflake-worker-gc@demo.service' 'tentaflake-worker-gc@demo.timer' 'tentaflake-worker-store@demo.service'
     'tentaflake-worker@net.service' 'tentaflake-worker-queue@net.service' 'tentaflake-worker-queue@net.path'
     'tentaflake-worker-serve@ci-1.service' 'tentaflake-worker-serve-proxy@ci-1.service' 'tentaflake-worker-serve-proxy@ci-1.socket'
     'tentaflake-worker-serve@ci-2.service' 'tentaflake-worker@rc.service' 'tentaflake-worker-queue@rc.service'
     'tentaflake-worker-serve@ci-3.service')
out=$(systemd-analyze verify --root="$root" "${all[@]}" 2>&1); rc=$?
check "systemd-analyze verify: every unit, no warning (rc $rc: $out)" test $rc -eq 0 -a -z "$out"
for u in "$units"/*; do
        doc=$(sed -n 's/^Documentation=man:tentaflake-worker(8) file://p' "$u")
        check "$(basename "$u"): Documentation= names the man page and an installed doc ($doc)" test -n "$doc" -a -f "$root$doc"
done
mv "$root/usr/local/bin/tentaflake-worker" "$tmp/bin"
out=$(systemd-analyze verify --root="$root" 'tentaflake-worker@demo.service' 2>&1)
check "verify refuses the daemon without its binary" grep -q 'tentaflake-worker is not executable' <<<"$out"
mv "$tmp/bin" "$root/usr/local/bin/tentaflake-worker"
mv "$root/etc/systemd/system/tentaflake-worker-queue@demo.path.d" "$tmp/path.d"
out=$(systemd-analyze verify --root="$root" 'tentaflake-worker-queue@demo.path' 2>&1)
check "without the inbox drop-in the path unit refuses to load" grep -q 'lacks path setting' <<<"$out"
mv "$tmp/path.d" "$root/etc/systemd/system/tentaflake-worker-queue@demo.path.d"

# 3. security: at most MAX_EXPOSURE, and the measure moves when the sandboxing goes.
exposure() { # exposure UNIT: the overall exposure as printed, e.g. 3.3
        systemd-analyze security --offline=yes --root="$root" "$1" 2>&1 |
                sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p'
}
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 <= b + 0) }'; }
# Every service make install installs (a new one cannot be left out): the serve worker's as
# ci-1, a controller's as demo.
services=()
for f in "$units"/*@.service; do
        t=$(basename "$f" .service)
        case $t in tentaflake-worker-serve*) services+=("${t}ci-1.service") ;; *) services+=("${t}demo.service") ;; esac
done
check "the exposure is measured for the six services (${services[*]})" test "${#services[@]}" -eq 6
for u in "${services[@]}"; do
        e=$(exposure "$u")
        echo "exposure of $u: $e (at most $MAX_EXPOSURE)"
        check "exposure of $u ($e) at most $MAX_EXPOSURE" le "$e" "$MAX_EXPOSURE"
done
# With the network drop-in: more open (the host's network), still bounded; what it opens is
# exactly the network, read back from systemd's own view of the merged unit.
for u in 'tentaflake-worker@net.service' 'tentaflake-worker-queue@net.service' 'tentaflake-worker-serve@ci-2.service'; do
        e=$(exposure "$u")
        echo "exposure of $u (network drop-in): $e (at most $MAX_NET_EXPOSURE)"
        check "exposure of $u ($e) at most $MAX_NET_EXPOSURE" le "$e" "$MAX_NET_EXPOSURE"
        plain=$(exposure "$(sed 's/@net\./@demo./; s/@ci-2\./@ci-1./' <<<"$u")")
        check "exposure of $u ($e) above the same unit's without the drop-in ($plain)" \
                awk -v a="$e" -v b="$plain" 'BEGIN { exit !(a != "" && b != "" && a + 0 > b + 0) }'
        sec=$(systemd-analyze security --offline=yes --root="$root" "$u" 2>&1)
        check "$u: the drop-in opens the network (PrivateNetwork, AF_INET/AF_INET6/AF_NETLINK, IPAddressDeny)" \
                bash -c "grep -q '✗ PrivateNetwork=' <<<\"\$1\" && grep -q '✗ RestrictAddressFamilies=~AF_(INET|INET6)' <<<\"\$1\" && grep -q '✗ RestrictAddressFamilies=~AF_NETLINK' <<<\"\$1\" && grep -q '✗ IPAddressDeny=' <<<\"\$1\"" _ "$sec"
        check "$u: the rest of the sandbox stays (NoNewPrivileges, ProtectSystem=strict, PrivateDevices, no packet sockets)" \
                bash -c "grep -q '✓ NoNewPrivileges=' <<<\"\$1\" && grep -q '✓ ProtectSystem=' <<<\"\$1\" && grep -q '✓ PrivateDevices=' <<<\"\$1\" && grep -q '✓ RestrictAddressFamilies=~AF_PACKET' <<<\"\$1\"" _ "$sec"
done
check "the network drop-in sets exactly the three network settings and the proxies' lock directory" \
        test "$(grep -v '^#' "$share/controller-network.conf.in" | grep -v '^$' | tr '\n' ' ')" = \
        "[Service] PrivateNetwork=no RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK IPAddressDeny= RuntimeDirectory=tentaflake-egress-ids RuntimeDirectoryPreserve=yes "
check "the proxies' lock directory is the one the worker uses" \
        grep -q '#define EGRESS_ID_DIR "/run/tentaflake-egress-ids"' capsule/egress-id.h
check "security --threshold agrees" systemd-analyze security --offline=yes --root="$root" \
        --threshold="$(awk -v m="$MAX_EXPOSURE" 'BEGIN { print int(m * 10 + 0.5) }')" \
        'tentaflake-worker@demo.service' >/dev/null 2>&1
cp "$units/tentaflake-worker@.service" "$tmp/unit.bak"
sed -i '/^# ---- sandboxing/,/^# ---- end of sandboxing/d' "$units/tentaflake-worker@.service"
e=$(exposure 'tentaflake-worker@demo.service')
check "without the sandboxing block the exposure is far higher ($e)" le 8.0 "$e"
cp "$tmp/unit.bak" "$units/tentaflake-worker@.service"
# With the runc drop-in: what runc's own work needs (test-systemd-boot.sh runs a job with it),
# read back from systemd's view of the merged unit; the rest of the sandbox stays.
for u in 'tentaflake-worker@rc.service' 'tentaflake-worker-queue@rc.service' 'tentaflake-worker-serve@ci-3.service'; do
        e=$(exposure "$u")
        echo "exposure of $u (runc drop-in): $e (at most $MAX_RUNC_EXPOSURE)"
        check "exposure of $u ($e) at most $MAX_RUNC_EXPOSURE" le "$e" "$MAX_RUNC_EXPOSURE"
        sec=$(systemd-analyze security --offline=yes --root="$root" "$u" 2>&1)
        check "$u: the drop-in opens CAP_SYS_PTRACE, the hostname, IP and netlink sockets, every namespace" \
                bash -c "grep -q '✗ CapabilityBoundingSet=~CAP_SYS_PTRACE' <<<\"\$1\" && grep -q '✗ ProtectHostname=' <<<\"\$1\" && grep -q '✗ RestrictAddressFamilies=~AF_(INET|INET6)' <<<\"\$1\" && grep -q '✗ RestrictNamespaces=~cgroup' <<<\"\$1\"" _ "$sec"
        check "$u: the rest of the sandbox stays (PrivateNetwork, IPAddressDeny, NoNewPrivileges, ProtectSystem=strict, PrivateDevices, no packet sockets)" \
                bash -c "grep -q '✓ PrivateNetwork=' <<<\"\$1\" && grep -q '✓ IPAddressDeny=' <<<\"\$1\" && grep -q '✓ NoNewPrivileges=' <<<\"\$1\" && grep -q '✓ ProtectSystem=' <<<\"\$1\" && grep -q '✓ PrivateDevices=' <<<\"\$1\" && grep -q '✓ RestrictAddressFamilies=~AF_PACKET' <<<\"\$1\"" _ "$sec"
done
check "the runc drop-in sets exactly what runc needs" \
        test "$(grep -v '^#' "$share/controller-runc.conf.in" | grep -v '^$' | tr '\n' ' ')" = \
        "[Service] RestrictNamespaces=cgroup RestrictAddressFamilies=AF_NETLINK AF_INET AF_INET6 ProtectHostname=no SystemCallFilter=sethostname SystemCallFilter=pidfd_getfd SystemCallFilter=landlock_create_ruleset landlock_add_rule landlock_restrict_self CapabilityBoundingSet=CAP_SYS_PTRACE "

# 4. The sandboxing block: one text in both services; every wanted setting set or explained.
# The daemon and the drain alone add CAP_LEASE (and its comment line): the generation walk's
# read leases; gc and serve copy no workspace.
block() { sed -n '/^# ---- sandboxing/,/^# ---- end of sandboxing/p' "$1" | grep -v '^# LEASE' | sed 's/ CAP_LEASE$//'; }
for u in tentaflake-worker@ tentaflake-worker-queue@; do
        check "$u: CAP_LEASE in the bounding set" grep -q '^CapabilityBoundingSet=.* CAP_LEASE$' "systemd/$u.service.in"
done
for u in tentaflake-worker-gc@ tentaflake-worker-serve@; do
        check "$u: no CAP_LEASE" sh -c "! grep -q CAP_LEASE 'systemd/$u.service.in'"
done
check "the sandboxing block is present" test "$(block 'systemd/tentaflake-worker@.service.in' | wc -l)" -gt 40
check "the sandboxing block is the same in the daemon and drain" \
        cmp -s <(block 'systemd/tentaflake-worker@.service.in') <(block 'systemd/tentaflake-worker-queue@.service.in')
check "the sandboxing block is the same in the daemon and gc" \
        cmp -s <(block 'systemd/tentaflake-worker@.service.in') <(block 'systemd/tentaflake-worker-gc@.service.in')
explained() { # explained KEY=VALUE: set so, or (set otherwise / absent) with a comment naming it
        local key=${1%%=*} want=${1#*=} f=systemd/tentaflake-worker@.service.in
        local line; line=$(grep -n "^$key=" "$f" | head -1)
        if [ -n "$line" ] && [ "${line#*:$key=}" = "$want" ]; then return 0; fi
        if [ -n "$line" ]; then
                # the line before it must be a comment
                sed -n "$(( ${line%%:*} - 1 ))p" "$f" | grep -q '^#'
        else
                grep -q "^#.*$key" "$f"
        fi
}
for s in ProtectSystem=strict ProtectHome=yes PrivateTmp=yes RestrictSUIDSGID=yes LockPersonality=yes \
         ProtectKernelTunables=yes ProtectKernelModules=yes ProtectKernelLogs=yes ProtectClock=yes \
         RestrictRealtime=yes SystemCallArchitectures=native UMask=0077 NoNewPrivileges=yes \
         PrivateDevices=yes PrivateNetwork=yes ProtectControlGroups=yes ProcSubset=pid \
         MemoryDenyWriteExecute=yes ProtectHostname=yes PrivateIPC=yes PrivateMounts=yes \
         ProtectProc=invisible RestrictAddressFamilies=AF_UNIX IPAddressDeny=any; do
        check "$s is set, or the unit says why not" explained "$s"
done

# 5. What the worker's behaviour relies on (its effect: test-systemd-boot.sh).
d=systemd/tentaflake-worker@.service.in q=systemd/tentaflake-worker-queue@.service.in
p=systemd/tentaflake-worker-queue@.path
check "daemon: Type=notify" grep -qx 'Type=notify' "$d"
check "daemon: a watchdog" grep -qE '^WatchdogSec=[1-9][0-9]*s$' "$d"
for f in "$d" "$q"; do
        stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s$/\1/p' "$f")
        check "$f: TimeoutStopSec ($stop s) exceeds the 60 s the worker gives running jobs" test "${stop:-0}" -gt 60
        check "$f: SIGTERM to the worker only (KillMode=mixed)" grep -qx 'KillMode=mixed' "$f"
        check "$f: restart on failure after a delay" grep -qx 'Restart=on-failure' "$f"
        check "$f: RestartSec" grep -qE '^RestartSec=[1-9][0-9]*s$' "$f"
        check "$f: no start-rate limit" grep -qx 'StartLimitIntervalSec=0' "$f"
        check "$f: Delegate=yes (one cgroup per capsule)" grep -qx 'Delegate=yes' "$f"
done
# Issue 33: the unit's cgroup is bounded (the capsules' cgroups are outside it), sized for the
# default config by docs/install.md's formula (verify above refuses a value it cannot parse).
for f in "$d" "$q"; do
        check "$f: MemoryMax=3G and TasksMax=320 (the default config's)" bash -c \
                "grep -qx 'MemoryMax=3G' '$f' && grep -qx 'TasksMax=320' '$f'"
done
check "gc: no MemoryMax (it starts no capsule and holds no store)" bash -c "! grep -q '^MemoryMax=' systemd/tentaflake-worker-gc@.service.in"
check "drain: oneshot" grep -qx 'Type=oneshot' "$q"
check "daemon and drain conflict" grep -qx 'Conflicts=tentaflake-worker-queue@%i.path tentaflake-worker-queue@%i.service' "$d"
check "drain conflicts with the daemon" grep -qx 'Conflicts=tentaflake-worker@%i.service' "$q"
check "path conflicts with the daemon" grep -qx 'Conflicts=tentaflake-worker@%i.service' "$p"
# Its start runs one drain (which makes a new controller's inbox; test-install-doc.sh).
check "path: its start runs one drain (Wants=)" grep -qx 'Wants=tentaflake-worker-queue@%i.service' "$p"
# Approval in path mode (issue 14): the drop-in also watches the wake file, by the name the
# worker uses (approve/decide.h), level-triggered (PathExists, not PathChanged: an approval
# made while drain runs must still start the next one).
wake=$(sed -n 's/^#define WORKER_WAKE_FILE "\(.*\)"$/\1/p' orchestrator/worker.h)
check "the inbox drop-in watches <state_dir>/$wake with PathExists" \
        grep -qx "PathExists=/var/lib/tentaflake-worker-demo/$wake" "$root/etc/systemd/system/tentaflake-worker-queue@demo.path.d/inbox.conf"
# Expiry without a daemon: the hourly gc timer.
g=systemd/tentaflake-worker-gc@.service.in t=systemd/tentaflake-worker-gc@.timer
check "gc: oneshot" grep -qx 'Type=oneshot' "$g"
check "gc: no Conflicts (it runs beside the daemon, under the store lock)" bash -c "! grep -q '^Conflicts=' '$g'"
check "gc timer: hourly" grep -qx 'OnCalendar=hourly' "$t"
check "gc timer: a missed run happens at boot (Persistent)" grep -qx 'Persistent=true' "$t"
check "gc timer: wanted by timers.target" grep -qx 'WantedBy=timers.target' "$t"
next=$(systemd-analyze calendar hourly 2>/dev/null | sed -n 's/^ *Next elapse: //p')
check "systemd-analyze reads OnCalendar=hourly ($next)" test -n "$next"

# 5b. The serve worker (issue 13). Its sandboxing block is the inbox one but for the state
# directory (its own, never a controller's; no runtime directory); its network is the
# proxy's socket.
s=systemd/tentaflake-worker-serve@.service.in sp=systemd/tentaflake-worker-serve-proxy@.service.in
settings() { block "$1" | grep -v '^#' | grep -vE '^(StateDirectory|StateDirectoryMode|RuntimeDirectory[A-Za-z]*)='; }
check "serve: the inbox sandboxing block, settings for settings, but the state directory" \
        cmp -s <(settings "$d") <(settings "$s")
check "serve: a state directory of its own" grep -qx 'StateDirectory=tentaflake-worker-serve-%i' "$s"
check "serve: no network of its own (PrivateNetwork, AF_UNIX only, IPAddressDeny=any)" bash -c \
        "grep -qx PrivateNetwork=yes '$s' && grep -qx RestrictAddressFamilies=AF_UNIX '$s' && grep -qx IPAddressDeny=any '$s'"
check "serve: Type=notify" grep -qx 'Type=notify' "$s"
check "serve: a watchdog of at least 2 s (the loop pings every second)" grep -qE '^WatchdogSec=([2-9]|[1-9][0-9]+)s$' "$s"
for x in 'KillMode=mixed' 'Delegate=yes' 'Restart=on-failure' 'StartLimitIntervalSec=0' \
         'TimeoutStopSec=15min' 'EnvironmentFile=/etc/tentaflake/serve/%i.conf' \
         'LoadCredential=key:/etc/tentaflake/serve/%i.key' 'LoadCredential=token:/etc/tentaflake/serve/%i.token' \
         'UnsetEnvironment=TENTAFLAKE_TOKEN' 'InaccessiblePaths=-/etc/tentaflake/serve' \
         'Requires=tentaflake-worker-serve-proxy@%i.socket'; do
        check "serve: $x" grep -qxF "$x" "$s"
done
check "serve: MemoryMax=1280M and TasksMax=320 (one lane's, docs/validation.md \"Memory\")" bash -c \
        "grep -qx 'MemoryMax=1280M' '$s' && grep -qx 'TasksMax=320' '$s'"
check "serve: no Environment= line and no token or key path on the command line" bash -c \
        "! grep -q '^Environment=' '$s' && ! grep '^ExecStart=' '$s' | grep -qE '/etc/tentaflake/serve|TENTAFLAKE_TOKEN'"
check "proxy: a root-only socket" grep -qx 'SocketMode=0600' systemd/tentaflake-worker-serve-proxy@.socket
for x in DynamicUser=yes PrivateUsers=yes CapabilityBoundingSet= NoNewPrivileges=yes InaccessiblePaths=-/etc/tentaflake; do
        check "proxy: $x" grep -qxF "$x" "$sp"
done
out=$(systemd-analyze verify --root="$root" 'tentaflake-worker-serve@ci-1.service' 2>&1)
check "verify: serve, clean ($out)" test -z "$out"

# 6. The tmpfiles template, applied (owner and group need root).
if [ "$(id -u)" -eq 0 ]; then
        check "systemd-tmpfiles applies the template" \
                systemd-tmpfiles --create --root="$root" "$root/etc/tmpfiles.d/tentaflake-worker-demo.conf"
        check "results directory root:10000 02750" \
                test "$(stat -c '%a %u:%g' "$root/run/tentaflake-worker-demo/results" 2>/dev/null)" = "2750 0:10000"
        check "its parent root 0755" \
                test "$(stat -c '%a %u:%g' "$root/run/tentaflake-worker-demo" 2>/dev/null)" = "755 0:0"
fi

finish
