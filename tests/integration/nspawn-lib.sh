# The systemd boot harness (sourced after lib.sh by test-systemd-boot.sh and
# test-systemd-serve.sh): systemd is not pid 1 on the machines these tests run on, so they boot
# one. systemd-nspawn starts the host's own systemd as pid 1 of a container whose root is a
# throw-away overlay of the host's root (--volatile=overlay), with `make install`'s files bound
# into /usr/local and the test's own files bound where it says. One thing differs from a host:
# nspawn mounts the cgroup v1 controller hierarchies read-only inside a container, where the
# worker needs to create one cgroup per capsule, so nspawn_boot remounts them writable in the
# container (on a host they are writable for root).
#
#   nspawn_require_tools          SKIP (77) without systemd-nspawn, nsenter, unshare, runsc
#   nspawn_install                $tmp (made if unset, 0755) with the cleanup trap; make install
#                                 into $tmp/dest; sets $share (the templates) and $etc
#                                 ($etc/system: units and drop-ins the container gets in
#                                 /etc/systemd/system; $etc/tentaflake: its /etc/tentaflake);
#                                 binds=() for the test's own nspawn options (--bind,
#                                 --bind-ro, --system-call-filter)
#   nspawn_boot MACHINE           boot (to tfw-test.target: sysinit only) under the machine name
#                                 MACHINE, unique per test; sets $leader (the container's pid 1).
#                                 $tmp/dest/usr/local is bound on /usr/local and, when it exists,
#                                 $etc/tentaflake on /etc/tentaflake (both read-only)
#   ct COMMAND...                 run COMMAND in the container (all its namespaces)
#   die MESSAGE                   FAIL with the container's last journal lines, exit 1
#   nspawn_cgroup NAME            make and print the cgroups of the run's own, below
#                                 tentaflake-tests/ of systemd's hierarchies, to start nspawn in
# The cleanup halts the container, then calls the test's own `cleanup` when it has one (it must
# remove $tmp then), else removes $tmp; then it removes the run's cgroup.
NSPAWN_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
nspawn_pid= leader= nspawn_cg=

# nspawn --keep-unit puts the container in <its own cgroup>/payload and itself in .../supervisor
# of systemd's hierarchies (name=systemd and, on a hybrid host, the unified one, which is where
# nspawn reads its own cgroup from; the unified one alone on cgroup v2). Started from the host's
# root cgroup, every container of every run (test-deb.sh's, another engineer's) would be in one
# /payload, and each container's systemd would manage cgroups that also hold the other's units.
# So nspawn starts in a cgroup of the run's own, the same path in each of those hierarchies.
nspawn_cgroup() {
        local h
        for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
                [ -e "$h/cgroup.procs" ] || continue
                [ "$h" = /sys/fs/cgroup ] && [ -e /sys/fs/cgroup/systemd/cgroup.procs ] && continue
                mkdir -p "$h/tentaflake-tests/$1" && echo "$h/tentaflake-tests/$1" || return 1
        done
}

nspawn_require_tools() {
        local tool
        for tool in systemd-nspawn nsenter unshare runsc; do
                if ! command -v "$tool" >/dev/null; then
                        echo "SKIP: $tool is not installed (scripts/install-deps installs systemd-container and runsc)"
                        exit 77
                fi
        done
}

nspawn_cleanup() {
        if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
                kill -TERM "$nspawn_pid" 2>/dev/null # nspawn asks the container's systemd to halt
                for _ in $(seq 100); do kill -0 "$nspawn_pid" 2>/dev/null || break; sleep 0.1; done
                kill -KILL "$nspawn_pid" 2>/dev/null
                wait "$nspawn_pid" 2>/dev/null
        fi
        if declare -F cleanup >/dev/null; then cleanup; else rm -rf "$tmp"; fi
        local g
        for g in $nspawn_cg; do find "$g" -depth -type d -exec rmdir {} + 2>/dev/null; done
        return 0
}

