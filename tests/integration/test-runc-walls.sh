#!/usr/bin/env bash
# The runc driver's walls against a hostile job (threat 23; docs/capsule-engines.md), with the
# real worker and runc: tests/integration/runc-walls-probe.c, built static here, runs as the job
# and tries each way out of the host kernel's walls (new namespaces of every kind, setns, the
# mount API, bpf, perf, keyrings, io_uring, userfaultfd, ptrace of pid 1, modules, chroot,
# sethostname, raw and packet sockets, the host's loopback and an abstract unix socket of the
# host, /proc/sys and sysrq, kcore and the other masked files, mknod, setuid 0, writes to the
# root, devices beyond the six, capabilities, no_new_privs); then the limits: memory, processes
# and /work's bound. Each attempt must be refused, and the host's listeners must never hear
# from the capsule. The uid map the job sees is the one of the spec: root is an id that owns
# nothing, the job its own. Last, doctor proves the same walls live on this worker's config.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker
command -v runc >/dev/null || { echo "SKIP: runc is not installed"; exit 77; }
command -v cc >/dev/null || { echo "SKIP: no C compiler for the probe"; exit 77; }

dir=$(test_dir tfw-it-runcwalls)
chmod 0755 "$dir"
listeners=()
trap 'for p in "${listeners[@]}"; do kill "$p" 2>/dev/null; done; worker_cleanup "$dir"' EXIT
res=$dir/results
TFW_DRIVER=runc new_worker "$dir" ', "limits": {"memory": "128m", "memory_swap": "128m", "pids": 64, "workspace_tmpfs": "16m", "max_snapshot_bytes": "16m"}'
cc -static -O1 -o "$dir/ws/probe" tests/integration/runc-walls-probe.c || { echo "FAIL: cannot build the probe"; exit 1; }
chown 10000:10000 "$dir/ws/probe"

# The host's listeners: a TCP port on 127.0.0.1 and an abstract unix socket, each writing a file
# when anything connects.
port=$(free_port)
abstract="tfw-walls-$(basename "$dir")"
python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("up", flush=True)
s.accept(); open(sys.argv[2], "w").write("heard\n")' "$port" "$dir/heard-tcp" >"$dir/tcp.up" &
listeners+=($!)
python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.bind("\0" + sys.argv[1]); s.listen(); print("up", flush=True)
s.accept(); open(sys.argv[2], "w").write("heard\n")' "$abstract" "$dir/heard-unix" >"$dir/unix.up" &
listeners+=($!)
_up() { grep -q up "$1"; }
wait_for 30 _up "$dir/tcp.up" && wait_for 30 _up "$dir/unix.up" || { echo "FAIL: the host's listeners did not come up"; exit 1; }

"$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log" # the first run makes the inbox
submit "$dir" walls local-reversible "[\"/work/probe\",\"$port\",\"$abstract\"]"
submit "$dir" ids local-reversible '["sh","-c","cat /proc/self/uid_map /proc/self/gid_map; id -u; id -g"]'
submit "$dir" mem local-reversible '["/work/probe","mem"]'
submit "$dir" pids local-reversible '["/work/probe","pids"]'
submit "$dir" disk local-reversible '["sh","-c","dd if=/dev/zero of=/work/big bs=1M count=64 2>&1; echo size=$(stat -c %s /work/big)"]'
"$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log"

probe_ok() { # probe_ok NAME: the probe's line for NAME says the wall held
        grep -q "^PROBE $1 ok" "$res/walls/job.log" && return 0
        echo "walls: $(grep "^PROBE $1 " "$res/walls/job.log" || echo "no line for $1")"
        return 1
}
check "the hostile job ran to its end" grep -q "^PROBE done 0 breaches" "$res/walls/job.log"
check "... in a runc capsule, said its result" test "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["runtime"]["driver"])' "$res/walls/result.json")" = runc
for p in unshare_user unshare_mount unshare_pid unshare_net unshare_uts unshare_ipc unshare_cgroup setns \
        bpf perf_event_open keyctl add_key io_uring_setup userfaultfd ptrace_pid1 init_module finit_module \
        mount umount chroot sethostname setuid0 setgid0 mknod_null mknod_disk raw_socket packet_socket \
        host_loopback host_abstract_socket proc_sys_write proc_sys_hostname sysrq_trigger proc_kcore \
        proc_keys proc_timer_list proc_kallsyms sys_firmware sys_write root_write root_create dev_contents \
        capabilities no_new_privs; do
        check "a hostile job is refused: $p" probe_ok "$p"
done
# Each job's container record (runc delete) goes after its result is published (ExecPlan.defer_record),
# still within the job's own process: none is left once drain has returned.
runc_records() { runc --root "$(runsc_root "$dir")" list -q 2>/dev/null; }
check "no runc container record is left once the jobs are done (got: $(runc_records | tr '\n' ' '))" test -z "$(runc_records)"
check "the host's loopback listener never heard from the capsule" test ! -e "$dir/heard-tcp"
check "the host's abstract socket never heard from the capsule" test ! -e "$dir/heard-unix"

check "the job's uid map: root is the id that owns nothing, the job its own" \
        grep -qE '^ +0 +2130771968 +1$' "$res/ids/job.log"
check "... and no other id of the host is in it" test "$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+$' "$res/ids/job.log")" = 4
check "... the job runs as its own id" grep -qx 10000 "$res/ids/job.log"

check "a job that eats memory is killed at limits.memory" test "$(result_field "$dir" mem status)" = killed
check "... before it got 256 MiB" bash -c "! grep -q 'memory_touched 256 MiB' '$res/mem/job.log'"
forked=$(sed -n 's/^PROBE pids_forked //p' "$res/pids/job.log")
check "a fork bomb stops below limits.pids (got ${forked:-none})" test -n "$forked" -a "${forked:-99}" -lt 64
size=$(sed -n 's/^size=//p' "$res/disk/job.log")
check "what a job writes to /work stops at limits.workspace_tmpfs (got ${size:-none})" \
        test -n "$size" -a "${size:-0}" -gt 0 -a "${size:-0}" -le $((16 << 20))
# doctor proves the same walls live (docs/doctor.md): each of its runc probes holds here.
"$BIN" --config "$dir/config.json" doctor --json >"$dir/doctor.json" 2>>"$dir/daemon.log"
for p in probe_user_namespace probe_user_namespace_gid probe_namespaces probe_cgroup_namespace probe_masked_paths \
        probe_kernel_calls probe_seccomp_listener probe_landlock probe_seccomp probe_no_fuse probe_capabilities probe_no_new_privs \
        probe_network probe_readonly_root probe_pids_limit probe_memory_limit; do
        check "doctor proves $p" python3 -c 'import json, sys
a = [c for c in json.load(open(sys.argv[1])) if c["check"] == sys.argv[2]]
assert a and a[0]["ok"] is True, a or "no such check"' "$dir/doctor.json" "$p"
done
check "doctor names the engine and the host's kernel" python3 -c 'import json, sys
a = [c for c in json.load(open(sys.argv[1])) if c["check"] == "isolation"]
assert a and a[0]["detail"].startswith("engine runc, the host"), a' "$dir/doctor.json"
finish
