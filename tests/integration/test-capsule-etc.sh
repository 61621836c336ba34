#!/usr/bin/env bash
# A default capsule's /etc (issue 36 item 1; docs/capsule.md, "A default capsule's /etc";
# threat 19), with the real worker and runsc:
#   - /etc/hosts is the worker's (localhost on 127.0.0.1 and ::1, the hostname), not the host's;
#   - `getent hosts localhost` gives ::1 and `getent ahosts localhost` (getaddrinfo) both
#     addresses: the lint plugin of the issue crashed with getaddrinfo EAI_AGAIN, and without
#     host.conf's "multi on" glibc gave 127.0.0.1 alone;
#   - a server listening on "localhost" answers a client connecting to "localhost" (Python, and
#     node's http as in the issue when node is in the system mounts);
#   - `date +%Z %z`, /etc/timezone and /etc/localtime's bytes are the host's zone;
#   - runtime.extra_system_mounts adds a mount and keeps the defaults (and the generated /etc);
#   - the same for a host in Europe/Berlin: a copy of /etc bound over /etc in a private mount
#     namespace of this test's worker (the machine's own zone is never changed).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-etc)
chmod 0755 "$dir"
trap 'worker_cleanup "$dir"' EXIT
res=$dir/results
new_worker "$dir" ', "limits": {"memory": "512m", "memory_swap": "512m", "pids": 128}'
"$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log" # the first run makes the inbox

# job ID SCRIPT: a job running sh -c SCRIPT (JSON-escaped by python)
job() { submit "$dir" "$1" local-reversible "$(python3 -c 'import json,sys; print(json.dumps(["sh","-c",sys.argv[1]]))' "$2")"; }
ok() { # ok ID: the job succeeded (its log shown when not)
        [ "$(result_field "$dir" "$1" status)" = succeeded ] && return 0
        echo "$1: $(result_field "$dir" "$1" status)"; cat "$res/$1/job.log"; return 1
}
log_has() { grep -qx -- "$2" "$res/$1/job.log" || { echo "$1: no line '$2' in:"; cat "$res/$1/job.log"; return 1; }; }

job hosts 'cat /etc/hosts'
job getent 'getent hosts localhost; getent ahosts localhost; getent hosts 127.0.0.1'
PY='import socket, threading
for fam in (socket.AF_INET, socket.AF_INET6):
    srv = socket.create_server(("localhost", 0), family=fam)
    srv.settimeout(10)
    port = srv.getsockname()[1]
    def serve():
        c, _ = srv.accept(); c.sendall(c.recv(16).upper()); c.close()
    t = threading.Thread(target=serve); t.start()
    cli = socket.create_connection(("localhost", port), timeout=10)
    cli.sendall(b"ping"); print("reply", srv.getsockname()[0], cli.recv(16).decode(), flush=True)
    t.join()'
job loopback "python3 -c '$PY'"
NODE='const http = require("http");
const s = http.createServer((q, r) => r.end("pong")).listen(0, "localhost", () => {
  http.get("http://localhost:" + s.address().port + "/", (r) => {
    let b = ""; r.on("data", (d) => b += d); r.on("end", () => { console.log("node " + b); s.close(); });
  }).on("error", (e) => { console.log("node error " + e.code); process.exit(1); });
});'
have_node=0
[ -x /usr/bin/node ] && have_node=1 # /usr is a default system mount
[ $have_node = 1 ] && job node "node -e '$NODE'"
job zone 'date +"%Z %z"; cat /etc/timezone; sha256sum </etc/localtime'
"$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log"

