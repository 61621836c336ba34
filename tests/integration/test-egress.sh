#!/usr/bin/env bash
# Egress through the worker's proxy (issue 21; contract sections 2, 5, 6 and 7; threats 6 and 16),
# with the real daemon, runsc and curl inside the capsules, against servers of the test's own:
# two on the host's loopback (one allowed by its literal address, one on an unlisted port) and
# one in a network namespace behind a veth pair at a public address (a /30 of 198.51.100.0/24 of
# the test's own: another run's namespace, or an address the host uses, is never reached), by
# names that an /etc/hosts of the test's resolves in the worker's own mount namespace:
#   - forward and CONNECT to an allowed host:port work, by IP literal, by name and by *.suffix;
#   - refused: an unlisted port (its server never sees a connection), an unlisted IP literal, a
#     suffix's apex, a name resolving to loopback, a name resolving to a public address and to
#     loopback (DNS rebinding: every address is checked before any is used);
#   - the upload bound: what the server receives never passes max_upload_bytes, the cut is
#     said, and a later connection of the same job is refused;
#   - a connection still open when the job ends (an upstream that never answers) is recorded
#     ("stopped", with its bytes) and audited, and does not hold the job;
#   - each connection is a record in result.json and an audit line; an approved job gets the
#     same allowlist and no more (contract section 5);
#   - the capsule reaches no host socket of its own: not the host's loopback, not the host's
#     address, not a listening unix socket in one of its mounts;
#   - 1,000 hostile or slow connections: at most 128 reach the proxy, the proxy stays small,
#     the daemon lives and the next job's egress works;
#   - without network in the config: no proxy variable, nothing on 127.0.0.1:3128, no stream
#     in the capsule's init;
#   - the same through capsules started ahead (the first job starts cold, the rest warm);
#   - doctor's four egress checks pass on this worker;
#   - each proxy runs as an id of its own (issue 33 finding 4): in the proxies' range, no user's
#     or group's, locked by this daemon, no two alike, given back when its job ends; neither it
#     nor the notify hook's default identity can read the other's /proc/PID/environ, and as the
#     proxy's identity no process's environment on the host can be read at all.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is needed in the capsule (scripts/install-deps)"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: ip (iproute2) is needed for the test's network namespace"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN missing (make all)"; exit 1; }
BIN=$(realpath "$BIN")
REAL_BIN=$BIN
PY=/usr/bin/python3 # the capsule's (a system mount), not a host-only interpreter

dir= dir2= srv_pids=() ns=tfw-eg-$$ veth=tfweg$$ hook_pid= mine_pid=
cleanup() {
        for p in "${srv_pids[@]}" $hook_pid $mine_pid; do kill "$p" 2>/dev/null; done
        ip link del "$veth" 2>/dev/null
        ip netns del "$ns" 2>/dev/null
        [ -n "$dir2" ] && worker_cleanup "$dir2"
        [ -n "$dir" ] && worker_cleanup "$dir"
}
trap cleanup EXIT

dir=$(test_dir egress)
res=$dir/results
A=$(free_port)
B=$(free_port)
C=$(free_port)
while [ "$B" = "$A" ]; do B=$(free_port); done
while [ "$C" = "$A" ] || [ "$C" = "$B" ]; do C=$(free_port); done

