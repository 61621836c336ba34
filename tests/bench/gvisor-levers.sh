#!/usr/bin/env bash
# The levers of issue 37 (docs/performance.md, "Levers"), each alone and together, with bare
# `runsc run` on a bundle laid out as a default capsule's (read-only empty root with its own
# /etc, the system mounts bound read-only, /work and /tmp as tmpfs, the job's uid). The
# configurations take turns round after round, so a machine shared with other builds weighs on
# each alike; medians. Each sandbox runs one job script and prints its own times (`date` inside):
#   exec200    200 fork+exec of /bin/true
#   cc         cc -O2 -c of one generated file
#   find       find over /usr/include (stat and getdents through the mount)
#   scratch    the CMake project of tests/bench/cmake-project.sh: configure, build, ctest, from
#              nothing (the toolchain's first use in this sandbox)
#   edit       the same after one line of one .c changed (median of 3 in the sandbox)
#   noop       `make` in that build with nothing to do
# BENCH_LEVER_ROUNDS (default 3); BENCH_LEVERS: the configurations, "name|runsc flags|layout" a
# line, layout "many" (the default system mounts, each bound) or "one" (only /usr bound, /bin,
# /sbin, /lib and /lib64 links into it where the host has them so). Reports; never fails on a
# figure. The configurations take turns, each round starting one later.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${BENCH_LEVER_ROUNDS:-3}
LEVERS=${BENCH_LEVERS:-"base||many
exclusive-mounts|--file-access-mounts=exclusive|many
overlay-all-memory|--overlay2=all:memory|many
dcache-20000|--dcache=20000|many
gofer-only|--directfs=false|many
one-mount|--file-access-mounts=shared|one"}
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_root "runsc needs root"
bench_need_runsc
# Row 1's toolchain: cmake is not among the worker's dependencies (scripts/install-deps).
if ! command -v cmake >/dev/null && command -v apt-get >/dev/null; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake >/dev/null || true
fi
for c in cmake ctest make cc python3; do
        command -v $c >/dev/null || { echo "gvisor-levers.sh: $c missing" >&2; exit 1; }
done
bench_platform

bench_base levers
root=/run/tfw-bench-levers-$$
cleanup() {
        bench_kill_capsules "$root"
        rm -rf "$root" "$base"
}
trap cleanup EXIT
mkdir -p "$root"

# shellcheck source=tests/bench/cmake-project.sh
. tests/bench/cmake-project.sh
mkdir -p "$base/src"
gen_cmake "$base/src"
cat >"$base/src/job.sh" <<'EOF'
cp -r /src/cmk /work/cmk
t() { a=$(date +%s%N); "$@" >/tmp/log 2>&1 || { tail /tmp/log >&2; exit 1; }; b=$(date +%s%N); echo $(((b - a) / 1000000)); }
exe() { i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i + 1)); done; }
cmk() { cmake -S /work/cmk -B /work/cmk/build -DCMAKE_BUILD_TYPE=Release && cmake --build /work/cmk/build -j2 && (cd /work/cmk/build && ctest); }
edit() { echo "/* $(date +%s%N) */" >>/work/cmk/src/m7.c; cmk; }
fnd() { find /usr/include -name '*.h' | wc -l; }
e1=$(t exe); c1=$(t cc -O2 -c /work/cmk/src/m1.c -o /tmp/m1.o); f1=$(t fnd); s1=$(t cmk)
d1=$(t edit); d2=$(t edit); d3=$(t edit); n1=$(t make -C /work/cmk/build)
d=$(printf '%s\n' "$d1" "$d2" "$d3" | sort -n | sed -n 2p)
echo "exec200=$e1 cc=$c1 find=$f1 scratch=$s1 edit=$d noop=$n1"
EOF
chmod -R a+rX "$base/src"

