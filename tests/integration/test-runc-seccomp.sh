#!/usr/bin/env bash
# The runc capsule's seccomp allow-list (capsule/seccomp-allowlist.c) in force (threat 23): a
# bundle made here by hand (rootfs: a static hostile probe, tests/integration/runc-probe.c;
# every namespace, a user namespace whose root is an unprivileged host id, no capabilities,
# noNewPrivileges, a read-only root, a tmpfs /tmp, linux.seccomp as the worker writes it) run
# by the real runc. The probe tries each refused family (namespaces, the mount API, bpf, perf,
# keys, io_uring, userfaultfd, ptrace, modules, kexec, file handles, syslog, acct, quotas,
# swap, reboot, personality, raw, packet, vsock and netlink sockets, chroot, host names, device
# nodes, the clocks, the i386 ABI) and ordinary work (fork and exec, threads, files in /tmp,
# pipes, TCP over loopback). Then the same probe under a profile that lets three refused calls
# through must report those three: the probe sees a missing wall.
. "$(dirname "$0")/lib.sh"
require_root
. "$(dirname "$0")/runc-bundle-lib.sh"
ALLOWLIST=${BUILD:-build}/tests/unit/test-seccomp-allowlist
[ -x "$ALLOWLIST" ] || { echo "FAIL: $ALLOWLIST missing (make unit-bins)"; exit 1; }

runc_bundle runc-seccomp
"$ALLOWLIST" --print plain >"$dir/seccomp.json" || { echo "FAIL: cannot print the profile"; exit 1; }
config() { runc_config "$1" 0 '["/probe"]'; }
run_probe() { runc_run "$1"; }
has() { awk -v p="$2" 'index($0, p) == 1 { f = 1 } END { exit !f }' "$dir/$1.out"; }

config "$dir/seccomp.json"
run_probe walls
walls_rc=$?
cat "$dir/walls.out"
[ -s "$dir/walls.err" ] && sed 's/^/runc: /' "$dir/walls.err"
check "the probe ran to its end under the allow-list" grep -q '^probe: [0-9]* ok, 0 failed$' "$dir/walls.out"
check "... and exited 0 (runc: $walls_rc)" test "$walls_rc" -eq 0
check "... no check failed" sh -c "! grep -q '^FAIL' '$dir/walls.out'"
for c in "unshare(CLONE_NEWUSER) filter" "clone(CLONE_NEWUSER) filter" "clone3 ENOSYS filter" \
        "setns(-1) filter" "mount(NULL) filter" "umount2(bad flags) filter" "open_tree(bad flags) filter" \
        "mount_setattr(bad flags) filter" "bpf" "perf_event_open(NULL) filter" "keyctl(GET_KEYRING_ID) filter" \
        "io_uring_setup filter" "userfaultfd(USER_MODE_ONLY) filter" "ptrace(TRACEME) filter" \
        "process_vm_readv(self) filter" "init_module" "finit_module" "open_by_handle_at" "syslog" \
        "personality(ADDR_NO_RANDOMIZE) filter" "socket(AF_PACKET)" "socket(AF_INET, SOCK_RAW)" \
        "socket(AF_VSOCK)" "socket(NETLINK_KOBJECT_UEVENT) filter" "chroot" "sethostname" \
        "mknod(char device)" "settimeofday(NULL) filter" "adjtimex(read) filter" \
        "fork and exec" "posix_spawn" "a thread" "file I/O in /tmp" "a pipe" "TCP over loopback" \
        "the root is read-only"; do
        check "probe: $c" has walls "ok $c:"
done
if [ "$(uname -m)" = x86_64 ]; then
        check "probe: the i386 ABI is not the filter's" has walls "ok int 0x80 (i386 ABI) getpid:"
fi

# The same probe where the profile lets unshare, ptrace and io_uring_setup through: it must
# say so (a probe that could not see a missing wall would prove nothing above).
jq '.syscalls[0].names += ["unshare", "ptrace", "io_uring_setup"]' "$dir/seccomp.json" >"$dir/seccomp-holes.json"
config "$dir/seccomp-holes.json"
run_probe holes
check "with holes: the probe fails" sh -c "! grep -q '^probe: [0-9]* ok, 0 failed$' '$dir/holes.out'"
for c in "unshare(CLONE_NEWUSER) filter" "ptrace(TRACEME) filter" "io_uring_setup filter"; do
        check "with holes: it reports $c" has holes "FAIL $c:"
done
check "with holes: nothing else fails" test "$(grep -c '^FAIL' "$dir/holes.out")" -eq 4
finish