# ---- the servers ----------------------------------------------------------------------------
start_server() { # start_server NAME ADDR PORT [NETNS]
        local pre=()
        [ -n "${4:-}" ] && pre=(ip netns exec "$4")
        egress_upstream "$dir/srv-$1" "$2" "$3" "${pre[@]}" || { echo "FAIL: server $1 did not start"; exit 1; }
        srv_pids+=("$UPSTREAM_PID")
}
# The namespace's /30: the first of 198.51.100.0/24 (TEST-NET-2, public to the proxy) that the
# host neither has an address in, nor routes other than by its default route, nor has a TCP
# connection to, taken under a lock that every run of this test shares: two runs never route to
# each other's namespace, and a run takes no address the host uses. (Runs used to put
# 203.0.113.1/24 on their veth: while one ran, the host routed all of 203.0.113.0/24 into that
# run's namespace, this test host's package mirror at 203.0.113.80 included.)
net_in_use() { # net_in_use PREFIX
        [ -n "$(ip -4 -o addr show to "$1")" ] || [ -n "$(ip -4 route show match "$1" | grep -v '^default ')" ] ||
                [ -n "$(ss -Htn dst "$1")" ]
}
exec {netlock}>"$TFW_TEST_ROOT/egress-net.lock" && flock "$netlock" || { echo "FAIL: cannot lock $TFW_TEST_ROOT/egress-net.lock"; exit 1; }
k=0
while [ $k -lt 64 ] && net_in_use "198.51.100.$((k * 4))/30"; do k=$((k + 1)); done
[ $k -lt 64 ] || { echo "FAIL: every /30 of 198.51.100.0/24 is in use on this host"; exit 1; }
HOST_ADDR=198.51.100.$((k * 4 + 1)) PUB=198.51.100.$((k * 4 + 2))
ip netns add "$ns" && ip link add "$veth" type veth peer name "${veth}p" && ip link set "${veth}p" netns "$ns" &&
        ip addr add "$HOST_ADDR/30" dev "$veth" && ip link set "$veth" up &&
        ip -n "$ns" addr add "$PUB/30" dev "${veth}p" && ip -n "$ns" link set "${veth}p" up &&
        ip -n "$ns" link set lo up || { echo "FAIL: cannot make the test's network namespace"; exit 1; }
exec {netlock}>&-
start_server local 127.0.0.1 "$A"
start_server unlisted 127.0.0.1 "$B"
# A service of the host's own, listed only by names that resolve to its loopback.
start_server internal 127.0.0.1 "$C"
start_server public "$PUB" "$A" "$ns"
conns() { local n; n=$(grep -c . "$dir/srv-$1/connections" 2>/dev/null); echo "${n:-0}"; }

# ---- the worker, in a mount namespace with the test's /etc/hosts ------------------------------
cat >"$dir/hosts" <<EOF
127.0.0.1 localhost
127.0.0.1 evil.test
$PUB pkg.test
$PUB a.wild.test
$PUB wild.test
$PUB rebind.test
127.0.0.1 rebind.test
EOF
cat >"$dir/worker" <<EOF
#!/bin/sh
exec unshare -m --propagation private sh -c 'mount --bind "\$0" /etc/hosts && exec "\$@"' "$dir/hosts" "$REAL_BIN" "\$@"
EOF
chmod 0755 "$dir/worker"
# A listening unix socket in a directory the capsule gets as a system mount: it must stay out
# of reach (runsc without host-uds).
mkdir -p "$dir/sock"
python3 -c 'import socket,sys,time; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(); time.sleep(3600)' \
        "$dir/sock/host.sock" &
srv_pids+=($!)
wait_for 20 test -S "$dir/sock/host.sock"
chmod 0755 "$dir/sock"; chmod 0777 "$dir/sock/host.sock"

mounts='"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/alternatives", "/etc/ssl/certs", "'$dir'/sock:/hostsock"'
new_worker "$dir" ', "runtime": {"system_mounts": ['"$mounts"']},
 "network": {"allow": ["127.0.0.1:'"$A"'", "evil.test:'"$C"'", "pkg.test:'"$A"'", "*.wild.test:'"$A"'", "rebind.test:'"$C"'"],
             "max_upload_bytes": "64k"}'
BIN=$dir/worker start_daemon "$dir" || exit 1

run_job() { # run_job ID CLASS SCRIPT: a shell script as the job, waited for
        local argv
        argv=$(python3 -c 'import json,sys; print(json.dumps(["/bin/sh","-c",sys.argv[1]]))' "$3")
        submit "$dir" "$1" "$2" "$argv"
        [ "$2" = local-reversible ] || { wait_state "$dir" "$1" pending && quiet tfw "$dir" approve "$1"; }
        wait_result "$dir" "$1" 300 || { echo "no result for $1"; tail -5 "$dir/daemon.log"; return 1; }
}
line() { sed -n "s/^$2=//p" "$res/$1/job.log" | tail -1; } # line ID KEY: what the job printed as KEY=
net() { json_get "$res/$1/result.json" "$2"; }                   # net ID EXPR on the result
conn_of() { # conn_of ID HOST PORT FIELD: that connection's FIELD (the first one to HOST:PORT)
        json_get "$res/$1/result.json" "[c for c in r['network']['connections'] if c['host']=='$2' and c['port']==$3][0]['$4']"
}

