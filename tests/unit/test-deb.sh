#!/usr/bin/env bash
# The Debian package (issue 22, item 1), built by `make deb` and installed with the real dpkg
# into a throw-away copy of this machine: a systemd-nspawn container whose root is an overlay
# (--volatile=overlay) of the host's root, bound without its submounts in a private mount
# namespace (as tests/integration/nspawn-lib.sh does), so the package's dependencies resolve
# against this system's own dpkg database and nothing reaches the host's root. Checked:
#  - the package: its name and version, Depends with the shared libraries (dpkg-shlibdeps),
#    the dlopened ones and runsc (>= 0.0~20240729); the files it must carry; lintian: no error
#    and no warning;
#  - in the container: dpkg -i configures it (its postinst only reloads systemd, when systemd
#    runs: checked above on the script); `tentaflake-worker --version`; `doctor --json` on a config there runs and prints JSON
#    naming its checks, the capsule init found at /usr/libexec (the PREFIX=/usr build); man
#    finds the pages; the completion is where bash-completion loads it;
#  - dpkg -r leaves nothing of the package but its conffiles, dpkg -P nothing at all (and the
#    operator's config stays);
#  - nothing of it reached the host: the host's copy of each of the package's paths and dpkg's
#    record of the package are what they were before the container ran. The host may have the
#    package installed, and a worker of it running: the test compares, it does not ask for
#    absence, and its worker in the container has a name of its own.
# Root only (dpkg, nspawn); about a minute, most of it the first build of build-deb/.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

if [ "$(id -u)" -ne 0 ]; then
        echo "SKIP: the package test needs root (dpkg and systemd-nspawn)"
        exit 77
fi
for tool in dpkg-deb dpkg-shlibdeps lintian systemd-nspawn unshare; do
        if ! command -v "$tool" >/dev/null; then
                echo "SKIP: $tool is not installed (scripts/install-deps installs dpkg-dev, lintian, systemd-container)"
                exit 77
        fi
done
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok; else bad "$what"; fi; }

tmp=$(mktemp -d)
chmod 0755 "$tmp"
# The container's worker has a name of this run's own; its cgroups are made in the host's
# hierarchies (nspawn binds them): removed when empty, and only those of that exact name.
name=debtest-$(printf %s "$tmp" | sha256sum | cut -c1-8)
# nspawn --keep-unit makes <its cgroup>/payload and .../supervisor in systemd's hierarchies: it
# starts in cgroups of this run's own, so that its container never shares /payload with
# another run's (tests/integration/nspawn-lib.sh says why).
cgs=
for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
        [ -e "$h/cgroup.procs" ] || continue
        [ "$h" = /sys/fs/cgroup ] && [ -e /sys/fs/cgroup/systemd/cgroup.procs ] && continue
        cgs="$cgs $h/tentaflake-tests/$name"
done
cleanup() {
        local g
        find /sys/fs/cgroup -maxdepth 3 -type d -name "tentaflake-worker-$name" 2>/dev/null |
                while read -r g; do find "$g" -depth -type d -exec rmdir {} + 2>/dev/null; done
        for g in $cgs; do [ -d "$g" ] && find "$g" -depth -type d -exec rmdir {} + 2>/dev/null; done
        rm -rf "$tmp"
}
trap cleanup EXIT
start=$(date +%s)

# 1. make deb (a nested make: drop the outer make's jobserver)
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s deb DEB_OUT="$tmp/out" >"$tmp/make.log" 2>&1; then
        echo "FAIL: make deb:"; cat "$tmp/make.log"; exit 1
fi
arch=$(dpkg --print-architecture)
version=$(sed -n 's/^VERSION *:= *//p' Makefile)
deb=$tmp/out/tentaflake-worker_${version}_${arch}.deb
check "make deb writes $(basename "$deb")" test -f "$deb"
[ -f "$deb" ] || { echo "deb: $passes passed, $fails failed"; exit 1; }
field() { dpkg-deb -f "$deb" "$1"; }
check "Package: tentaflake-worker" test "$(field Package)" = tentaflake-worker
check "Version: $version" test "$(field Version)" = "$version"
depends=$(field Depends)
for d in 'libc6 (>= ' 'libjansson4' 'libsodium23' 'libseccomp2' 'libsystemd0' 'libarchive13' 'libcurl4' 'libssl3' 'runsc (>= 0.0~20240729)'; do
        check "Depends names $d ($depends)" grep -qF "$d" <<<"$depends"
