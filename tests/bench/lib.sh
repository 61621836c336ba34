# shellcheck shell=bash
# The scaffolding the benchmarks tests/bench/*.sh share, sourced by them: their checks and skips,
# runsc's platform, the base directory and its cleanup, starting a daemon, a request sent and
# waited for, the tree of about 80k entries, the bare `runsc run` reference and the median/ratio
# helpers. Not executable: run-bench runs every executable *.sh. What a benchmark measures stays
# in its own script. Messages name the script that sourced this ($ME).
ME=$(basename "$0")

# bench_need_bins FILE...: each a built executable, else fail (make bench builds them).
bench_need_bins() {
        local f
        for f in "$@"; do
                [ -x "$f" ] || { echo "$ME: $f missing (make bench builds it)" >&2; exit 1; }
        done
}

# bench_need_root WHY: SKIP (exit 0) unless root; WHY says what needs it.
bench_need_root() {
        if [ "$(id -u)" -ne 0 ]; then
                echo "$ME: SKIP: $1"
                exit 0
        fi
}

# bench_need_runsc: fail without runsc; RUNSC is its path.
bench_need_runsc() {
        RUNSC=$(command -v runsc) || { echo "$ME: runsc missing" >&2; exit 1; }
}

# bench_need_worker [FILE...]: what a benchmark through the real daemon needs: $BIN (the worker),
# $BUILD/tentaflake-capsule-init and FILE... built, root (else SKIP), runsc; BIN made absolute.
# shellcheck disable=SC2120 # FILE... is optional
bench_need_worker() {
        bench_need_bins "$BIN" "$BUILD/tentaflake-capsule-init" "$@"
        bench_need_root "the worker and runsc need root"
        bench_need_runsc
        BIN=$(realpath "$BIN")
}

# bench_platform: PLATFORM, systrap where this runsc has it, else ptrace.
bench_platform() {
        PLATFORM=systrap
        # Read whole: with pipefail, `grep -q` leaving early would fail runsc on SIGPIPE and pick ptrace.
        case $("${RUNSC:-runsc}" flags 2>&1) in *systrap*) ;; *) PLATFORM=ptrace ;; esac
}

# bench_base NAME: base, a new directory /var/lib/tfw-bench-NAME.XXXXXX, mode 0755. Not below
# /tmp: the worker refuses a state_dir or results_dir below a world-writable directory.
bench_base() {
        base=$(mktemp -d "/var/lib/tfw-bench-$1.XXXXXX")
        chmod 0755 "$base"
}