code() { echo "curl -s -o /dev/null -w '%{http_code}' $*"; }
# ---- 1. what goes, what does not ----------------------------------------------------------------
run_job j1 local-reversible "
echo vars=\$(env | grep -i _proxy= | sort | tr '\n' ' ')
echo hello=\$(curl -sS http://127.0.0.1:$A/hello)
echo tunnel=\$(curl -sS -p http://127.0.0.1:$A/bytes/100000 | wc -c)
echo unlisted=\$($(code http://127.0.0.1:$B/hello))
echo literal=\$($(code http://127.0.0.2:$A/hello))
echo evil=\$($(code http://evil.test:$C/hello))
echo rebind=\$($(code http://rebind.test:$C/hello))
echo name=\$(curl -sS http://pkg.test:$A/hello)
echo suffix=\$(curl -sS -p http://a.wild.test:$A/hello)
echo apex=\$($(code http://wild.test:$A/hello))
echo refusal=\$(curl -s http://127.0.0.1:$B/hello)
$PY -c '
import socket, errno
def tcp(a, p):
    try:
        socket.create_connection((a, p), timeout=5); return \"connected\"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
def unix(p):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(p); return \"connected\"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
print(\"direct_loopback=\" + tcp(\"127.0.0.1\", $A))
print(\"direct_public=\" + tcp(\"$PUB\", $A))
print(\"direct_host=\" + tcp(\"$HOST_ADDR\", $A))
print(\"host_unix=\" + unix(\"/hostsock/host.sock\"))
'" || exit 1
check "j1 succeeded" test "$(result_field "$dir" j1 status)" = succeeded
want="ALL_PROXY=http://127.0.0.1:3128 HTTPS_PROXY=http://127.0.0.1:3128 HTTP_PROXY=http://127.0.0.1:3128 NO_PROXY=localhost http_proxy=http://127.0.0.1:3128 https_proxy=http://127.0.0.1:3128 no_proxy=localhost"
check "the job gets the proxy variables, NO_PROXY only localhost ($(line j1 vars))" test "$(line j1 vars)" = "$want"
check "forward to the allowed literal ($(line j1 hello))" test "$(line j1 hello)" = "hello from 127.0.0.1:$A"
check "CONNECT to the allowed literal: 100000 bytes ($(line j1 tunnel))" test "$(line j1 tunnel)" = 100000
check "an unlisted port: 403 ($(line j1 unlisted))" test "$(line j1 unlisted)" = 403
check "the unlisted port's server never saw a connection" test "$(conns unlisted)" = 0
check "an unlisted IP literal: 403 ($(line j1 literal))" test "$(line j1 literal)" = 403
check "a name resolving to loopback: 403 ($(line j1 evil))" test "$(line j1 evil)" = 403
check "a name resolving to a public address and loopback: 403 ($(line j1 rebind))" test "$(line j1 rebind)" = 403
check "the host's service behind those names never saw a connection" test "$(conns internal)" = 0
check "a name resolving to a public address ($(line j1 name))" test "$(line j1 name)" = "hello from $PUB:$A"
check "a name under *.suffix, by CONNECT ($(line j1 suffix))" test "$(line j1 suffix)" = "hello from $PUB:$A"
check "the suffix's apex: 403 ($(line j1 apex))" test "$(line j1 apex)" = 403
check "a refusal says why in the job's log ($(line j1 refusal))" \
        grep -q "^tentaflake-worker egress: not_allowed: 127.0.0.1:$B is not on network.allow" <<<"$(line j1 refusal)"
check "no direct route to the host's loopback ($(line j1 direct_loopback))" test "$(line j1 direct_loopback)" = ECONNREFUSED
unreachable() { [ "$1" = ENETUNREACH ] || [ "$1" = EHOSTUNREACH ]; }
check "no direct route to a public address ($(line j1 direct_public))" unreachable "$(line j1 direct_public)"
check "no direct route to the host's address ($(line j1 direct_host))" unreachable "$(line j1 direct_host)"
check "no host unix socket ($(line j1 host_unix))" test -n "$(line j1 host_unix)" -a "$(line j1 host_unix)" != connected
check "the public server saw only the allowed connections ($(conns public))" test "$(conns public)" = 2
check "result: 10 connections" test "$(net j1 'len(r["network"]["connections"])')" = 10
check "result: 4 allowed, 6 refused" test "$(net j1 'r["network"]["allowed"]')/$(net j1 'r["network"]["refused"]')" = 4/6
check "result: the allowlist as configured" test "$(net j1 'len(r["network"]["allow"])')" = 5
check "record: the CONNECT tunnel, 127.0.0.1, more than 100000 bytes down" \
        test "$(net j1 "[c for c in r['network']['connections'] if c['kind']=='connect' and c['host']=='127.0.0.1'][0]['bytes_down'] > 100000")" = True
check "record: the unlisted port, refused not_allowed" test "$(conn_of j1 127.0.0.1 "$B" reason)" = not_allowed
check "record: evil.test refused address_refused at 127.0.0.1" \
        test "$(conn_of j1 evil.test "$C" reason) $(conn_of j1 evil.test "$C" address)" = "address_refused 127.0.0.1"
check "record: rebind.test refused for its loopback address" \
        test "$(conn_of j1 rebind.test "$C" reason) $(conn_of j1 rebind.test "$C" address)" = "address_refused 127.0.0.1"
check "record: pkg.test allowed at $PUB" \
        test "$(conn_of j1 pkg.test "$A" verdict) $(conn_of j1 pkg.test "$A" address)" = "allowed $PUB"
check "an audit line per connection (10)" test "$(audit_count "$dir" egress j1)" = 10
check "the daemon's log sums the job's egress" grep -q "job 'j1': egress: 10 connection(s), 4 allowed, 6 refused" "$dir/daemon.log"

# ---- 1b. a download many times the proxy's and init's pipes (egress-proxy/conn.c,
# capsule-init/egress-relay.c: splice) arrives whole and in order; its digest taken natively
BIG=24000000
big_sum=$(curl -sS --noproxy '*' "http://127.0.0.1:$A/pattern/$BIG" | sha256sum | cut -c1-64)
run_job jbig local-reversible "
echo bigfwd=\$(curl -sS http://127.0.0.1:$A/pattern/$BIG | sha256sum | cut -c1-64)
echo bigcon=\$(curl -sS -p http://127.0.0.1:$A/pattern/$BIG | sha256sum | cut -c1-64)" || exit 1
check "$BIG bytes forward arrive whole and in order ($(line jbig bigfwd))" test "$(line jbig bigfwd)" = "$big_sum"
check "... and through CONNECT ($(line jbig bigcon))" test "$(line jbig bigcon)" = "$big_sum"

# ---- 2. the upload bound --------------------------------------------------------------------
before=$(cat "$dir/srv-local/received")
run_job j2 local-reversible "
head -c 204800 /dev/zero >/tmp/big
echo up=\$($(code --data-binary @/tmp/big http://127.0.0.1:$A/upload))
echo after=\$($(code http://127.0.0.1:$A/hello))" || exit 1
got=$(( $(cat "$dir/srv-local/received") - before ))
check "the server received less than max_upload_bytes (65536) of the 204800 ($got)" test "$got" -lt 65536 -a "$got" -gt 0
check "record: the upload cut at upload_limit" test "$(net j2 'r["network"]["connections"][0]["reason"]')" = upload_limit
check "record: bytes up never past the bound ($(net j2 'r["network"]["bytes_up"]'))" test "$(net j2 'r["network"]["bytes_up"] <= 65536')" = True
check "a later connection of the same job is refused: 403 ($(line j2 after))" test "$(line j2 after)" = 403
check "record: refused upload_limit" test "$(net j2 'r["network"]["connections"][1]["reason"]')" = upload_limit
check "a capsule started ahead served j2" grep -q "job 'j2': started in capsule 'warm-" "$dir/daemon.log"

# ---- a connection still open when the job ends is recorded, with its bytes ---------------------
# The job ends once the upstream has its request (its status line came back through the tunnel:
# /hold sends nothing else), not after a fixed pause a loaded machine may not honour.
run_job j2b local-reversible "curl -sS -p -m 300 -D /tmp/h http://127.0.0.1:$A/hold >/dev/null 2>&1 &
for i in \$(seq 1200); do grep -q '^HTTP/1.1 200 OK' /tmp/h 2>/dev/null && break; sleep 0.05; done
grep -q '^HTTP/1.1 200 OK' /tmp/h && echo left" || exit 1
check "a connection left open: the job still ends at once" test "$(result_field "$dir" j2b status)" = succeeded
check "  ... once its request had reached the upstream" grep -qx left "$res/j2b/job.log"
check "  ... and its record says stopped, with the bytes it sent" \
        test "$(net j2b "[(c['verdict'], c['reason'], c['bytes_up'] > 0) for c in r['network']['connections']]")" = "[('allowed', 'stopped', True)]"
check "  ... and is an audit line" test "$(audit_count "$dir" egress j2b)" = 1

# ---- 3. approval never widens the allowlist ---------------------------------------------------
run_job j3 irreversible "
echo hello=\$(curl -sS http://127.0.0.1:$A/hello)
echo unlisted=\$($(code http://127.0.0.1:$B/hello))" || exit 1
check "an approved job reaches the allowlist ($(line j3 hello))" test "$(line j3 hello)" = "hello from 127.0.0.1:$A"
check "and nothing more: 403 ($(line j3 unlisted))" test "$(line j3 unlisted)" = 403
check "still no connection on the unlisted port" test "$(conns unlisted)" = 0

# ---- 3b. the proxy's identity is its own (issue 33 finding 4; threat 16) -----------------------
# A job holds its proxy alive (a request the test answers when it says so). Each proxy of this
# daemon runs as an id of the proxies' range, gid the same, named by no user or group, held by
# this daemon's lock, and no two alike. A process as the notify hook's default identity (nobody,
# docs/config.md) with a webhook's token in its environment cannot be read as a proxy's identity,
# nor the reverse; as a proxy's identity nothing on the host shows an environment at all.
HOOK_ID=65534
argv=$(python3 -c 'import json,sys; print(json.dumps(["/bin/sh","-c",sys.argv[1]]))' \
        "echo held=\$(curl -sS -m 300 http://127.0.0.1:$A/wait/go-j6)")
submit "$dir" j6 local-reversible "$argv"
check "j6 holds its proxy (its request reached the server)" wait_for 120 grep -q "GET /wait/go-j6" "$dir/srv-local/heads"
descends_from() { # descends_from PID ANCESTOR (jobs and capsules started ahead are the daemon's children)
        local p=$1
        while [ "$p" -gt 1 ]; do
                p=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f2)
                [ -n "$p" ] || return 1
                [ "$p" = "$2" ] && return 0
        done
        return 1
}
proxies=
for p in $(pgrep -x tentaflake-egre); do descends_from "$p" "$TFW_DAEMON_PID" && proxies+="$p "; done
check "this daemon's proxies are seen ($proxies)" test -n "$proxies"
ids_of() { sed -n "s/^$2:[[:space:]]*//p" "/proc/$1/status" | tr -s '[:space:]' ' ' | sed 's/ $//'; }
in_range() { [ "$1" -ge 2130706432 ] && [ "$1" -le 2130771967 ]; }
held_by_daemon() { # held_by_daemon UID: one of the daemon's processes (a job's, a capsule's) holds the
        # lock on the id's byte of the proxies' lock file (an open-file-description lock: /proc/locks
        # names no pid, the holder's fdinfo lists it)
        local ino k p
        ino=$(stat -c %i /run/tentaflake-egress-ids/ids.lock 2>/dev/null) || return 1
        k=$(($1 - 2130706432))
        for p in $(pgrep -P "$TFW_DAEMON_PID") "$TFW_DAEMON_PID"; do
                grep -qE "^lock:.*OFDLCK +ADVISORY +WRITE +-1 +[0-9a-f]+:[0-9a-f]+:$ino $k $k\$" \
                        /proc/"$p"/fdinfo/* 2>/dev/null && return 0
        done
        return 1
}
id_locked() { # id_locked UID: anyone holds the id's byte
        local ino k
        ino=$(stat -c %i /run/tentaflake-egress-ids/ids.lock 2>/dev/null) || return 1
        k=$(($1 - 2130706432))
        grep -qE "OFDLCK +ADVISORY +WRITE +-1 +[0-9a-f]+:[0-9a-f]+:$ino $k $k\$" /proc/locks
}
as() { local u=$1 g=$2; shift 2; setpriv --reuid "$u" --regid "$g" --clear-groups "$@"; }
started() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -q '^sleep 300'; }
# setpriv itself in the background (a function would run in a subshell of root's): $! is the
# process that becomes sleep.
setpriv --reuid "$HOOK_ID" --regid "$HOOK_ID" --clear-groups env -i WEBHOOK_TOKEN=hook-secret-$$ sleep 300 &
hook_pid=$!
check "a process as the hook's identity ($HOOK_ID) is running" wait_for 10 started "$hook_pid"
check "  ... the hook's identity reads its own kind (the check can see a token)" \
        grep -qa "hook-secret-$$" <(as "$HOOK_ID" "$HOOK_ID" cat "/proc/$hook_pid/environ")
seen_ids=
for p in $proxies; do
        u=$(ids_of "$p" Uid) g=$(ids_of "$p" Gid)
        id=${u%% *}
        check "proxy $p: one uid ($u) and the same gid ($g)" test "$u" = "$id $id $id $id" -a "$g" = "$id $id $id $id"
        check "proxy $p: $id is in the proxies' range, not the hook's $HOOK_ID" in_range "$id"
        check "proxy $p: no user or group is $id" bash -c "! getent passwd $id && ! getent group $id"
        check "proxy $p: the daemon holds the lock of $id" held_by_daemon "$id"
        check "proxy $p: no other proxy has $id" bash -c "! grep -qw '$id' <<<'$seen_ids'"
        seen_ids+=" $id"
        check "proxy $p: its identity cannot read the hook's environment" \
                bash -c "! setpriv --reuid $id --regid $id --clear-groups cat /proc/$hook_pid/environ >'$dir/read.out' 2>/dev/null \
                         && ! grep -qa hook-secret '$dir/read.out'"
        # Every process of the host, read as the proxy's identity: none shows an environment
        # (kernel threads open but hold none).
        shown=$(as "$id" "$id" "$PY" -c '
import os
me = os.getpid()
for p in os.listdir("/proc"):
    if not p.isdigit() or int(p) == me:
        continue
    try:
        with open("/proc/%s/environ" % p, "rb") as f:
            if f.read(1):
                print(p)
    except OSError:
        pass
' | tr '\n' ' ')
        check "proxy $p: as its identity, no process's environment can be read on this host ($shown)" test -z "$shown"
        setpriv --reuid "$id" --regid "$id" --clear-groups env -i PROXY_SECRET=proxy-secret-$$ sleep 300 &
        mine_pid=$!
        check "proxy $p: a process as its identity is running" wait_for 10 started "$mine_pid"
        check "proxy $p: the hook's identity cannot read a process of the proxy's" \
                bash -c "! setpriv --reuid $HOOK_ID --regid $HOOK_ID --clear-groups cat /proc/$mine_pid/environ >'$dir/read.out' 2>/dev/null \
                         && ! grep -qa proxy-secret '$dir/read.out'"
        check "  ... which its own identity can" grep -qa "proxy-secret-$$" <(as "$id" "$id" cat "/proc/$mine_pid/environ")
        kill "$mine_pid"; wait "$mine_pid" 2>/dev/null; mine_pid=
done
kill "$hook_pid"; wait "$hook_pid" 2>/dev/null; hook_pid=
touch "$dir/srv-local/go-j6"
wait_result "$dir" j6 120 || { echo "no result for j6"; tail -5 "$dir/daemon.log"; exit 1; }
check "j6 ends once released ($(line j6 held))" test "$(line j6 held)" = released
# Its result is written once its proxy is reaped: that proxy's id is free again, its lock gone
# (a capsule started ahead keeps its own).
gone_ids=
for id in $seen_ids; do id_locked "$id" || gone_ids+=" $id"; done
check "the ended job's proxy gave its id back (no lock left on:$gone_ids)" test -n "$gone_ids"

# ---- 4. 1,000 hostile or slow connections ----------------------------------------------------
peak=0
sample_proxies() { # the highest VmHWM (kB) of this test's proxies, until j4's result appears
        local m=0 v p
        while [ ! -e "$res/j4/result.json" ]; do
                for p in $(own_procs comm=tentaflake-egre | cut -d' ' -f1); do
                        v=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$p/status" 2>/dev/null)
                        [ -n "$v" ] && [ "$v" -gt "$m" ] && m=$v
                done
                sleep 0.2
        done
        echo "$m" >"$dir/proxy-peak"
}
daemon_rss_before=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$TFW_DAEMON_PID/status")
sample_proxies &
sampler=$!
run_job j4 local-reversible "$PY -c '
import socket, time
socks = []
for i in range(1000):
    try:
        s = socket.create_connection((\"127.0.0.1\", 3128), timeout=5)
    except OSError:
        continue
    try:
        if i % 3 == 0:
            s.sendall(b\"\\x16\\x03\\x01\" + bytes(range(256)) * 64)   # garbage
        elif i % 3 == 1:
            s.sendall(b\"GET http://127.0.0.1:$A/hello HTTP/1.1\\r\\nHost: x\")   # a head that never ends
        else:
            s.sendall(b\"CONNECT 127.0.0.1:$B HTTP/1.1\\r\\n\\r\\n\")   # unlisted
    except OSError:
        pass
    socks.append(s)
print(\"opened=%d\" % len(socks))
time.sleep(12)
'" || exit 1
wait "$sampler"
peak=$(cat "$dir/proxy-peak")
echo "proxy peak VmHWM: $peak kB"
check "j4 ran to its end ($(result_field "$dir" j4 status))" test "$(result_field "$dir" j4 status)" = succeeded
check "at most 128 connections reached the proxy ($(net j4 'len(r["network"]["connections"])'))" \
        test "$(net j4 'len(r["network"]["connections"]) <= 128')" = True
check "init said the connections were used up" grep -q "egress: this job's 128 connections are used up" "$res/j4/job.log"
check "every one of them refused" test "$(net j4 'r["network"]["allowed"]')" = 0
check "the proxy was seen and stayed under 64 MiB ($peak kB)" test "$peak" -gt 0 -a "$peak" -lt 65536
check "still no connection on the unlisted port" test "$(conns unlisted)" = 0
check "the daemon lives" daemon_alive
daemon_rss_after=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$TFW_DAEMON_PID/status")
echo "daemon VmRSS: $daemon_rss_before kB before, $daemon_rss_after kB after"
check "the daemon's memory grew by less than 16 MiB" test $((daemon_rss_after - daemon_rss_before)) -lt 16384
run_job j5 local-reversible "echo hello=\$(curl -sS http://127.0.0.1:$A/hello)" || exit 1
check "the next job's egress works ($(line j5 hello))" test "$(line j5 hello)" = "hello from 127.0.0.1:$A"
stop_daemon
no_proxy_left() { no_own_procs comm=tentaflake-egre >/dev/null; }
# A capsule started ahead dies with the daemon (its process's parent-death signal), and its
# proxy with it: a moment after the daemon, not before. Only this test's proxies count (a
# real worker's on the same host are not its): an orphan comes back to the test (lib.sh).
wait_for 10 no_proxy_left
check "no proxy process outlives the daemon and its capsules $(own_procs comm=tentaflake-egre)" no_proxy_left

# ---- doctor proves the route ------------------------------------------------------------------
tfw "$dir" doctor --json >"$dir/doctor.json" 2>"$dir/doctor.err"
for c in egress_host egress_route egress_refused egress_no_other_route; do
        check "doctor: $c ($(json_get "$dir/doctor.json" "[x['detail'] for x in r if x['check']=='$c'][0]" 2>&1))" \
                test "$(json_get "$dir/doctor.json" "[x['ok'] for x in r if x['check']=='$c'][0]")" = True
done

# ---- 5. without network: no variable, no listener, no stream -------------------------------------
dir2=$(test_dir egress-none)
new_worker "$dir2"
start_daemon "$dir2" || exit 1
submit "$dir2" n1 local-reversible "$(python3 -c 'import json,sys; print(json.dumps(["/bin/sh","-c",sys.argv[1]]))' "
echo vars=\$(env | grep -ci _proxy=)
echo initfds=\$(ls /proc/1/fd | sort -n | tr '\n' ' ')
$PY -c '
import socket, errno
try:
    socket.create_connection((\"127.0.0.1\", 3128), timeout=5); print(\"relay=connected\")
except OSError as e:
    print(\"relay=\" + errno.errorcode.get(e.errno, str(e)))
'")"
wait_result "$dir2" n1 120 || { echo "no result for n1"; exit 1; }
l2() { sed -n "s/^$1=//p" "$dir2/results/n1/job.log" | tail -1; }
check "without network: no proxy variable ($(l2 vars))" test "$(l2 vars)" = 0
check "without network: nothing listens on 127.0.0.1:3128 ($(l2 relay))" test "$(l2 relay)" = ECONNREFUSED
check "without network: init holds only its stdio and the job's relay ($(l2 initfds))" \
        test "$(wc -w <<<"$(l2 initfds)")" -lt 10
check "without network: result.json says null" test "$(json_get "$dir2/results/n1/result.json" 'r["network"]')" = null
stop_daemon
finish