done
# The second engine (runtime.driver "runc", docs/capsule-engines.md): recommended, not required.
check "Recommends runc ($(field Recommends))" test "$(field Recommends)" = runc
# its files (not directories), and its own directories (the others are shared: /usr/bin, ...)
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ || $6 ~ /tentaflake/ { print $6 }' | sed 's|^\./|/|; s|/$||' | sort >"$tmp/files"
for f in /usr/bin/tentaflake-worker /usr/libexec/tentaflake-worker/tentaflake-capsule-init \
         /lib/systemd/system/tentaflake-worker@.service /lib/systemd/system/tentaflake-worker-queue@.path \
         /lib/systemd/system/tentaflake-worker-gc@.timer /lib/systemd/system/tentaflake-worker-serve@.service \
         /lib/systemd/system/tentaflake-worker-store@.service \
         /usr/share/man/man8/tentaflake-worker.8.gz /usr/share/man/man5/tentaflake-worker.json.5.gz \
         /usr/share/man/man5/tentaflake-worker-request.5.gz \
         /usr/share/bash-completion/completions/tentaflake-worker \
         /usr/share/doc/tentaflake-worker/copyright /usr/share/doc/tentaflake-worker/changelog.gz \
         /usr/share/doc/tentaflake-worker/install.md /usr/share/tentaflake-worker/controller-workspace.conf.in; do
        check "the package carries $f" grep -qx "$f" "$tmp/files"
done
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./postinst >"$tmp/postinst" 2>/dev/null
check "postinst reloads systemd and starts nothing" \
        sh -c "grep -q 'daemon-reload' '$tmp/postinst' && ! grep -Eq 'systemctl.*(start|enable|restart)|deb-systemd-invoke' '$tmp/postinst'"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles >"$tmp/conffiles" 2>/dev/null || : >"$tmp/conffiles"

