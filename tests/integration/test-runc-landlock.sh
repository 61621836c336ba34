#!/usr/bin/env bash
# tentaflake-capsule-init --landlock in a runc capsule (threat 23; capsule-init/landlock.c): a
# bundle made here by hand (tests/integration/runc-bundle-lib.sh: every namespace, a user
# namespace, no capability, the runc allow-list) whose /work, /tmp and /scratch are all tmpfs
# anyone may write. Init, given the secret and an empty workspace stream as the worker gives
# them, runs the probe (tests/integration/runc-probe.c --landlock) as the job: it may write
# /work, /tmp and /dev/null, and not /scratch (EACCES), and still reads and execs. Without
# --landlock the same probe writes /scratch (the ruleset is what stops it). And init fails
# closed: where landlock_create_ruleset is refused, it runs nothing and says why, with
# init_error=landlock in its status trailer. And with the job's layer (init as the capsule's
# root mounting its overlay under the layer's profile, then dropping), the same holds.
. "$(dirname "$0")/lib.sh"
require_root
. "$(dirname "$0")/runc-bundle-lib.sh"
ALLOWLIST=${BUILD:-build}/tests/unit/test-seccomp-allowlist
INIT=${BUILD:-build}/tentaflake-capsule-init
[ -x "$ALLOWLIST" ] || { echo "FAIL: $ALLOWLIST missing (make unit-bins)"; exit 1; }
[ -x "$INIT" ] || { echo "FAIL: $INIT missing (make all)"; exit 1; }

runc_bundle runc-landlock
cp "$INIT" "$bundle/rootfs/init"
"$ALLOWLIST" --print plain >"$dir/seccomp.json" || { echo "FAIL: cannot print the profile"; exit 1; }
jq '.syscalls[0].names -= ["landlock_create_ruleset"]' "$dir/seccomp.json" >"$dir/seccomp-no-landlock.json"
# The channel as the worker writes it (capsule/protocol.h): the secret, then the input byte of
# a streamed workspace and the stream's end; the log token is the secret's second half.
token=$(python3 -c 'import os, sys
s = os.urandom(32)
open(sys.argv[1], "wb").write(s + b"SE")
print(s[16:].hex())' "$dir/input") || exit 1
trailer() { # trailer NAME FIELDS: the status trailer with the log token and these fields
        grep -aq "tentaflake-capsule-status $token $2" "$dir/$1.err"
}
has() { awk -v p="$2" 'index($0, p) == 1 { f = 1 } END { exit !f }' "$dir/$1.err"; }

runc_config "$dir/seccomp.json" 1000 '["/init", "--landlock", "--", "/probe", "--landlock"]'
runc_run walls "$dir/input"
sed 's/^/walls: /' "$dir/walls.err"
check "with --landlock: the job ran to its end" has walls "probe: 8 ok, 0 failed"
check "... /scratch refused EACCES" has walls "ok create in /scratch: returned -1 (Permission denied)"
check "... /work, /tmp and /dev/null written" sh -c "grep -q '^ok /work/landlock-file: works' '$dir/walls.err' &&
        grep -q '^ok /tmp/landlock-file: works' '$dir/walls.err' && grep -q '^ok write /dev/null: works' '$dir/walls.err'"
check "... init's trailer: exit 0, no init error" trailer walls "exit=0 signal=0 init_error=none"

runc_config "$dir/seccomp.json" 1000 '["/init", "--", "/probe", "--landlock"]'
runc_run bare "$dir/input"
check "without --landlock: the probe writes /scratch" has bare "FAIL create in /scratch"
check "... and says so in its exit" trailer bare "exit=1 signal=0 init_error=none"

runc_config "$dir/seccomp-no-landlock.json" 1000 '["/init", "--landlock", "--", "/probe", "--landlock"]'
runc_run closed "$dir/input"
sed 's/^/closed: /' "$dir/closed.err"
check "no Landlock: init refuses, saying why" \
        grep -q "refusing to run the job without Landlock: Landlock is not available in this kernel: Operation not permitted" "$dir/closed.err"
check "... nothing of the job ran" sh -c "! grep -q '^probe:' '$dir/closed.err'"
check "... its trailer says init_error=landlock, exit 125" trailer closed "exit=125 signal=0 init_error=landlock"
# With the job's layer, as the driver starts a generation's capsule: init as the capsule's root
# with CAPSULE_LAYER_CAPS under the layer's profile mounts its overlay on /work (the generation,
# bound read-only), refuses mount again, drops to 1000:1000, then takes Landlock: the job writes
# /work (into the layer, never the generation) and still not /scratch.
mkdir -p "$bundle/rootfs/.tentaflake/layer" "$dir/gen"
chmod 0700 "$bundle/rootfs/.tentaflake/layer"
echo given >"$dir/gen/file"
chown -R "$((HOST_ID + 1000)):$((HOST_ID + 1000))" "$dir/gen"
chmod 0755 "$dir/gen"
"$ALLOWLIST" --print layer >"$dir/seccomp-layer.json" || { echo "FAIL: cannot print the layer's profile"; exit 1; }
python3 -c 'import sys; s = open(sys.argv[1], "rb").read(32); open(sys.argv[2], "wb").write(s + b"B")' \
        "$dir/input" "$dir/input-layer" || exit 1
runc_config "$dir/seccomp-layer.json" 0 '["/init", "--landlock", "--layer=1000:1000", "--", "/probe", "--landlock"]'
jq --arg gen "$dir/gen" '.mounts |= map(select(.destination != "/work"))
        | .mounts += [{destination: "/work", type: "bind", source: $gen, options: ["rbind", "ro"]},
                      {destination: "/.tentaflake/layer", type: "tmpfs", source: "tmpfs",
                       options: ["nosuid", "nodev", "size=16m", "mode=0700"]}]
        | .process.capabilities = ({bounding: ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
                                               "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_SYS_ADMIN"]}
                                   | .effective = .bounding | .permitted = .bounding)' \
        "$bundle/config.json" >"$bundle/config.layer.json" && mv "$bundle/config.layer.json" "$bundle/config.json"
runc_run layer "$dir/input-layer"
sed 's/^/layer: /' "$dir/layer.err"
check "with the layer: the job ran to its end" has layer "probe: 8 ok, 0 failed"
check "... init's trailer: exit 0, no init error" trailer layer "exit=0 signal=0 init_error=none"
check "... the generation is untouched" sh -c "[ ! -e '$dir/gen/landlock-file' ] && [ \"\$(ls '$dir/gen')\" = file ]"
finish
