#!/usr/bin/env bash
# `serve --sandbox runc` against the test-double forge, with a --state-dir serve makes itself:
#   - serve makes the state directory passable (0711, root's): the capsules' roots are below it
#     and each capsule's root id mounts its own from inside its user namespace; at 0700 (serve's
#     own mode for a new directory, and the systemd unit's StateDirectoryMode=) every capsule
#     failed ("error preparing rootfs: mount .../runc-roots/<container>: permission denied");
#   - a check passes in a runc capsule, and its signed attestation verifies and names the tree.
# The same worker under the systemd unit: docs/install.md, "The runc engine".
set -uo pipefail
. "$(dirname "$0")/lib.sh"
require_root
command -v runc >/dev/null || { echo "SKIP: runc is not installed"; exit 77; }
command -v openssl >/dev/null || { echo "SKIP: openssl is not installed"; exit 77; }
. "$(dirname "$0")/serve-lib.sh"
SERVE_FLAGS=(--system-mounts-identity debian-12 --sandbox runc)
chmod 0755 "$tmp" # as /var/lib is: the capsules' root id passes through every ancestor

start_worker rc-1
enqueue pass1 "$TREE" '{"argv":["sh","-c","cat ok.txt && ./run.sh"],"timeout_secs":60}'
final pass1 60
check "the state directory serve made is root's 0711 ($(stat -c '%U %a' "$tmp/state-rc-1"))" \
        test "$(stat -c '%U %a' "$tmp/state-rc-1")" = "root 711"
check "pass1 passed in a runc capsule ($(q "jobs['pass1']['history'][-1].get('status'), jobs['pass1']['history'][-1].get('reason')"))" \
        [ "$(q "jobs['pass1']['history'][-1].get('status')")" = pass ]
attestation pass1 pass1.att
check "its attestation verifies and names the tree and pass" \
        verify pass1.att --expect "subject.gitTree=$TREE" --expect predicate.result=pass
finish