# The pieces of a cleanup (an EXIT trap: each goes on whatever the one before left).
# bench_stop_daemon: SIGTERM to $daemon, if any, and wait for it.
bench_stop_daemon() {
        if [ -n "${daemon:-}" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; daemon=; fi
}
# bench_kill_capsules ROOT...: every runsc container under these runsc roots force-deleted.
bench_kill_capsules() {
        local r c
        for r in "$@"; do
                [ -d "$r" ] || continue
                for c in $("${RUNSC:-runsc}" --root "$r" list -quiet 2>/dev/null); do "${RUNSC:-runsc}" --root "$r" delete -force "$c" >/dev/null 2>&1; done
                # BENCH_DRIVER=runc: runc keeps its containers in the same root
                ! command -v runc >/dev/null ||
                        for c in $(runc --root "$r" list -q 2>/dev/null); do runc --root "$r" delete --force "$c" >/dev/null 2>&1; done
        done
}
# bench_rm_cgroups NAME: the cgroups left with NAME in their name removed.
bench_rm_cgroups() {
        find /sys/fs/cgroup -maxdepth 5 -depth -type d -name "*$1*" -exec rmdir {} + 2>/dev/null || true
}
# bench_umount_store: the generation store's tmpfs mounts below $base unmounted; the store
# outlives the daemon (docs/snapshot.md, "After a restart").
bench_umount_store() {
        awk -v b="$base/" '$1 == "tentaflake-store" && index($2, b) == 1 { print $2 }' /proc/self/mounts |
                while read -r m; do umount -l "$m" || true; done
}
# bench_cleanup NAME [ROOT...]: all of it for one daemon named NAME (runsc root
# /run/tentaflake-worker-NAME/runsc, and the other runsc roots ROOT...), then $base removed.
bench_cleanup() {
        local name=$1
        shift
        bench_stop_daemon
        bench_kill_capsules "/run/tentaflake-worker-$name/runsc" "$@"
        bench_rm_cgroups "$name"
        bench_umount_store
        rm -rf "/run/tentaflake-worker-$name" "$base"
}

# bench_native_cgroup: ncg, a CPU cgroup of its own (tfw-bench-native-PID) for the native side of
# a comparison, beside the capsules', with a capsule's default quota (limits.cpus 2.0): under a
# loaded host the scheduler shares CPU between groups, and a capsule is one group
# (capsule/cgroup.c) while native processes at the root would each count alone. Empty where
# the host has no CPU controller. The caller removes it in its cleanup (rmdir "$ncg").
bench_native_cgroup() {
        ncg=
        if [ -d /sys/fs/cgroup/cpu ] && [ ! -e /sys/fs/cgroup/cgroup.controllers ]; then
                ncg=/sys/fs/cgroup/cpu/tfw-bench-native-$$
                mkdir "$ncg" && echo 100000 >"$ncg/cpu.cfs_period_us" && echo 200000 >"$ncg/cpu.cfs_quota_us"
        elif [ -e /sys/fs/cgroup/cgroup.controllers ]; then
                ncg=/sys/fs/cgroup/tfw-bench-native-$$
                mkdir "$ncg" && echo "200000 100000" >"$ncg/cpu.max"
        fi
}

# bench_wait_ready LOG [WHO]: wait (30 s at most) for the daemon logging to LOG to watch its
# inbox, else print LOG and fail ("WHO did not start", default "the daemon").
bench_wait_ready() {
        for _ in $(seq 600); do grep -qs ": watching '" "$1" && break; sleep 0.05; done
        grep -q ": watching '" "$1" || { cat "$1"; echo "$ME: ${2:-the daemon} did not start" >&2; exit 1; }
}
# bench_start_daemon BIN CONFIG LOG: `BIN --config CONFIG run` in the background, its stderr in LOG
# (emptied first: a restart must not find the last daemon's lines), $daemon its pid; returns
# once it watches its inbox.
bench_start_daemon() {
        : >"$3"
        "$1" --config "$2" run 2>"$3" &
        daemon=$!
        bench_wait_ready "$3"
}

# A request, as a controller sends it: bench_next_n, bench_write_request (or the request written
# to INBOX/.ID otherwise), bench_request.
# bench_next_n: n, the next request's number (the count lives in $base/n: the scripts' worker_run
# runs in $(...) subshells too).
bench_next_n() {
        n=$(($(cat "$base/n" 2>/dev/null || echo 0) + 1))
        echo "$n" >"$base/n"
}
# bench_write_request INBOX ID ARGV_JSON: the request ID running ARGV_JSON, in INBOX/.ID.
bench_write_request() {
        printf '{"version":1,"id":"%s","action_class":"local-reversible","argv":%s}' "$2" "$3" >"$1/.$2"
}
# bench_request INBOX RESULTS ID [WHOSE]: INBOX/.ID renamed into the inbox, then RESULTS/ID/result.json
# waited for; REQ_MS, the ms between. Fails (its result and the tail of its log on stderr) unless
# the request succeeded; WHOSE names the worker in that message. Not in $(...): its exit must be
# the caller's.
bench_request() {
        local t0 t1
        t0=$(now_ms)
        mv "$1/.$3" "$1/$3.json"
        while [ ! -e "$2/$3/result.json" ]; do sleep 0.005; done
        t1=$(now_ms)
        grep -q '"status": *"succeeded"' "$2/$3/result.json" || {
                echo "$ME: request $3${4:+ of $4} did not succeed:" >&2; cat "$2/$3/result.json" >&2; tail -20 "$2/$3/job.log" >&2; exit 1; }
        # shellcheck disable=SC2034 # the caller reads it
        REQ_MS=$((t1 - t0))
}

# bench_tree DIR: the tree of at least 80k entries and 800 MB in DIR: copies of /usr/share,
# /usr/include and /usr/lib/python3*, less fifos, sockets and device nodes.
bench_tree() {
        local p
        mkdir -p "$1"
        cp -a /usr/share "$1/share"
        cp -a /usr/include "$1/include"
        for p in /usr/lib/python3*; do [ -d "$p" ] && cp -a "$p" "$1/$(basename "$p")"; done
        find "$1" \( -type p -o -type s -o -type b -o -type c \) -delete
}

# bench_test_devdeps_only: the npm package in this directory (qs's, for gvisor.sh and node-cache.sh)
# keeps only the devDependencies its test/ files require (not the linters, bundlers and coverage
# tools of its full test script), and no scripts.
bench_test_devdeps_only() {
        node -e '
const fs = require("fs"), p = JSON.parse(fs.readFileSync("package.json"));
const need = new Set();
for (const f of fs.readdirSync("test"))
        for (const m of fs.readFileSync("test/" + f, "utf8").matchAll(/require\(.([^.\x27"][^\x27"]*)./g)) need.add(m[1]);
const dev = {};
for (const k of Object.keys(p.devDependencies || {})) if (need.has(k)) dev[k] = p.devDependencies[k];
p.devDependencies = dev;
delete p.scripts;
fs.writeFileSync("package.json", JSON.stringify(p, null, 2) + "\n");'
}

# The bare reference: the same runsc (root $base/bare-root, $PLATFORM, no network) running one
# command with $base/ws bind-mounted read-only at /work, as uid 12345.
# bench_bare_spec ARGV_JSON: the bundle $base/bare for that command.
bench_bare_spec() {
        mkdir -p "$base/bare/rootfs" "$base/bare-root"
        python3 - "$base/bare/config.json" "$base/ws" "$1" <<'PY'
import json, sys
path, ws, argv = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
mounts = [{"destination": "/proc", "type": "proc", "source": "proc"},
          {"destination": "/work", "type": "bind", "source": ws, "options": ["rbind", "ro"]},
          {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs"}]
for m in ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"]:
    mounts.append({"destination": m, "type": "bind", "source": m, "options": ["rbind", "ro"]})
spec = {"ociVersion": "1.0.2", "root": {"path": "rootfs", "readonly": True},
        "process": {"args": argv, "cwd": "/work", "user": {"uid": 12345, "gid": 12345},
                    "env": ["PATH=/usr/bin:/bin", "HOME=/work"]},
        "hostname": "bare", "mounts": mounts,
        "linux": {"namespaces": [{"type": t} for t in ["pid", "ipc", "uts", "mount", "network"]]}}
json.dump(spec, open(path, "w"))
PY
}
# bench_bare_ms: one `runsc run` of that bundle; prints its ms.
n_bare=0
bench_bare_ms() {
        local t0 t1
        n_bare=$((n_bare + 1))
        t0=$(now_ms)
        "${RUNSC:-runsc}" --root "$base/bare-root" --network=none --platform="$PLATFORM" run --bundle "$base/bare" "bare-$n_bare" \
                </dev/null >/dev/null 2>&1
        t1=$(now_ms)
        echo $((t1 - t0))
}

# The bare reference of the runc engine (BENCH_DRIVER=runc): `runc run` (root $base/bare-root) of
# one command with $base/ws bind-mounted read-only at /work, as uid 12345, behind the walls a fair
# hand-made runc container has and the worker's capsule has too: a user namespace (its root
# BENCH_RUNC_HOST_ID, default 3000000000, an id that owns nothing; 12345 as itself, as the
# worker maps container_uid), pid, ipc, uts, mount, cgroup and network (loopback only)
# namespaces, no capability in any set, noNewPrivileges, a read-only root and read-only system
# mounts, runc's masked and read-only /proc and /sys paths, and the worker's own seccomp
# allow-list (`test-seccomp-allowlist --print plain`, what capsule/seccomp-allowlist.c writes
# into the spec). Not there: the worker's init, its Landlock, its cgroup limits and its overlay
# layer: they are what the worker adds, and what the ratio measures.
# bench_bare_runc_spec ARGV_JSON: the bundle $base/bare-runc for that command.
bench_bare_runc_spec() {
        local allow=$BUILD/tests/unit/test-seccomp-allowlist host=${BENCH_RUNC_HOST_ID:-3000000000}
        [ -x "$allow" ] || { echo "$ME: $allow missing (make bench builds it)" >&2; exit 1; }
        mkdir -p "$base/bare-runc/rootfs" "$base/bare-root"
        [ -s "$base/bare-runc/seccomp.json" ] || "$allow" --print plain >"$base/bare-runc/seccomp.json"
        (cd "$base/bare-runc/rootfs" && mkdir -p proc dev tmp work usr bin sbin lib lib64 etc)
        chown "$host:$host" "$base/bare-runc/rootfs"
        python3 - "$base/bare-runc" "$base/ws" "$1" "$host" <<'PY'
import json, sys
bundle, ws, argv, host = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
mounts = [{"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
          {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
          {"destination": "/work", "type": "bind", "source": ws, "options": ["rbind", "ro", "nosuid", "nodev"]},
          {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]}]
for m in ["/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"]:
    mounts.append({"destination": m, "type": "bind", "source": m, "options": ["rbind", "ro", "nosuid", "nodev"]})
ids = [{"containerID": 0, "hostID": host, "size": 1}, {"containerID": 12345, "hostID": 12345, "size": 1}]
none = {k: [] for k in ["bounding", "effective", "permitted", "inheritable", "ambient"]}
spec = {"ociVersion": "1.0.2", "root": {"path": "rootfs", "readonly": True},
        "process": {"args": argv, "cwd": "/work", "user": {"uid": 12345, "gid": 12345},
                    "env": ["PATH=/usr/bin:/bin", "HOME=/work"], "noNewPrivileges": True,
                    "capabilities": none},
        "hostname": "bare", "mounts": mounts,
        "linux": {"namespaces": [{"type": t} for t in ["pid", "ipc", "uts", "mount", "cgroup", "network", "user"]],
                  "uidMappings": ids, "gidMappings": ids,
                  "maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
                                  "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
                                  "/proc/scsi"],
                  "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"],
                  "seccomp": json.load(open(bundle + "/seccomp.json"))}}
json.dump(spec, open(bundle + "/config.json", "w"))
PY
}
# bench_bare_runc_ms: one `runc run` of that bundle; prints its ms.
bench_bare_runc_ms() {
        local t0 t1
        n_bare=$((n_bare + 1))
        t0=$(now_ms)
        runc --root "$base/bare-root" run --bundle "$base/bare-runc" "bare-$n_bare" </dev/null >/dev/null 2>"$base/bare-runc/err" ||
                { echo "$ME: the bare runc run failed:" >&2; cat "$base/bare-runc/err" >&2; exit 1; }
        t1=$(now_ms)
        echo $((t1 - t0))
}
# bench_copy_cost TREE: the cost of a first generation (issue 51; docs/snapshot.md, "Copied on every
# CPU"): bench-gen-seed copies TREE, and a tree of 16 files of 16 MB, into a tmpfs (named as the
# store, so that bench_umount_store detaches it whatever happens), BENCH_RUNS rounds each, with the
# copiers (a thread per CPU) and with the walk's thread alone, alternating; prints the medians and
# the cost per entry and per byte fit from the two trees. Needs $BUILD/tests/bench/bench-gen-seed.
bench_copy_cost() {
        local big=$base/copy-cost-big gen=$base/copy-cost-gen i t out=$base/copy-cost.out
        mkdir -p "$big" "$gen"
        for i in $(seq 16); do head -c 16M /dev/urandom >"$big/f$i"; done
        mount -t tmpfs -o size=4g,mode=0700 tentaflake-store "$gen"
        : >"$out"
        for _ in $(seq "${RUNS:-3}"); do
                for t in 0 1; do
                        echo "threads=$t which=ws $("$BUILD/tests/bench/bench-gen-seed" --threads "$t" "$1" "$gen" 1)" >>"$out"
                        echo "threads=$t which=big $("$BUILD/tests/bench/bench-gen-seed" --threads "$t" "$big" "$gen" 1)" >>"$out"
                done
        done
        umount "$gen"
        rm -rf "$big" "$gen"
        python3 - "$out" "$(nproc)" <<'PY'
import re, statistics, sys
rows = [dict(re.findall(r"(\w+)=(\S+)", l)) for l in open(sys.argv[1])]
for t, name in (("0", "the copiers (%s CPUs)" % sys.argv[2]), ("1", "the walk's thread alone")):
    m = {}
    for tree in ("ws", "big"):
        r = [x for x in rows if x["threads"] == t and x["which"] == tree]
        m[tree] = (int(r[0]["entries"]), int(r[0]["bytes"]), statistics.median(int(x["usec"]) for x in r),
                   statistics.median(int(x["cpu_usec"]) for x in r))
    (ew, bw, tw, cw), (eb, bb, tb, cb) = m["ws"], m["big"]
    det = ew * bb - eb * bw
    per_entry = (tw * bb - tb * bw) / det   # us
    per_byte = (ew * tb - eb * tw) / det    # us
    print("first generation, %s: the tree %d entries, %d MB: %d ms (CPU %d ms); %d files, %d MB: %d ms;"
          " cost %.1f us an entry and %.2f ms a MB (%.0f MB/s)"
          % (name, ew, bw >> 20, tw / 1000, cw / 1000, eb, bb >> 20, tb / 1000, per_entry, per_byte * (1 << 20) / 1000,
             1 / per_byte if per_byte > 0 else 0))
PY
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# median: the median of the integers on stdin, one a line (of two middle ones, their mean, rounded down).
# (A script whose figures are not such integers on stdin defines its own median after this.)
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
# ratio A B: A / B to two decimals (B taken as at least 1).
ratio() { python3 -c "print(round($1 / max($2, 1), 2))"; }
# load: the load averages over 1, 5 and 15 minutes.
load() { cut -d' ' -f1-3 /proc/loadavg; }
# cache_of FIELD: cache.FIELD of the result.json of the last request, whose id is in $base/last.
cache_of() {
        python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["cache"][sys.argv[2]])' "$base/results/$(cat "$base/last")/result.json" "$1"
}

# bench_runtime_json [EXTRA]: the "runtime" object's keys for BENCH_DRIVER (default runsc: the
# platform PLATFORM; runc: the host's kernel, no platform), EXTRA after them.
bench_runtime_keys() {
        if [ "${BENCH_DRIVER:-runsc}" = runc ]; then printf '"driver": "runc"'; else printf '"platform": "%s"' "$PLATFORM"; fi
}
# bench_timing LOG PREFIX [MAX [ONLY]]: the median of each step of the daemon's "timing" lines
# (orchestrator/job.c; docs/performance.md, "A request's fixed cost") of the jobs named PREFIX<n>
# (n <= MAX, when given and not empty; n one of ONLY's space-separated numbers, when given), in ms.
bench_timing() {
        python3 - "$1" "$2" "${3:-}" "${4:-}" <<'PY'
import re, statistics, sys
steps = {}
only = set(int(x) for x in sys.argv[4].split())
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"job '%s([0-9]+)': timing: (.*) ms$" % re.escape(sys.argv[2]), line)
    if not m or (sys.argv[3] and int(m.group(1)) > int(sys.argv[3])) or (only and int(m.group(1)) not in only):
        continue
    for part in re.split(r"[,;] ", m.group(2)):
        name, _, v = part.rpartition(" ")
        steps.setdefault(name, []).append(float(v))
if steps:
    n = len(next(iter(steps.values())))
    print("  the daemon's steps (median of %d, ms): %s" % (n, ", ".join("%s %.1f" % (k, statistics.median(v)) for k, v in steps.items())))
PY
}
