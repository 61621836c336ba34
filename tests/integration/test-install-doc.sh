#!/usr/bin/env bash
# docs/install.md followed literally (issue 47 item 2): every code block of it whose info string
# is `sh install-step PHASE` is run as it is written, as root in a login-like environment, inside
# a booted systemd (systemd-nspawn, as test-systemd-boot.sh boots it: the host's root as a
# throw-away overlay), from a copy of the checkout's tracked files, one block after the other
# in the document's order, each in a fresh `bash -e` started in the checkout:
#  - host: the build's packages, `make deb`, the backports source and pin and `apt-get update`,
#    `apt-get install` of the package just built;
#  - controller, daemon, doctor, path for a first controller: its user and group, the config and
#    check-config, the drop-ins and tmpfiles line, the daemon with `doctor` passing and
#    `submit`'s result, then the switch to path mode with a request dropped into the inbox and
#    its result;
#  - controller, path, doctor for a second controller that goes straight to path mode: no
#    daemon ever ran for it, so the path unit's own start must make its inbox (before the fix
#    it never existed, and the path mode could not start).
# Each block must exit 0, and the results are read back. The one change made to the blocks'
# text: the controller's name (hermes-coding) and its uid and gid (10000) are the run's own,
# so that its cgroups (made in the host's hierarchies) are never another worker's.
#
# A fresh machine is made of the overlay first: no package of the worker, no user or group of
# the ids used, no backports source or runsc pin, no /etc/tentaflake, an empty /usr/local.
# runsc and the build's packages stay installed as on the host (the steps then install nothing
# new of them; downloading them anew every run would test the mirror, not the steps).
# `apt-get update` needs the network. Root; a few minutes, most of it `make deb`.
set -uo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
source tests/integration/lib.sh
source tests/integration/nspawn-lib.sh # the boot harness: boot, ct, die, cleanup
require_root
nspawn_require_tools
for tool in git python3; do
        command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

tmp=$(mktemp -d)
chmod 0755 "$tmp"
hash=$(printf %s "$tmp" | sha256sum | cut -c1-8)
names=("hc-$hash" "hp-$hash") ids=(10000 10001)
cleanup() {
        local n
        for n in "${names[@]}"; do remove_cgroup_group "tentaflake-worker-$n"; done
        rm -rf "$tmp"
}
trap nspawn_cleanup EXIT
etc=$tmp/etc binds=()
mkdir -p "$tmp/root" "$etc/system" "$tmp/dest/usr/local" "$tmp/src" "$tmp/steps" "$tmp/out"
printf '[Unit]\nDescription=tentaflake test boot\nRequires=sysinit.target\nAfter=sysinit.target\n' \
        >"$etc/system/tfw-test.target"

# ---- the checkout, as a clone has it (the tracked files, as the tree has them now) ----------
git ls-files -z | tar --null -T - -cf - | tar -C "$tmp/src" -xf - || die "cannot copy the checkout"

# ---- the blocks: NN-PHASE, in the document's order, their indentation removed ----------------
python3 - docs/install.md "$tmp/steps" <<'PY' || die "cannot read the steps of docs/install.md"
import re, sys
lines = open(sys.argv[1]).read().split("\n")
n, i = 0, 0
while i < len(lines):
    m = re.match(r"^( *)```sh install-step (host|controller|daemon|doctor|path)$", lines[i])
    i += 1
    if not m:
        continue
    indent, block = len(m.group(1)), []
    while not re.match(r"^ *```$", lines[i]):
        line = lines[i]
        if line.strip() and not line.startswith(" " * indent):
            sys.exit(f"line {i + 1}: less indented than its fence")
        block.append(line[indent:])
        i += 1
    i += 1
    n += 1
    open(f"{sys.argv[2]}/{n:02d}-{m.group(2)}", "w").write("\n".join(block) + "\n")
PY
steps=$(cd "$tmp/steps" && ls)
echo "steps: $(tr '\n' ' ' <<<"$steps")"
check "install.md has the steps in order: host x4, controller x3, daemon, doctor, daemon, path" \
        test "$(sed 's/^[0-9]*-//' <<<"$steps" | tr '\n' ' ')" = "host host host host controller controller controller daemon doctor daemon path "