# bundle NAME LAYOUT: a bundle as capsule/oci-spec.c and capsule/bundle.c make one (less the
# seccomp profile, init and the layer, which no lever here touches).
bundle() {
        python3 - "$base/$1" "$2" "$base/src" <<'EOF'
import json, os, sys
d, layout, src = sys.argv[1:4]
os.makedirs(d + "/root/etc")
open(d + "/root/etc/passwd", "w").write("root:x:0:0:root:/root:/usr/sbin/nologin\ntentaflake:x:12345:12345::/work:/bin/sh\n")
open(d + "/root/etc/group", "w").write("root:x:0:\ntentaflake:x:12345:\n")
ro = ["rbind", "ro", "nosuid", "nodev"]
mounts = [{"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
          {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "noexec", "mode=755", "size=64k"]},
          {"destination": "/work", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "size=2g", "mode=0700", "uid=12345", "gid=12345"]},
          {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "size=1g", "mode=1777"]},
          {"destination": "/src", "type": "bind", "source": src, "options": ro + ["noexec"]}]
system = ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc/ld.so.cache", "/etc/alternatives"]
for m in system:
    if not os.path.lexists(m):
        continue
    if layout == "one" and os.path.islink(m) and os.readlink(m).startswith("usr/"):
        os.symlink(os.readlink(m), d + "/root" + m)
        continue
    mounts.append({"destination": m, "type": "bind", "source": m, "options": ro})
os.chmod(d + "/root/etc", 0o555)
os.chmod(d + "/root", 0o555)
spec = {"ociVersion": "1.0.2", "root": {"path": d + "/root", "readonly": True}, "hostname": "capsule",
        "process": {"user": {"uid": 12345, "gid": 12345}, "cwd": "/work", "args": ["/bin/sh", "/src/job.sh"],
                    "env": ["PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/work", "TMPDIR=/tmp"],
                    "capabilities": {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")},
                    "noNewPrivileges": True},
        "mounts": mounts,
        "linux": {"namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount", "network")],
                  "resources": {"memory": {"limit": 4 << 30}, "cpu": {"quota": 200000, "period": 100000}}}}
json.dump(spec, open(d + "/config.json", "w"), indent=1)
EOF
}

names=() flags=()
while IFS='|' read -r name f layout; do
        [ -n "$name" ] || continue
        bundle "$name" "$layout"
        names+=("$name") flags+=("$f")
done <<<"$LEVERS"

# run I: one sandbox of configuration I; its line of times.
run() {
        local id=levers-$$-$1-$RANDOM out
        # shellcheck disable=SC2086 # the flags are words
        out=$("$RUNSC" --root "$root" --network=none --platform=$PLATFORM --cpu-num-from-quota ${flags[$1]} \
                run --bundle "$base/${names[$1]}" "$id" 2>&1) || true
        "$RUNSC" --root "$root" delete -force "$id" >/dev/null 2>&1 || true
        echo "$out" | grep '^exec200=' || { echo "gvisor-levers.sh: ${names[$1]}: $out" >&2; echo "failed"; }
}
echo "runsc $("$RUNSC" --version | head -1 | cut -d' ' -f3), platform $PLATFORM, $ROUNDS rounds; load $(cut -d' ' -f1-3 /proc/loadavg)"
# Each round starts one configuration later than the last: none is always first (or last)
# when the load of the machine's other work rises or falls.
for r in $(seq "$ROUNDS"); do
        for k in "${!names[@]}"; do
                i=$(((k + r - 1) % ${#names[@]}))
                echo "$(run "$i") load=$(cut -d' ' -f1 /proc/loadavg)" >>"$base/${names[$i]}.times"
        done
        echo "  round $r done, load $(cut -d' ' -f1-3 /proc/loadavg)"
done
python3 - "$base" "${names[@]}" <<'EOF'
import statistics, sys
base, names = sys.argv[1], sys.argv[2:]
keys = ["exec200", "cc", "find", "scratch", "edit", "noop"]
print(f"{'configuration (ms, medians)':<28}" + "".join(f"{k:>9}" for k in keys) + "   load")
for n in names:
    rows = [dict(kv.split("=") for kv in l.split()) for l in open(f"{base}/{n}.times") if l.startswith("exec200=")]
    if not rows:
        print(f"{n:<28} failed")
        continue
    med = {k: statistics.median(int(r[k]) for r in rows) for k in keys}
    load = statistics.median(float(r["load"]) for r in rows)
    print(f"{n:<28}" + "".join(f"{med[k]:>9.0f}" for k in keys) + f"   {load:.1f}  ({len(rows)} runs)")
EOF
