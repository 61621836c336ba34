#!/usr/bin/env bash
# Issue 19 part 1: root chown/chmod through a symlink. A results_dir (or state_dir) whose parent
# the controller owns let it swap the directory root had just made for a symlink to a root-only
# file, and root then made that file root:<container_gid> 02750 (or 0:0 0700). The worker now
# refuses any state_dir or results_dir with an ancestor that anyone but root can write (naming
# it), and makes and fixes its directories by descriptor only (common/root-dir.h). Here a racer
# runs as the controller's uid (tests/data/dirs/swap-racer.c, a busy loop that wins the old
# mkdir -> chown window within a few runs) during several hundred runs of `list` and `drain`;
# the victim must stay untouched, every run must refuse and name the ancestor, and `doctor`
# must say the same. Root, real runsc (doctor's probe).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_root
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
command -v bindfs >/dev/null || { echo "SKIP: bindfs is not installed (scripts/install-deps installs it)"; exit 77; }
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built"; exit 1; }
RUNS=${DIRS_RACE_RUNS:-300}

dir=$(test_dir i19-dirs-race)
chmod 0755 "$dir"
# This run's own names (another run's /run directories are not its to remove)
rid=$(printf %s "$dir" | sha256sum | cut -c1-8)
racer_pid=
cleanup() {
        [ -n "$racer_pid" ] && kill "$racer_pid" 2>/dev/null && wait "$racer_pid" 2>/dev/null
        umount "$dir/fuse" 2>/dev/null
        rm -rf "$dir"
        rmdir /run/tentaflake-worker-i19-race-{results,state}-"$rid"/runsc /run/tentaflake-worker-i19-race-{results,state}-"$rid" 2>/dev/null
        remove_cgroup_group "tentaflake-worker-i19-race-results-$rid"
}
trap cleanup EXIT
${CC:-cc} -O2 -o "$dir/swap-racer" tests/data/dirs/swap-racer.c || { echo "FAIL: cannot build the racer"; exit 1; }

# The controller's uid 10000 owns its workspace and ctl/ (its home, say); the victim is a
# root-only file the controller must never read.
mkdir -p "$dir/ws" "$dir/ctl" && chown 10000:10000 "$dir/ws" "$dir/ctl"
printf 'root only\n' >"$dir/victim" && chmod 0600 "$dir/victim"
victim_stat() { stat -c '%u:%g %a %s' "$dir/victim"; }
before=$(victim_stat)
config() { # config NAME STATE RESULTS
        cat >"$dir/$1.json" <<JSON
{"version": 1, "name": "i19-race-$1-$rid", "workspace": "$dir/ws", "container_uid": 10000,
 "container_gid": 10000, "state_dir": "$2", "results_dir": "$3"}
JSON
}
config results "$dir/state" "$dir/ctl/results"
config state "$dir/ctl/state" "$dir/results"

setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs \
        "$dir/swap-racer" "$dir/ctl" "$dir/victim" results state >"$dir/racer.out" 2>&1 &
racer_pid=$!

# The racer is live: a directory root makes in ctl/ is taken away at once (swapped for the
# symlink, which lasts 20 ms; its count of swaps is checked at the end).
mkdir "$dir/ctl/results"
check "the racer takes away a directory root makes in ctl/" wait_for 10 test ! -d "$dir/ctl/results"
wait_for 5 test ! -e "$dir/ctl/results"

# Several hundred runs of each verb, racer running. Each must refuse, naming ctl/.
bad_runs=0 unnamed=0
for i in $(seq 1 "$RUNS"); do
        for run in "results list" "state drain"; do
                set -- $run
                if "$BIN" --config "$dir/$1.json" "$2" >"$dir/out" 2>&1; then
                        bad_runs=$((bad_runs + 1))
                elif ! grep -q "key '${1}_dir': '$dir/ctl/$1' is below '$dir/ctl', which is owned by 10000:10000" "$dir/out"; then
                        unnamed=$((unnamed + 1))
                        [ $unnamed -eq 1 ] && { echo "  run $i ($2) said:"; sed 's/^/    /' "$dir/out"; }
                fi
        done
        [ "$(victim_stat)" = "$before" ] || break