# host_state: the host's side of everything the container's dpkg touches for the package: dpkg's
# record of it (status, version, its info files) and each of its paths (absent, or its inode,
# type, mode, owner, size and change time: a write, a replacement or a removal changes one).
host_state() {
        dpkg-query -W -f='${Status} ${Version}\n' tentaflake-worker 2>/dev/null || echo "not known to dpkg"
        python3 - "$tmp/files" <<'PY'
import glob, os, sys
paths = [l.rstrip("\n") for l in open(sys.argv[1])] + sorted(glob.glob("/var/lib/dpkg/info/tentaflake-worker.*"))
for p in paths:
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        print(p, "absent")
        continue
    print(p, st.st_ino, oct(st.st_mode), st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
PY
}
host_state >"$tmp/host-before"

lintian --tag-display-limit 0 "$deb" >"$tmp/lintian" 2>&1
grep -v 'running with root privileges is not recommended' "$tmp/lintian" >"$tmp/lintian.out"
check "lintian: no error, no warning ($(cat "$tmp/lintian.out"))" sh -c "! grep -Eq '^[EW]:' '$tmp/lintian.out'"
[ ! -s "$tmp/lintian.out" ] || { echo "lintian says:"; sed 's/^/    /' "$tmp/lintian.out"; }

# 2. in the container
mkdir -p "$tmp/root" "$tmp/in" "$tmp/outc"
cp "$deb" "$tmp/in/pkg.deb"
cp "$tmp/files" "$tmp/conffiles" "$tmp/in/"
# The container's worker: a name of this run's own (the host may run a worker of the package,
# and another run of this test its own).
echo "$name" >"$tmp/in/name"
cat >"$tmp/in/inside.sh" <<'EOF'
#!/bin/bash
# Runs in the container; every line of /out/result is "ok WHAT" or "FAIL WHAT".
exec >/out/log 2>&1
r() { if "${@:2}"; then echo "ok $1" >>/out/result; else echo "FAIL $1" >>/out/result; fi; }
gone() { # gone KEEP: nothing left of the package's files (/in/files: all but directories, and
        # its own directories) but those listed in KEEP
        local f left=0
        while read -r f; do
                [ -e "$f" ] || [ -L "$f" ] || continue
                grep -qxF "$f" "$1" && continue
                echo "left: $f"; left=1
        done </in/files
        return $left
}
r "dpkg -i installs and configures the package" dpkg -i /in/pkg.deb
r "dpkg says installed" test "$(dpkg-query -W -f='${Status}' tentaflake-worker)" = "install ok installed"
tentaflake-worker --version >/out/version
mkdir -p /etc/tentaflake/workers /srv/ws
chown 10000:10000 /srv/ws
getent group 10000 >/dev/null || groupadd -g 10000 debtest # doctor checks container_gid has a group entry
# systemd-nspawn mounts the cgroup hierarchies read-only; the worker makes its cgroup there
for h in /sys/fs/cgroup/*/; do mount -o remount,bind,rw "$h" 2>/dev/null; done
name=$(cat /in/name)
printf '{"version": 1, "name": "%s", "workspace": "/srv/ws", "container_uid": 10000, "container_gid": 10000}\n' \
        "$name" >/etc/tentaflake/workers/debtest.json
timeout 300 tentaflake-worker --config /etc/tentaflake/workers/debtest.json doctor --json >/out/doctor.json 2>/out/doctor.err
echo $? >/out/doctor.rc
r "man finds tentaflake-worker(8)" sh -c 'man -w tentaflake-worker 2>/dev/null | grep -q /usr/share/man/man8/tentaflake-worker.8.gz'
r "man finds tentaflake-worker.json(5)" sh -c 'man -w 5 tentaflake-worker.json 2>/dev/null | grep -q man5'
r "the completion is where bash-completion loads it" bash -c '. /usr/share/bash-completion/bash_completion; __load_completion tentaflake-worker && complete -p tentaflake-worker'
# The generation store outlives the daemon (docs/snapshot.md, "After a restart"): removing the
# package unmounts it (postrm).
r "store mount mounts the generation store" tentaflake-worker --config /etc/tentaflake/workers/debtest.json store mount
r "... a tmpfs at state_dir/store" mountpoint -q "/var/lib/tentaflake-worker-$name/store"
r "dpkg -r removes the package" dpkg -r tentaflake-worker
r "after remove: the generation store is unmounted" sh -c "! mountpoint -q '/var/lib/tentaflake-worker-$name/store'"
st=$(dpkg-query -W -f='${Status}' tentaflake-worker 2>/dev/null)
# (config-files even without a conffile: dpkg keeps the postrm for the purge)
r "after remove: dpkg keeps its configuration only ($st)" test "$st" = "deinstall ok config-files"
r "after remove: nothing of it left but its conffiles" gone /in/conffiles
r "dpkg -P purges it" dpkg -P tentaflake-worker
r "after purge: dpkg knows nothing of it" sh -c '! dpkg-query -W tentaflake-worker 2>/dev/null | grep -q . && ! ls /var/lib/dpkg/info/tentaflake-worker.* 2>/dev/null | grep -q .'
r "after purge: nothing at all left" gone /dev/null
r "after purge: the operator's config stays" test -f /etc/tentaflake/workers/debtest.json
EOF
chmod 0755 "$tmp/in/inside.sh"
# The host's root, bound without its submounts in a private mount namespace, is the container's
# lower layer; the container's writes go to a tmpfs and vanish with it.
# shellcheck disable=SC2086
mkdir -p $cgs || { echo "FAIL: cannot make the cgroups$cgs"; exit 1; }
sh -c 'for g in $0; do echo $$ >"$g/cgroup.procs" || exit 1; done; exec "$@"' "$cgs" \
        unshare -m --propagation private sh -c 'mount --bind / "$0" && exec "$@"' "$tmp/root" \
        timeout 600 systemd-nspawn --register=no --keep-unit --quiet -D "$tmp/root" --volatile=overlay \
        --console=pipe --capability=all --bind-ro="$tmp/in:/in" --bind="$tmp/outc:/out" /in/inside.sh \
        </dev/null >"$tmp/nspawn.log" 2>&1
rc=$?
check "the container ran (exit $rc: $(tail -3 "$tmp/nspawn.log"))" test $rc -eq 0
if [ -f "$tmp/outc/result" ]; then
        while read -r status what; do
                if [ "$status" = ok ]; then ok; else bad "in the container: $what"; fi
        done <"$tmp/outc/result"
        grep -q '^FAIL' "$tmp/outc/result" && { echo "the container's log:"; sed 's/^/    /' "$tmp/outc/log" | tail -30; }
else
        bad "the container wrote no result: $(cat "$tmp/outc/log" 2>/dev/null | tail -20)"
fi
check "--version in the container: $(cat "$tmp/outc/version" 2>/dev/null)" \
        grep -qx "tentaflake-worker $version" "$tmp/outc/version"
if python3 - "$tmp/outc/doctor.json" "$(cat "$tmp/outc/doctor.rc" 2>/dev/null)" >"$tmp/doctor.out" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
names = [c["check"] for c in d]
assert isinstance(d, list) and d and all(c.get("ok") in (True, False, None) and c.get("check") for c in d), d
# doctor names the capsule init only when it is missing: the PREFIX=/usr build found it
init = [c for c in d if c["check"] == "capsule_init"]
assert not init, "the capsule init: %s" % init
failed = [c["check"] + ": " + c.get("detail", "") for c in d if c["ok"] is False]
assert (sys.argv[2] == "0") == (not failed), "exit %s with failed checks %s" % (sys.argv[2], failed)
# where runsc is reachable in the container (this machine's own, through the overlay), every
# check must pass there, the probe jobs in real capsules included
runtime = [c for c in d if c["check"] == "runtime"]
assert not (runtime and runtime[0]["ok"]) or not failed, "runsc is there, yet checks failed: %s" % failed
print("doctor --json: exit %s, checks %s; failed: %s" % (sys.argv[2], ", ".join(names), failed or "none"))
PY
then ok; cat "$tmp/doctor.out"
else
        bad "doctor --json in the container: $(cat "$tmp/doctor.out" "$tmp/outc/doctor.err" 2>/dev/null | tail -5)"
fi
host_state >"$tmp/host-after"
check "nothing of the package reached the host: its paths and dpkg's record of it are as they were ($(diff "$tmp/host-before" "$tmp/host-after" | grep '^[<>]' | head -5 | tr '\n' ' '))" \
        cmp -s "$tmp/host-before" "$tmp/host-after"

echo "deb: $passes passed, $fails failed ($(($(date +%s) - start)) s)"
[ "$fails" -eq 0 ]
