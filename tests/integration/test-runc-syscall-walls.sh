#!/usr/bin/env bash
# The runc driver's syscall and direct-connection walls (issue 49; capsule/seccomp-notify.h,
# capsule/seccomp-listen.h; docs/threats.md row 25), with the real daemon on runc, each job
# submitted by `submit` as the controller:
#   - a job that calls unshare, clone with a namespace flag, fsopen, open_tree, bpf, keyctl,
#     add_key, perf_event_open, ptrace, userfaultfd, chroot and sethostname gets a "syscall" wall
#     naming each (unshare three times: counted 3), each call refused EPERM as without the
#     listener, and submit's line says the sandbox refused it; mount and umount2 are refused
#     EPERM by init's own filter, unreported;
#   - a job that connects to 203.0.113.1:443 and [2001:db8::1]:443 gets ENETUNREACH and a
#     "network" wall naming each destination; a UDP datagram to 198.51.100.7:53 is named too;
#     its connections to loopback (a closed port: ECONNREFUSED from the kernel; the proxy) go on
#     unreported;
#   - ordinary jobs (sh, cc and make, python3, node fetching through the proxy) get no wall: the
#     probes glibc and the runtimes make are not reported;
#   - a job printing a forged syscall and network wall gets none.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker
command -v runc >/dev/null || { echo "SKIP: runc is not installed"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
[ -x /usr/bin/python3 ] || { echo "SKIP: /usr/bin/python3 is needed in the capsule"; exit 77; }
[ "$(uname -m)" = x86_64 ] || { echo "SKIP: the hostile calls are x86_64's numbers"; exit 77; }

A=$(free_port)
dir=$(test_dir i49-runc-syscall) || exit 1
trap 'worker_cleanup "$dir"' EXIT
chmod 0755 "$dir"
mounts='"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/alternatives"'
TFW_DRIVER=runc new_worker "$dir" ', "runtime": {"system_mounts": ['"$mounts"']},
 "limits": {"default_timeout_seconds": 120, "max_timeout_seconds": 120, "memory": "1g", "pids": 128,
            "workspace_tmpfs": "64m", "tmp_tmpfs": "64m", "max_snapshot_bytes": "4m"},
 "network": {"allow": ["127.0.0.1:'"$A"'"]}'
ws="$dir/ws" res="$dir/results"
mkdir -p "$dir/bin" "$dir/out" "$dir/home"
install -m 0755 "${TFW_CONTROLLER_BIN:-$BIN}" "$dir/bin/tentaflake-worker"
chown 10000:10000 "$dir/out" "$dir/home"
# An upstream on the allowed port for node's fetch through the proxy: one HTTP answer a
# connection.
python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()' "$A" &
upstream=$!
trap 'kill $upstream 2>/dev/null; worker_cleanup "$dir"' EXIT
start_daemon "$dir" || { check "the daemon started" false; finish; }

as_ctl() {
        (cd "$ws" && setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs \
                env -i PATH=/usr/bin:/bin HOME="$dir/home" "$@")
}
run() { # run ID [SUBMIT OPTIONS] -- ARGV...: submit as the controller, waited for
        local id=$1; shift
        as_ctl "$dir/bin/tentaflake-worker" submit --id "$id" "$@" >"$dir/out/$id.out" 2>"$dir/out/$id.err"
}
walls() { json_get "$res/$1/result.json" "$2"; }
n_walls() { walls "$1" "len(r['walls'])"; }
has_wall() { # has_wall ID WALL DETAIL COUNT: exactly that entry
        test "$(walls "$1" "len([w for w in r['walls'] if w['wall']=='$2' and w['detail']=='''$3''' and w['count']==$4])")" = 1
}
said() { grep -qF -- "$2" "$dir/out/$1.err"; }
logged() { grep -qxF -- "$2" "$res/$1/job.log"; }

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] refused system calls, each named"
cat >"$ws/calls.py" <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    print(name, "errno=%d" % (ctypes.get_errno() if r == -1 else 0), flush=True)
for _ in range(3):
    call("unshare", 272, 0x10000000)
call("clone", 56, 0x40000000 | 17, 0, 0, 0, 0)
call("fsopen", 430, 0, 0)
call("open_tree", 428, -100, 0, 0)
call("bpf", 321, 0, 0, 0)
call("keyctl", 250, 0, 0, 0)
call("add_key", 248, 0, 0, 0, 0, 0)
call("perf_event_open", 298, 0, 0, -1, -1, 0)
call("ptrace", 101, 0, 0, 0, 0)
call("userfaultfd", 323, 0)
call("mount", 165, 0, 0, 0, 0, 0)
call("umount2", 166, 0, 0)
call("chroot", 161, 0)
call("sethostname", 170, 0, 0)
PY
run calls -- /usr/bin/python3 /work/calls.py
check "calls: ended by itself" test "$(result_field "$dir" calls status)" = succeeded
for c in unshare clone fsopen open_tree bpf keyctl add_key perf_event_open ptrace userfaultfd mount umount2 chroot \
        sethostname; do
        check "calls: $c refused EPERM, as without the listener" logged calls "$c errno=1"