done
check "$((RUNS * 2)) runs of list and drain: the victim is untouched ($(victim_stat), was $before)" \
        test "$(victim_stat)" = "$before"
check "the controller still cannot read the victim" \
        bash -c "! setpriv --reuid=10000 --regid=10000 --clear-groups cat '$dir/victim' 2>/dev/null"
check "no run succeeded (got $bad_runs)" test "$bad_runs" -eq 0
check "every refusal names the controller's directory ($unnamed did not)" test "$unnamed" -eq 0
check "nothing was made below ctl/" bash -c "[ -z \"\$(ls -A '$dir/ctl')\" ]"
kill "$racer_pid" && wait "$racer_pid"
racer_pid=
check "the racer ran throughout ($(cat "$dir/racer.out") swap(s): the liveness check's)" \
        test "$(cat "$dir/racer.out")" -ge 1

# doctor names the same ancestor, and only that is wrong with the directories.
"$BIN" --config "$dir/results.json" doctor >"$dir/out" 2>&1
check "doctor: ✗ results_dir naming ctl/" \
        grep -q "^✗ results_dir: key 'results_dir': '$dir/ctl/results' is below '$dir/ctl', which is owned by 10000:10000 with mode 0755" "$dir/out"
check "doctor: ✓ state_dir" grep -q "^✓ state_dir: " "$dir/out"

# The other ancestors the worker refuses: a sticky world-writable one like /tmp, a root one
# writable by a group, a symlink.
mkdir -m 1777 "$dir/sticky" "$dir/group"
chown 0:10000 "$dir/group" && chmod 0775 "$dir/group"
mkdir -m 0755 "$dir/real" && ln -s "$dir/real" "$dir/link"
refused() { # refused STATE_DIR PATTERN
        config other "$1" "$dir/results"
        ! "$BIN" --config "$dir/other.json" list >"$dir/out" 2>&1 && grep -q -- "$2" "$dir/out" ||
                { echo "  got:"; sed 's/^/    /' "$dir/out"; return 1; }
}
check "state_dir below a sticky world-writable directory: refused, named" \
        refused "$dir/sticky/state" "is below '$dir/sticky', which is owned by 0:0 with mode 1777"
check "state_dir below a group-writable root directory: refused, named" \
        refused "$dir/group/state" "is below '$dir/group', which is owned by 0:10000 with mode 0775"
check "state_dir below a symlink: refused, named" \
        refused "$dir/link/state" "'$dir/link' is a symlink"
check "nothing was made in any of them" \
        bash -c "[ -z \"\$(find '$dir/sticky' '$dir/group' '$dir/real' -mindepth 1)\" ]"
check "state_dir below /tmp itself: refused, named" refused "/tmp/i19-never-made-$rid/state" "is below '/tmp', which is owned by 0:0 with mode 1777"
check "  ... and not made" test ! -e "/tmp/i19-never-made-$rid"

# A FUSE ancestor: its owner and mode are whatever its server says (a controller with
# user_allow_other could mount one over its home). bindfs shows the controller's directory as
# root's 0755 here.
mkdir "$dir/fuse-src" "$dir/fuse" && chown 10000:10000 "$dir/fuse-src"
bindfs -o allow_other --force-user=root --force-group=root --perms=0755 "$dir/fuse-src" "$dir/fuse"
check "bindfs shows the controller's directory as root's 0755" test "$(stat -c '%u %a' "$dir/fuse")" = "0 755"
check "state_dir below a FUSE mount: refused, named" \
        refused "$dir/fuse/state" "is below '$dir/fuse', which is on a FUSE file system"
check "  ... and nothing made there" test -z "$(ls -A "$dir/fuse-src")"
umount "$dir/fuse"

finish