ct() { nsenter -t "$leader" -a "$@"; }
die() { echo "FAIL: $*"; [ -n "$leader" ] && ct journalctl --no-pager -n 40 -o cat 2>/dev/null | sed 's/^/    /'; exit 1; }

nspawn_install() {
        [ -n "${tmp:-}" ] || tmp=$(mktemp -d)
        chmod 0755 "$tmp" # the container's unprivileged users reach what the test binds below it
        trap nspawn_cleanup EXIT
        binds=()
        # a nested make: drop the outer make's jobserver
        if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$NSPAWN_SRC" install DESTDIR="$tmp/dest" \
                PREFIX=/usr/local BUILD="$BUILD" >"$tmp/install.log" 2>&1; then
                cat "$tmp/install.log"; die "make install"
        fi
        share=$tmp/dest/usr/local/share/tentaflake-worker
        etc=$tmp/etc
        mkdir -p "$tmp/root" "$etc/tentaflake" "$etc/system"
        # Boot only what the test needs: sysinit.target (tmpfiles at boot, journald).
        printf '[Unit]\nDescription=tentaflake test boot\nRequires=sysinit.target\nAfter=sysinit.target\n' \
                >"$etc/system/tfw-test.target"
}

nspawn_boot() {
        local machine=$1 f c state h
        local all=(--bind-ro="$tmp/dest/usr/local:/usr/local" "${binds[@]}")
        # /etc/tentaflake read-only from the test, unless the test leaves it to the container
        # (test-install-doc.sh: the steps it runs write it).
        [ -d "$etc/tentaflake" ] && all+=(--bind-ro="$etc/tentaflake:/etc/tentaflake")
        for f in "$etc/system"/*; do all+=(--bind-ro="$f:/etc/systemd/system/$(basename "$f")"); done
        # The host's root, bound (without its submounts) in a private mount namespace, is the
        # container's lower layer; nothing the container writes reaches the host. nspawn starts
        # in the run's own cgroup (nspawn_cgroup).
        nspawn_cg=$(nspawn_cgroup "$machine") || die "cannot make a cgroup for the container"
        sh -c 'for g in $0; do echo $$ >"$g/cgroup.procs" || exit 1; done; exec "$@"' "$nspawn_cg" \
                unshare -m --propagation private sh -c 'mount --bind / "$0" && exec "$@"' "$tmp/root" \
                systemd-nspawn --register=no --keep-unit --quiet -D "$tmp/root" --machine="$machine" \
                --volatile=overlay --console=pipe --capability=all "${all[@]}" -b systemd.unit=tfw-test.target \
                </dev/null >"$tmp/console.log" 2>&1 &
        nspawn_pid=$!
        for _ in $(seq 300); do
                for c in $(cat "/proc/$nspawn_pid/task/$nspawn_pid/children" 2>/dev/null); do
                        [ "$(cat "/proc/$c/comm" 2>/dev/null)" = systemd ] && leader=$c
                done
                [ -n "$leader" ] && break
                kill -0 "$nspawn_pid" 2>/dev/null || break
                sleep 0.1
        done
        [ -n "$leader" ] || { cat "$tmp/console.log"; die "the container's systemd did not start"; }
        for _ in $(seq 600); do # /run/systemd/system and the bus appear a moment after pid 1 does
                state=$(timeout 120 nsenter -t "$leader" -a systemctl is-system-running --wait 2>&1)
                case $state in offline|*"Failed to connect"*) sleep 0.1 ;; *) break ;; esac
        done
        check "systemd booted as the container's pid 1 ($state)" test "$state" = running -o "$state" = degraded
        for h in /sys/fs/cgroup/*/; do
                case $h in */systemd/|*/unified/) continue ;; esac
                ct mount -o remount,bind,rw "$h" || die "cannot make $h writable in the container"
        done
}