binds+=(--bind="$tmp/src:/root/tentaflake-worker" --bind-ro="$tmp/steps:/root/steps")
# ---- boot, and make a fresh machine of it ---------------------------------------------------------
nspawn_boot "tfw-idoc-$$"
ct sh -c '
        if dpkg -s tentaflake-worker >/dev/null 2>&1; then dpkg --purge tentaflake-worker >/dev/null || exit 1; fi
        for id in '"${ids[*]}"'; do
                u=$(getent passwd "$id" | cut -d: -f1); [ -z "$u" ] || userdel "$u" || exit 1
                g=$(getent group "$id" | cut -d: -f1); [ -z "$g" ] || groupdel "$g" || exit 1
        done
        for f in /etc/apt/sources.list.d/*; do
                [ -f "$f" ] && grep -q bookworm-backports "$f" && { rm -f "$f" || exit 1; }
        done
        rm -rf /etc/apt/preferences.d/tentaflake-runsc /etc/tentaflake
' || die "cannot make a fresh machine of the container"
check "fresh: no tentaflake-worker on PATH" ct sh -c '! command -v tentaflake-worker'

# run K STEP: step STEP for controller K (0 or 1), its text made the controller's, run as root
# with a clean environment; its output in $tmp/out/K-STEP; its exit status returned.
run() {
        local k=$1 step=$2 out=$tmp/out/$1-$2
        sed -e "s|hermes-coding|${names[$k]}|g; s|10000|${ids[$k]}|g" "$tmp/steps/$step" >"$tmp/steps/.$k-$step"
        echo "-- [$SECONDS s] controller ${names[$k]}: step $step"
        ct env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
                timeout 1200 bash -c 'cd /root/tentaflake-worker && exec bash -e -o pipefail "$0"' "/root/steps/.$k-$step" \
                </dev/null >"$out" 2>&1
        local rc=$?
        check "step $step (${names[$k]}) exits 0 (rc $rc)" test "$rc" -eq 0
        # what it printed: the last lines of a failed step or of the long host steps, else all
        if [ "$rc" -ne 0 ]; then tail -n 40 "$out"; elif [[ $step == *-host ]]; then tail -n 3 "$out"; else cat "$out"; fi |
                sed 's/^/     | /'
        return "$rc"
}
result() { # result K FIELD: one field of controller K's result of 'hello'
        ct cat "/run/tentaflake-worker-${names[$1]}/results/hello/result.json" 2>/dev/null |
                python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$2"
}
show() { ct systemctl show -p "$2" --value "$1"; }
no_failed_check() { ! grep -q '^✗' "$1"; }

# ---- the first controller: every step, in order ----------------------------------------------------
for s in $steps; do
        case $s in
        *-host|*-controller|*-daemon|*-path) run 0 "$s" || die "step $s failed: the steps after it need it" ;;
        *-doctor) run 0 "$s" ;;
        esac
done
c=${names[0]}
check "the package is installed (dpkg)" test "$(ct dpkg-query -W -f '${Status}' tentaflake-worker)" = "install ok installed"
check "runsc is at least 0.0~20240729" ct dpkg --compare-versions "$(ct dpkg-query -W -f '${Version}' runsc)" ge 0.0~20240729
doctor_out=$tmp/out/0-$(grep -- '-doctor$' <<<"$steps")
check "doctor: no failed check" no_failed_check "$doctor_out"
check "doctor: the controller's inbox and results were looked at" \
        bash -c "grep -q '^✓ inbox' '$doctor_out' && grep -q '^✓ results_view' '$doctor_out' && grep -q '^✓ container_gid' '$doctor_out'"
daemon_submit=$tmp/out/0-$(grep -- '-daemon$' <<<"$steps" | tail -n 1)
check "daemon mode: submit printed the job's output" grep -qx 'hello from a capsule' "$daemon_submit"
check "path mode: the daemon is stopped and disabled" \
        test "$(show "tentaflake-worker@$c.service" ActiveState) $(ct systemctl is-enabled "tentaflake-worker@$c.service")" = "inactive disabled"
check "path mode: the path unit is active" test "$(show "tentaflake-worker-queue@$c.path" ActiveState)" = active
path_out=$tmp/out/0-$(grep -- '-path$' <<<"$steps")
check "path mode: submit --attach printed the job's output" grep -qx hi "$path_out"
check "path mode: the result of 'hello' is succeeded ($(result 0 status))" test "$(result 0 status)" = succeeded
drain_ran() { ct journalctl -u "tentaflake-worker-queue@$1.service" -o cat | grep -q "job 'hello'"; }
check "path mode: a drain ran it" drain_ran "$c"

# ---- a second controller, straight to path mode ------------------------------------------------------
c2=${names[1]}
for s in $steps; do
        case $s in *-controller) run 1 "$s" || die "step $s failed for $c2" ;; esac
done
check "$c2: no inbox before its path unit starts" ct test ! -e "/var/lib/$c2/workspace/.tentaflake-worker"
# The path unit alone first (what the path block begins with), nothing else started: its own
# start must make the inbox and worker.json (a bounded wait on the files, not a timing check).
ct systemctl enable --now "tentaflake-worker-queue@$c2.path" >/dev/null 2>&1
made() { ct test -d "/var/lib/$c2/workspace/.tentaflake-worker/inbox" -a -f "/var/lib/$c2/workspace/.tentaflake-worker/worker.json"; }
check "$c2: the path unit's start alone makes the inbox and worker.json (its first drain)" wait_for 60 made
for s in $steps; do case $s in *-path) run 1 "$s" ;; esac; done
check "$c2: path mode alone: the result of 'hello' is succeeded ($(result 1 status))" test "$(result 1 status)" = succeeded
check "$c2: its inbox is the controller's" test "$(ct stat -c %u "/var/lib/$c2/workspace/.tentaflake-worker/inbox")" = "${ids[1]}"
check "$c2: a drain ran it" drain_ran "$c2"
check "$c2: no daemon ever ran for it" test "$(show "tentaflake-worker@$c2.service" ExecMainStartTimestampMonotonic)" = 0
for s in $steps; do case $s in *-doctor) run 1 "$s" ;; esac; done
check "$c2: doctor: no failed check" no_failed_check "$tmp/out/1-$(grep -- '-doctor$' <<<"$steps")"

finish
