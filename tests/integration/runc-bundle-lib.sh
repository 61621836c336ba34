# Hand-made runc bundles for the tests of the runc capsule's walls (sourced after lib.sh):
# test-runc-seccomp.sh, test-runc-landlock.sh. Each bundle is the test's own: a private runc
# --root, a container id unique to the test's directory, removed on exit.
#
# runc_bundle NAME: SKIP without runc, jq or a static libc; sets $dir (0755: runc's init, the
# capsule's root, walks to the rootfs), $bundle, $state, $id; the rootfs holds /probe (built
# static from runc-probe.c) and empty proc, dev, sys, tmp, work and scratch.
RUNC=${RUNC:-/usr/sbin/runc}
# An id range nothing on the host owns: the capsule's root is no one outside it.
HOST_ID=${TFW_RUNC_HOST_ID:-3000000000}

runc_bundle() {
        [ -x "$RUNC" ] || { echo "SKIP: runc is not installed ($RUNC)"; exit 77; }
        command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
        dir=$(test_dir "$1") || exit 1
        chmod 0755 "$dir"
        id=$(unique_name "tfw-$1-" "$dir")
        state=$dir/state
        bundle=$dir/bundle
        trap runc_cleanup EXIT
        mkdir -p "$bundle/rootfs"/{proc,dev,sys,tmp,work,scratch} "$state"
        # runc gives a tmpfs its mount point's mode, whatever the mount's mode= says
        chmod 1777 "$bundle/rootfs"/{tmp,work,scratch}
        chmod 0700 "$state"
        if ! cc -static -pthread -O1 -o "$bundle/rootfs/probe" "$(dirname "$0")/runc-probe.c" 2>"$dir/cc.log"; then
                cat "$dir/cc.log"
                echo "SKIP: cannot build a static probe (cc -static: libc6-dev?)"
                exit 77
        fi
        (cd "$bundle" && "$RUNC" spec && mv config.json config.json.orig) || exit 1
}

runc_cleanup() {
        "$RUNC" --root "$state" delete -f "$id" >/dev/null 2>&1
        rm -rf "$dir"
}

# runc_config SECCOMP_FILE UID ARGS_JSON: the spec, from runc's default: every namespace, a user
# namespace mapping 65536 ids from HOST_ID, no capability, noNewPrivileges, a read-only root,
# tmpfs on /tmp, /work and /scratch (all three writable by anyone), linux.seccomp from the file.
runc_config() {
        jq --slurpfile sc "$1" --argjson host "$HOST_ID" --argjson uid "$2" --argjson args "$3" '
                .process.terminal = false | .process.args = $args | .process.cwd = "/"
                | .process.user = {uid: $uid, gid: $uid} | .process.noNewPrivileges = true
                | .process.capabilities = {bounding: [], effective: [], permitted: [], inheritable: [], ambient: []}
                | .root = {path: "rootfs", readonly: true} | .hostname = "probe"
                | .linux.namespaces = [{type: "pid"}, {type: "network"}, {type: "ipc"}, {type: "uts"},
                                       {type: "mount"}, {type: "cgroup"}, {type: "user"}]
                | .linux.uidMappings = [{containerID: 0, hostID: $host, size: 65536}]
                | .linux.gidMappings = [{containerID: 0, hostID: $host, size: 65536}]
                | .mounts |= map(select(.destination != "/sys/fs/cgroup"))
                | .mounts += [{destination: "/tmp", type: "tmpfs", source: "tmpfs",
                               options: ["nosuid", "nodev", "size=16m", "mode=1777"]},
                              {destination: "/work", type: "tmpfs", source: "tmpfs",
                               options: ["nosuid", "nodev", "size=16m", "mode=1777"]},
                              {destination: "/scratch", type: "tmpfs", source: "tmpfs",
                               options: ["nosuid", "nodev", "size=1m", "mode=1777"]}]
                | .linux.seccomp = $sc[0]' "$bundle/config.json.orig" >"$bundle/config.json"
}

# runc_run NAME [STDIN]: the capsule, its stdout in $dir/NAME.out, its stderr in $dir/NAME.err;
# runc's status.
runc_run() {
        local rc
        timeout --kill-after=10 120 "$RUNC" --root "$state" run --bundle "$bundle" "$id" \
                <"${2:-/dev/null}" >"$dir/$1.out" 2>"$dir/$1.err"
        rc=$?
        "$RUNC" --root "$state" delete -f "$id" >/dev/null 2>&1
        return $rc
}