check "the job printed /etc/hosts" ok hosts
check "/etc/hosts is the worker's three lines, none of the host's" \
        diff <(printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tcapsule\n') "$res/hosts/job.log"
check "getent ran" ok getent
check "getent hosts localhost: ::1" grep -qE '^::1 +localhost ip6-localhost ip6-loopback$' "$res/getent/job.log"
check "getent ahosts localhost (getaddrinfo): ::1" grep -qE '^::1 +STREAM' "$res/getent/job.log"
check "getent ahosts localhost (getaddrinfo): 127.0.0.1" grep -qE '^127\.0\.0\.1 +STREAM' "$res/getent/job.log"
check "getent hosts 127.0.0.1: localhost" grep -qE '^127\.0\.0\.1 +localhost$' "$res/getent/job.log"
check "a loopback server on localhost answered" ok loopback
check "... over IPv4" log_has loopback "reply 127.0.0.1 PING"
check "... and over IPv6" log_has loopback "reply ::1 PING"
if [ $have_node = 1 ]; then
        check "node: http server on localhost, http.get to localhost" ok node
        check "... answered pong" log_has node "node pong"
fi

# The host's zone as the worker reads it: the name after zoneinfo/ of the link, or timezone.
host_zone_name() {
        local t
        [ -f /etc/localtime ] || { echo Etc/UTC; return; }
        t=$(readlink /etc/localtime 2>/dev/null)
        case "$t" in */zoneinfo/*) echo "${t##*zoneinfo/}" ;; *) head -n1 /etc/timezone 2>/dev/null ;; esac
}
check "date ran" ok zone
if [ -f /etc/localtime ]; then
        check "date +'%Z %z' in the capsule is the host's ($(env -u TZ date +'%Z %z'))" \
                log_has zone "$(env -u TZ date +'%Z %z')"
        check "/etc/timezone is the host's zone name ($(host_zone_name))" log_has zone "$(host_zone_name)"
        check "/etc/localtime holds the host's bytes" log_has zone "$(sha256sum </etc/localtime)"
else
        check "no host zone: the capsule is in UTC" log_has zone "UTC +0000"
        check "... and says Etc/UTC" log_has zone "Etc/UTC"
fi

# runtime.extra_system_mounts: a mount added to the default ones, which stay.
mkdir -m 0755 "$dir/extra"
echo from-the-host >"$dir/extra/hello"
chmod 0644 "$dir/extra/hello"
new_worker "$dir" ', "limits": {"memory": "512m", "memory_swap": "512m", "pids": 128},
 "runtime": {"extra_system_mounts": ["'"$dir"'/extra:/opt/extra=test-extra"]}'
job extra 'cat /opt/extra/hello; python3 -c "print(6 * 7)"; ls /etc/ssl/certs | grep -c . ; cat /etc/timezone'
"$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log"
check "extra_system_mounts: the job ran" ok extra
check "... the added mount is there" log_has extra from-the-host
check "... and the default /usr still is" log_has extra 42
check "... and the generated /etc too" log_has extra "$(host_zone_name)"
check "... the environment digest differs from the defaults'" \
        test "$(result_field "$dir" extra environment_digest)" != "$(result_field "$dir" zone environment_digest)"

# A host in Europe/Berlin, in this test's mount namespace only: a copy of /etc bound over /etc.
if [ -f /usr/share/zoneinfo/Europe/Berlin ]; then
        mkdir "$dir/host-etc"
        cp -a /etc/. "$dir/host-etc/"
        ln -sfn /usr/share/zoneinfo/Europe/Berlin "$dir/host-etc/localtime"
        echo Europe/Berlin >"$dir/host-etc/timezone"
        job berlin 'date -d @1700000000 +"%Z %z"; date -d @1690000000 +"%Z %z"; cat /etc/timezone'
        unshare -m --propagation private sh -c 'mount --bind "$1/host-etc" /etc && exec "$2" --config "$1/config.json" drain' \
                sh "$dir" "$BIN" 2>>"$dir/daemon.log"
        check "a host in Europe/Berlin: the job ran" ok berlin
        check "... winter is CET +0100" log_has berlin "CET +0100"
        check "... summer is CEST +0200" log_has berlin "CEST +0200"
        check "... /etc/timezone says Europe/Berlin" log_has berlin "Europe/Berlin"
        check "the machine's own zone is unchanged" test "$(readlink /etc/localtime)" != "$dir/host-etc/localtime"
else
        echo "note: no /usr/share/zoneinfo/Europe/Berlin (tzdata): the non-UTC host is covered by tests/unit/test-capsule-etc.c"
fi
finish
