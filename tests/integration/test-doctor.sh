#!/usr/bin/env bash
# `doctor` on the real machine (issue 6): it passes, every line ✓, on a good config with the
# runsc driver (and with the docker driver when an engine can be started), and fails with a
# clear ✗ line when runsc is missing, the results directory has the wrong mode, the memory
# limit is not applied, the seccomp profile and the /dev covers are not (attack review "a
# narrower capsule"), or the docker image is missing. Root, real runsc; exit 77 without.
#
# "The memory limit is not applied" is simulated honestly, from outside the worker: runtime.runsc
# names a wrapper that, for `runsc run`, lifts the memory limit of the job's cgroup (which the
# worker made and limited, and which runsc joins as it is) and then execs the real runsc. The
# worker is unchanged and cannot tell; only the doctor's live memory probe can notice.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
runsc=$(command -v runsc) || { echo "SKIP: runsc is not installed"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built"; exit 1; }

tmp=$(test_dir tfw-doctortest)
chmod 0755 "$tmp"
# The workers' names end in 8 hex digits of this run's directory: their cgroup groups, runsc
# roots and engine labels are never another run's.
run=$(printf %s "$tmp" | sha256sum | cut -c1-8)
# doctor's probe directories (/tmp/tfw-doctor-*) are looked for in a /tmp of the test's own,
# bound over /tmp in a mount namespace of its own for the runsc driver's doctor: another
# doctor's on the same host, made while this one runs, is not this one's leftover.
mkdir -m 1777 "$tmp/private-tmp"
image= pimage=
cleanup() {
        [ -n "$image" ] && docker rmi "$image" >/dev/null 2>&1
        [ -n "$pimage" ] && podman rmi "$pimage" >/dev/null 2>&1
        local c
        for c in "$tmp"/*/config.json; do
                [ -e "$c" ] && remove_cgroup_group "tentaflake-worker-$(worker_name "$(dirname "$c")")"
        done
        rm -rf "$tmp"
}
trap cleanup EXIT

# a gid with no group entry, for the container_gid check
nogid=54321
while getent group "$nogid" >/dev/null; do nogid=$((nogid + 1)); done

# config NAME RUNTIME_JSON [GID]: a worker config in $tmp/NAME
config() {
        local d=$tmp/$1
        mkdir -p "$d/ws"
        chown 10000:"${3:-100}" "$d/ws"
        cat >"$d/config.json" <<JSON
{"version": 1, "name": "doc-$1-$run", "workspace": "$d/ws", "container_uid": 10000,
 "container_gid": ${3:-100}, "state_dir": "$d/state", "results_dir": "$d/results",
 "runtime": $2}
JSON
}

out=$tmp/out
doctor() { # doctor NAME [--json]: run it, output in $out, its exit status in $rc
        "$BIN" --config "$tmp/$1/config.json" doctor "${@:2}" >"$out" 2>&1
        rc=$?
}
private_tmp_doctor() { # the same, with the test's own /tmp (the runsc driver only: dockerd
        # would not see it)
        unshare -m --propagation private sh -c 'mount --bind "$0" /tmp && exec "$@"' "$tmp/private-tmp" \
                "$BIN" --config "$tmp/$1/config.json" doctor "${@:2}" >"$out" 2>&1
        rc=$?
}
has() { grep -q -- "$1" "$out" || { echo "  missing line /$1/ in:"; sed 's/^/    /' "$out"; return 1; }; }
no_fail_line() { ! grep -q '^✗' "$out" || { echo "  ✗ lines:"; grep '^✗' "$out" | sed 's/^/    /'; return 1; }; }
# Every line ✓, but for the informational "·" lines (the other runsc platforms).
every_line_passes() { no_fail_line && [ "$(grep -c '^✓' "$out")" -eq "$(grep -vc '^·' "$out")" ]; }
only_failure() { # only_failure CHECK: exactly one ✗ line, the named check
        [ "$(grep -c '^✗' "$out")" -eq 1 ] && grep -q "^✗ $1: " "$out" ||
                { echo "  expected only ✗ $1 in:"; sed 's/^/    /' "$out"; return 1; }
}

# ---- runsc driver, good config ------------------------------------------------------------
config good '{"driver": "runsc"}'
quiet tfw "$tmp/good" list # the worker creates its directories; doctor never does
private_tmp_doctor good
check "good config: exit 0 (was $rc)" [ "$rc" -eq 0 ]
check "good config: every line ✓" every_line_passes
for c in runtime openat2 cgroup_memory cgroup_pids state_dir results_dir container_gid platform \
        probe_uid_gid probe_capabilities probe_no_new_privs probe_network probe_readonly_root \
        probe_readonly_snapshot probe_tmpfs_limit probe_pids_limit probe_memory_limit \
        probe_no_fuse probe_seccomp probe_no_fuse_warm probe_seccomp_warm; do
        check "good config: ✓ $c" has "^✓ $c: "
done
check "good config: runsc version shown" has "^✓ runtime: .*runsc version"
# Enforced either way: the job killed, or (the guest kernel sized to the limit, seen once in
# CI with runsc 20240729) the allocation refused inside the capsule; never survived.
check "good config: the memory probe was killed or refused" \
        has "^✓ probe_memory_limit: .* \\(was killed\\|was refused inside the capsule\\)"
# Issue 12: which other platforms work here, and how fast (systrap is configured; ptrace works
# on this host, kvm hangs and is ended after its 10 s bound).
check "good config: · platform_ptrace says it works and how fast" has "^· platform_ptrace: also works here: started a sandbox in [0-9]* ms"
check "good config: · platform_kvm is reported, not waited on" has "^· platform_kvm: "
check "good config: systrap is not tried twice" sh -c "! grep -q '^· platform_systrap' '$out'"
cat "$out"

private_tmp_doctor good --json
check "--json: exit 0" [ "$rc" -eq 0 ]
check "--json: an array of {check, ok, detail}, all ok" python3 -c '
import json, sys
a = json.load(open(sys.argv[1]))
assert isinstance(a, list) and len(a) >= 17, a
for c in a:
    assert set(c) == {"check", "ok", "detail"}, c
    assert c["ok"] is True or (c["ok"] is None and (c["check"].startswith("platform_") or
                                                   c["check"] in ("generation_store", "workspace_watch",
                                                                  "isolation"))), c
assert "probe_memory_limit" in [c["check"] for c in a]
# The engine and its walls, informational (issue 48): gVisor here.
assert [c["detail"] for c in a if c["check"] == "isolation"][0].startswith("engine runsc, gVisor"), a
# The generation store is reported, informational (no job has used it yet here).
assert [c["detail"] for c in a if c["check"] == "generation_store"][0].startswith("no job has used it yet"), a
# So is the budget of the workspace watch (issue 33), with its figures.
assert [c["detail"] for c in a if c["check"] == "workspace_watch"][0].startswith("at most "), a
' "$out"

# doctor left nothing in its /tmp: no probe directory
check "no probe directory left ($(ls -A "$tmp/private-tmp" | tr '\n' ' '))" [ -z "$(ls -A "$tmp/private-tmp")" ]

# ---- runsc missing ------------------------------------------------------------------------
config norunsc "{\"driver\": \"runsc\", \"runsc\": \"$tmp/no-such/runsc\"}" "$nogid"
doctor norunsc
check "runsc missing: exit 1" [ "$rc" -eq 1 ]
check "runsc missing: ✗ runtime names the path" has "^✗ runtime: runsc '$tmp/no-such/runsc' is missing"
check "runsc missing: the probe is not run" has "^✗ probe: not run"
check "no group entry: ✗ container_gid" has "^✗ container_gid: no group entry for container_gid $nogid"

# ---- results directory with the wrong mode ------------------------------------------------
chmod 00755 "$tmp/good/results" # five digits: GNU chmod keeps a directory's setgid bit otherwise
doctor good
check "results mode: exit 1" [ "$rc" -eq 1 ]
check "results mode: ✗ results_dir names the mode" \
        has "^✗ results_dir: .*with mode 0755; it must be 0:100 with mode 2750"
check "results mode: the only failure" only_failure results_dir
check "results mode: doctor did not repair it" [ "$(stat -c %a "$tmp/good/results")" = 755 ]
chmod 02750 "$tmp/good/results"

# ---- the memory limit not applied ---------------------------------------------------------
cat >"$tmp/lifting-runsc" <<SH
#!/bin/sh
# For \`runsc run --bundle B ID\`: lift the memory limit of the job's cgroup, then run runsc.
prev= bundle=
for a in "\$@"; do [ "\$prev" = --bundle ] && bundle=\$a; prev=\$a; done
if [ -n "\$bundle" ]; then
        cg=\$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["linux"]["cgroupsPath"])' "\$bundle/config.json")
        if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
                echo max >"/sys/fs/cgroup\$cg/memory.max" && echo max >"/sys/fs/cgroup\$cg/memory.swap.max" &&
                        echo "\$cg" >>"$tmp/lifted"
        else
                m=/sys/fs/cgroup/memory\$cg
                { echo -1 >"\$m/memory.memsw.limit_in_bytes"; } 2>/dev/null
                echo -1 >"\$m/memory.limit_in_bytes" && echo "\$cg" >>"$tmp/lifted"
        fi
fi
exec $runsc "\$@"
SH
chmod 0755 "$tmp/lifting-runsc"
config nolimit "{\"driver\": \"runsc\", \"runsc\": \"$tmp/lifting-runsc\"}"
quiet tfw "$tmp/nolimit" list
doctor nolimit
check "no memory limit: exit 1" [ "$rc" -eq 1 ]
check "no memory limit: the wrapper lifted the limits" [ -s "$tmp/lifted" ]
check "no memory limit: ✗ probe_memory_limit" \
        has "^✗ probe_memory_limit: allocating 256 MiB under a 64 MiB limit was not killed: the job ended succeeded"
check "no memory limit: the only failure" only_failure probe_memory_limit

# ---- the narrow capsule not applied -------------------------------------------------------
# Attack review "a narrower capsule": runtime.runsc names a wrapper that drops --oci-seccomp
# (runsc then ignores the spec's seccomp profile) and the covers of /dev/fuse and /dev/net
# from the bundle's spec, then execs the real runsc; only the live probes can notice.
cat >"$tmp/wide-runsc" <<SH
#!/bin/bash
a=() prev= bundle=
for x in "\$@"; do
        [ "\$x" = --oci-seccomp ] && continue
        [ "\$prev" = --bundle ] && bundle=\$x
        prev=\$x; a+=("\$x")
done
[ -n "\$bundle" ] && /usr/bin/python3 -c 'import json, sys
p = sys.argv[1]; s = json.load(open(p))
s["mounts"] = [m for m in s["mounts"] if m["destination"] not in ("/dev/fuse", "/dev/net")]
json.dump(s, open(p, "w"))' "\$bundle/config.json"
exec $runsc "\${a[@]}"
SH
chmod 0755 "$tmp/wide-runsc"
config wide "{\"driver\": \"runsc\", \"runsc\": \"$tmp/wide-runsc\"}"
quiet tfw "$tmp/wide" list
doctor wide
check "no narrowing: exit 1" [ "$rc" -eq 1 ]
check "no narrowing: ✗ probe_seccomp names what was allowed" \
        has "^✗ probe_seccomp: unshare(CLONE_NEWUSER) allowed, a tmpfs mount in a new user namespace allowed"
check "no narrowing: ✗ probe_no_fuse names /dev/fuse" has "^✗ probe_no_fuse: /dev has /dev/fuse"
check "no narrowing: ✗ on the capsule started ahead too" has "^✗ probe_seccomp_warm: .* allowed"
check "no narrowing: ✗ probe_no_fuse_warm" has "^✗ probe_no_fuse_warm: /dev has /dev/fuse"

# ---- docker driver ------------------------------------------------------------------------
if command -v docker >/dev/null && scripts/start-dockerd >/dev/null 2>&1 &&
        image=$(tests/integration/docker-image.sh docker 2>/dev/null) && [ "${image#sha256:}" != "$image" ]; then
        config dock "{\"driver\": \"docker\", \"image\": \"$image\"}"
        quiet tfw "$tmp/dock" list
        doctor dock
        check "docker: exit 0 (was $rc)" [ "$rc" -eq 0 ]
        check "docker: every line ✓" every_line_passes
        check "docker: ✓ engine_runtime" has "^✓ engine_runtime: runtime 'runsc'"
        check "docker: ✓ image" has "^✓ image: '$image' is in the local docker store"
        check "docker: ✓ probe_no_new_privs" has "^✓ probe_no_new_privs: "
        check "docker: ✓ probe_memory_limit" has "^✓ probe_memory_limit: "
        cat "$out"

        missing=sha256:00000000000000000000000000000000000000000000000000000000000000aa
        config noimage "{\"driver\": \"docker\", \"image\": \"$missing\"}"
        quiet tfw "$tmp/noimage" list
        doctor noimage
        check "image missing: exit 1" [ "$rc" -eq 1 ]
        check "image missing: ✗ image names it" has "^✗ image: image '$missing' is not in the local docker store"
        not_in_store() { ! docker image inspect "$1" >/dev/null 2>&1; }
        check "image missing: never pulled" not_in_store "$missing"
        check "docker: no container of the doctor left" \
                [ -z "$(docker ps -aq --filter label=org.tentaflake.worker=doc-dock-$run --filter label=org.tentaflake.worker=doc-noimage-$run)" ]
elif [ "${TENTAFLAKE_MUST_WORK:-}" = 1 ]; then
        check "docker engine and test image available (TENTAFLAKE_MUST_WORK=1)" false
else
        echo "SKIP (part): no docker engine; the docker driver's doctor is not tested"
fi

# ---- podman driver (rootful), where it runs ----------------------------------------------
if command -v podman >/dev/null &&
        pimage=$(tests/integration/docker-image.sh podman 2>/dev/null) && [ "${pimage#sha256:}" != "$pimage" ]; then
        config pod "{\"driver\": \"podman\", \"image\": \"$pimage\"}"
        quiet tfw "$tmp/pod" list
        doctor pod
        check "podman: exit 0 (was $rc)" [ "$rc" -eq 0 ]
        check "podman: every line ✓" every_line_passes
        check "podman: ✓ probe_memory_limit" has "^✓ probe_memory_limit: "
        check "podman: no container of the doctor left" \
                [ -z "$(podman ps -aq --filter label=org.tentaflake.worker=doc-pod-$run)" ]
else
        echo "SKIP (part): no podman; the podman driver's doctor is not tested"
fi

finish