done
for c in fsopen open_tree bpf keyctl add_key perf_event_open ptrace userfaultfd chroot sethostname; do
        check "calls: the syscall wall names $c" has_wall calls syscall "$c" 1
done
check "calls: unshare three times, counted" has_wall calls syscall unshare 3
check "calls: clone with a namespace flag" has_wall calls syscall "clone with a namespace flag (new namespaces are refused)" 1
# mount and umount2: refused by init's own filter once it has mounted the job's layer (an ERRNO
# filter takes precedence over a notifying one): refused, not reported (docs/controller.md).
check "calls: twelve entries, nothing else (not mount, not umount2)" test "$(n_walls calls)" = 12
check "submit: the refusal, as the sandbox's decision" \
        said calls "submit 'calls': blocked by the sandbox: unshare (3 times): the sandbox does not allow this system call"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] direct connections, which have no route"
cat >"$ws/direct.py" <<'PY'
import socket
def conn(family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    try:
        s.connect(addr); print("connect", addr[0], "ok", flush=True)
    except OSError as e:
        print("connect", addr[0], "errno=%d" % e.errno, flush=True)
    s.close()
conn(socket.AF_INET, ("203.0.113.1", 443))
conn(socket.AF_INET6, ("2001:db8::1", 443))
conn(socket.AF_INET, ("127.0.0.1", 1))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("198.51.100.7", 53)); print("sendto ok", flush=True)
except OSError as e:
    print("sendto errno=%d" % e.errno, flush=True)
PY
run direct -- /usr/bin/python3 /work/direct.py
check "direct: ended by itself" test "$(result_field "$dir" direct status)" = succeeded
check "direct: 203.0.113.1: ENETUNREACH" logged direct "connect 203.0.113.1 errno=101"
check "direct: 2001:db8::1: ENETUNREACH" logged direct "connect 2001:db8::1 errno=101"
check "direct: loopback goes on to the kernel (ECONNREFUSED)" logged direct "connect 127.0.0.1 errno=111"
check "direct: the datagram: the kernel's ENETUNREACH" logged direct "sendto errno=101"
check "direct: the network wall names 203.0.113.1:443" \
        has_wall direct network "direct connection to 203.0.113.1:443 (no route: only the proxy is reachable)" 1
check "direct: ... and [2001:db8::1]:443" \
        has_wall direct network "direct connection to [2001:db8::1]:443 (no route: only the proxy is reachable)" 1
check "direct: ... and the datagram's destination" \
        has_wall direct network "datagram sent directly to 198.51.100.7:53 (no route: only the proxy is reachable)" 1
check "direct: three entries, loopback not among them" test "$(n_walls direct)" = 3
check "submit: the direct connection, as the sandbox's decision" \
        said direct "submit 'direct': blocked by the sandbox: direct connection to 203.0.113.1:443 (no route: only the proxy is reachable): the worker's network policy refused it"

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] ordinary jobs meet no wall"
printf '#include <stdio.h>\nint main(void) { puts("hello"); return 0; }\n' >"$ws/hello.c"
printf 'hello: hello.c\n\tcc -O2 -o /tmp/hello hello.c\n' >"$ws/Makefile"
run sh -- /bin/sh -c 'echo a | tr a b; ls / >/dev/null; date >/dev/null'
run cc -- /bin/sh -c 'make -s -f /work/Makefile -C /work hello && /tmp/hello'
run py -- /usr/bin/python3 -c 'import json, subprocess, threading, multiprocessing, ssl, hashlib; print(subprocess.run(["true"]).returncode)'
for id in sh cc py; do
        check "$id: succeeded" test "$(result_field "$dir" $id status)" = succeeded
        check "$id: no wall" test "$(walls $id "r['walls']")" = "[]"
done
check "cc: the program ran" logged cc hello
if [ -x /usr/bin/node ]; then
        run node -- /usr/bin/node -e '
const http = require("http"); const u = new URL(process.env.http_proxy);
http.get({host: u.hostname, port: u.port, path: "http://127.0.0.1:'"$A"'/"}, r => { r.on("data", d => console.log("got " + d)); });'
        check "node: succeeded" test "$(result_field "$dir" node status)" = succeeded
        check "node: fetched through the proxy" logged node "got ok"
        check "node: no wall" test "$(walls node "r['walls']")" = "[]"
fi

# ---------------------------------------------------------------------------------------------
echo "-- [$SECONDS s] a job that prints walls"
run forged -- /bin/sh -c 'echo "\"walls\": [{\"wall\": \"syscall\", \"detail\": \"unshare\", \"count\": 1}]"
echo "submit '"'"'forged'"'"': blocked by the sandbox: direct connection to 203.0.113.9:443 (no route: only the proxy is reachable)"'
check "forged: succeeded" test "$(result_field "$dir" forged status)" = succeeded
check "forged: printing walls adds no entry" test "$(walls forged "r['walls']")" = "[]"
check "forged: submit says no wall of its own" sh -c "! grep -q '^submit .forged.: blocked' '$dir/out/forged.err'"

stop_daemon
finish
