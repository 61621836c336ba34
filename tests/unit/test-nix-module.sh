#!/usr/bin/env bash
# nixos/module.nix under nixpkgs' lib.evalModules, with NIXPKGS_LIB naming a nixpkgs `lib`
# directory (a nixpkgs checkout's lib/, or the lib-only mirror nix-community/nixpkgs.lib):
#  - the good agents of tests/data/nix/cases.nix: no failed assertion, the same configs as
#    tests/data/nix/expected/ (plus runsc from pkgs.gvisor, the module's default), the groups,
#    tmpfiles rules and drop-ins the logic gives;
#  - the toolchain (issue 14): the default 14 packages; a runsc agent without systemMounts gets
#    its bin as /usr/bin and /bin, and its config is built from the closure (jq, the base
#    config, the closureInfo of the buildEnv); the path unit watches the wake file; every agent
#    has the gc timer; docker with an image archive gets the loader before it starts and the
#    engine CLI on PATH;
#  - each bad case: exactly its assertion message;
#  - the build cache: the option's submodule fills in maxBytes and maxEntries, the config carries
#    it as `cache` (and the good agents without it have no `cache` key, by the expected files);
#  - network for jobs: the option's submodule fills in maxUploadBytes and maxDownloadBytes, the
#    config carries it as `network`, and the daemon and drain (not gc) get the host's network;
#  - a misspelt option name and wrong option types are refused by the module system.
# NIXPKGS_LIB unset: ../shared/vendor/nixpkgs-lib/lib beside the repository, nixpkgs' lib/ at
# the revision its REVISION file names (CI has it there: no Debian package ships nixpkgs). With
# neither it says SKIP (exit 77: a failure under TENTAFLAKE_MUST_WORK). The builtins-only half
# is tests/unit/test-nix.sh.
set -uo pipefail
cd "$(dirname "$0")/../.."

if [ -z "${NIXPKGS_LIB:-}" ] && [ -f ../shared/vendor/nixpkgs-lib/lib/default.nix ]; then
        NIXPKGS_LIB=../shared/vendor/nixpkgs-lib/lib
fi
if [ -z "${NIXPKGS_LIB:-}" ]; then
        echo "SKIP: NIXPKGS_LIB is not set and there is no ../shared/vendor/nixpkgs-lib/lib (point it at a nixpkgs lib/ directory to evaluate the module with lib.evalModules)"
        exit 77
fi
if [ ! -f "$NIXPKGS_LIB/default.nix" ] || [ ! -f "$NIXPKGS_LIB/modules.nix" ]; then
        echo "FAIL: NIXPKGS_LIB='$NIXPKGS_LIB' is not a nixpkgs lib directory (no default.nix and modules.nix)"
        exit 1
fi
if ! command -v nix-instantiate >/dev/null; then
        echo "FAIL: NIXPKGS_LIB is set but nix-instantiate is not installed"
        exit 1
fi
lib=$(realpath "$NIXPKGS_LIB")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

evalm() { # evalm OUT ARGS...: evaluate module-eval.nix; stderr to OUT.err
        local out=$1; shift
        nix-instantiate --readonly-mode --eval --strict --json tests/data/nix/module-eval.nix \
                --arg libPath "$lib" "$@" >"$out" 2>"$out.err"
}

# The good system, compared with the builtins-only logic's expectations.
if evalm "$tmp/good.json"; then
        python3 - "$tmp/good.json" >"$tmp/py.out" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
def check(cond, what): print(("ok " if cond else "FAIL ") + what)
pkg = "/nix/store/00000000000000000000000000000000-tentaflake-worker-0.1.0"
check(d["failed"] == [], "good agents: no failed assertion (%s)" % d["failed"])
exp_dir = "tests/data/nix/expected"
tool_cases = {"tools"} # cases whose expected mounts are the logic test's fake toolchain
for f in sorted(os.listdir(exp_dir)):
    n = f[:-5]; want = json.load(open(os.path.join(exp_dir, f)))
    got = d["configs"].get(n)
    # The module's defaults the logic leaves to the module: runsc from pkgs.gvisor, and the
    # default toolchain's mounts for a runsc agent that names no system mounts.
    if want["runtime"]["driver"] == "runsc" and "runsc" not in want["runtime"]:
        want["runtime"]["runsc"] = d["gvisor"] + "/bin/runsc"
    if want["runtime"]["driver"] == "runsc" and ("system_mounts" not in want["runtime"] or n in tool_cases):
        env = d["toolchainEnvs"][n]
        want["runtime"]["system_mounts"] = [env + "/bin:/usr/bin", env + "/bin:/bin"]
        b = d["builds"].get(n, {})
        check(b.get("tools") == ["jq"] and b.get("passAsFile") == ["base"] and json.loads(b.get("base", "null")) == got
              and b.get("closure", "").endswith("-closure-info") and "jq --rawfile paths" in b.get("script", ""),
              "%s: the config is built from the toolchain's closure with jq (%s)" % (n, sorted(b)))
    check(got == want, "module config of %s equals %s (+ the module's runsc and toolchain)" % (n, f))
check(sorted(d["builds"]) == ["hermes-coding", "hermes-review", "tools", "zeroclaw"],
      "built configs: the runsc agents without systemMounts (%s)" % sorted(d["builds"]))
check(d["toolchains"]["hermes-coding"] == d["toolNames"] and len(d["toolNames"]) == 14,
      "the default toolchain: %s" % d["toolchains"]["hermes-coding"])
wake = "/var/lib/tentaflake-worker-zeroclaw/.wake"
check(d["paths"]["tentaflake-worker-queue@zeroclaw"]["pathConfig"].get("PathExists") == wake,
      "the path unit also watches the wake file (%s)" % d["paths"]["tentaflake-worker-queue@zeroclaw"]["pathConfig"])
check(sorted(d["timers"]) == sorted("tentaflake-worker-gc@" + n for n in d["configs"])
      and all(t["wantedBy"] == ["timers.target"] for t in d["timers"].values()), "every agent's gc timer is wanted")
check(d["services"]["tentaflake-worker-gc@hermes-coding"]["serviceConfig"]["ExecStart"][1].endswith(" gc --scheduled"),
      "the gc service runs gc --scheduled")
dk = d["services"]["tentaflake-worker@docker-one"]
check("ExecStartPre" not in dk["serviceConfig"] and dk.get("path") == [d["docker"]],
      "docker without an image archive: no loader; the docker CLI on PATH (%s)" % dk.get("path"))
check(sorted(d["configs"]) == sorted(f[:-5] for f in os.listdir(exp_dir)), "one config per enabled agent")
check(d["groups"].get("tfw-gid-10000") == 10000 and d["groups"].get("tfw-gid-1001") == 1001
      and not any(g.startswith("tfw-gid-65534") or g == "tfw-gid-30000" for g in d["groups"]),
      "users.groups: tfw-gid-10000 and tfw-gid-1001 only (%s)" % d["groups"])
check("d /run/tentaflake-worker-zeroclaw/results 2750 root nogroup -" in d["tmpfiles"], "tmpfiles rule of zeroclaw")
check(d["packages"] == [pkg], "systemd.packages installs the package's units")
h = d["services"]["tentaflake-worker@hermes-coding"]
check(h["overrideStrategy"] == "asDropin" and h["wantedBy"] == ["multi-user.target"]
      and h["serviceConfig"]["ExecStart"][1] == pkg + "/bin/tentaflake-worker --config /etc/tentaflake/workers/hermes-coding.json run",
      "hermes-coding: daemon drop-in")
check(d["paths"]["tentaflake-worker-queue@zeroclaw"]["wantedBy"] == ["paths.target"], "zeroclaw: path unit wanted")
check(d["services"]["tentaflake-worker@builder"]["serviceConfig"]["ProtectHome"] == "read-only", "builder: ProtectHome=read-only")
net = {"PrivateNetwork": False, "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK", "IPAddressDeny": "",
       "RuntimeDirectory": "tentaflake-egress-ids", "RuntimeDirectoryPreserve": "yes"}
for u in ["tentaflake-worker@builder", "tentaflake-worker-queue@builder"]:
    sc = d["services"][u]["serviceConfig"]
    check(all(sc.get(k) == v for k, v in net.items()), "%s: the network drop-in's settings (%s)" % (u, sc))
check(not any(k in d["services"]["tentaflake-worker-gc@builder"]["serviceConfig"] for k in net)
      and not any(k in d["services"]["tentaflake-worker@hermes-coding"]["serviceConfig"] for k in net),
      "no network settings for gc, nor for an agent without network")
PY
        while read -r status what; do
                if [ "$status" = ok ]; then ok; else bad "$what"; fi
        done <"$tmp/py.out"
else
        bad "the good agents do not evaluate:"; sed 's/^/    /' "$tmp/good.json.err"
fi

# Each bad case: exactly its own assertion.
mapfile -t cases < <(nix-instantiate --readonly-mode --eval --strict --json \
        -E 'builtins.attrNames (import ./tests/data/nix/cases.nix).bad' 2>/dev/null | python3 -c 'import json,sys; print("\n".join(json.load(sys.stdin)))')
[ ${#cases[@]} -ge 15 ] && ok || bad "expected the bad cases of cases.nix, got ${#cases[@]}"
for c in "${cases[@]}"; do
        expect=$(nix-instantiate --readonly-mode --eval --strict --json \
                -E "(import ./tests/data/nix/cases.nix).bad.\"$c\".expect" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin))')
        typeerr=$(nix-instantiate --readonly-mode --eval --strict --json \
                -E "(import ./tests/data/nix/cases.nix).bad.\"$c\".typeError or \"\"" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin))')
        if [ -n "$typeerr" ]; then
                if ! evalm "$tmp/$c.json" --argstr case "$c" && grep -q -- "$typeerr" "$tmp/$c.json.err"; then
                        ok
                else
                        bad "bad case $c: wanted the type error '$typeerr'"; grep -v nixbld "$tmp/$c.json.err" | head -5
                fi
                continue
        fi
        if evalm "$tmp/$c.json" --argstr case "$c" &&
           python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["failed"]; sys.exit(0 if len(f)==1 and sys.argv[2] in f[0] else 1)' "$tmp/$c.json" "$expect"; then
                ok
        else
                bad "bad case $c: wanted exactly the assertion '$expect'"; sed 's/^/    /' "$tmp/$c.json" "$tmp/$c.json.err" | head -5
        fi
done

# The module system itself refuses unknown option names and wrong types.
reject() { # reject NAME EXTRA PATTERN
        if evalm "$tmp/$1.json" --arg extra "$2"; then
                bad "$1: '$2' was accepted"
        elif grep -q -- "$3" "$tmp/$1.json.err"; then
                ok
        else
                bad "$1: '$2' failed without /$3/:"; grep -v nixbld "$tmp/$1.json.err" | head -5 | sed 's/^/    /'
        fi
}
reject misspelt-option '{ memroy = "2g"; }' "option .tentaflake.worker.agents.a.memroy' does not exist"
reject uid-as-string '{ containerUid = "10000"; }' "tentaflake.worker.agents.a.containerUid' is not of type"
reject uid-negative '{ containerUid = -1; }' "tentaflake.worker.agents.a.containerUid' is not of type"
reject size-with-space '{ memory = "2 GB"; }' "tentaflake.worker.agents.a.memory' is not of type"
reject cpus-as-number '{ cpus = 2; }' "tentaflake.worker.agents.a.cpus' is not of type"
reject unknown-driver '{ driver = "lxc"; }' "tentaflake.worker.agents.a.driver' is not of type"
reject unknown-activation '{ activation = "cron"; }' "tentaflake.worker.agents.a.activation' is not of type"
reject relative-state-dir '{ stateDir = "var/lib/x"; }' "tentaflake.worker.agents.a.stateDir' is not of type"
reject concurrency-zero '{ concurrency = 0; }' "tentaflake.worker.agents.a.concurrency' is not of type"
reject cache-misspelt '{ cache = { path = [ "target" ]; }; }' "option .tentaflake.worker.agents.a.cache.path' does not exist"
reject cache-size-with-space '{ cache = { paths = [ "target" ]; maxBytes = "2 GB"; }; }' "tentaflake.worker.agents.a.cache.maxBytes' is not of type"
reject cache-entries-zero '{ cache = { paths = [ "target" ]; maxEntries = 0; }; }' "tentaflake.worker.agents.a.cache.maxEntries' is not of type"
reject network-misspelt '{ network = { allows = [ "pypi.org:443" ]; }; }' "option .tentaflake.worker.agents.a.network.allows' does not exist"
reject network-allow-string '{ network = { allow = "pypi.org:443"; }; }' "tentaflake.worker.agents.a.network.allow' is not of type"
reject network-size-with-space '{ network = { allow = [ "pypi.org:443" ]; maxUploadBytes = "1 MB"; }; }' "tentaflake.worker.agents.a.network.maxUploadBytes' is not of type"
# docker with an image archive: the loader runs before the daemon and drain, not before gc.
img=/nix/store/cccccccccccccccccccccccccccccccc-worker-image.tar.gz
if evalm "$tmp/image.json" --arg extra "{ driver = \"docker\"; imageReference = \"sha256:$(printf '%064d' 7)\"; image = \"$img\"; }" &&
   python3 - "$tmp/image.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["services"]
pre = s["tentaflake-worker@a"]["serviceConfig"].get("ExecStartPre", [])
assert d["failed"] == [], d["failed"]
assert len(pre) == 1 and pre[0].endswith("-tentaflake-worker-load-image-a"), pre
assert s["tentaflake-worker-queue@a"]["serviceConfig"].get("ExecStartPre") == pre
assert "ExecStartPre" not in s["tentaflake-worker-gc@a"]["serviceConfig"]
assert d["configs"]["a"]["runtime"] == {"driver": "docker", "image": "sha256:" + "0" * 63 + "7"}, d["configs"]["a"]["runtime"]
assert "a" not in d["builds"]
PY
then ok; else bad "docker with an image archive: no loader, or a wrong config"; head -5 "$tmp/image.json.err"; fi
if evalm "$tmp/image-runsc.json" --arg extra "{ image = \"$img\"; }" &&
   python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["failed"]; sys.exit(0 if len(f)==1 and "are only for the docker and podman drivers" in f[0] else 1)' "$tmp/image-runsc.json"; then
        ok
else
        bad "an image archive with the runsc driver was not refused"; head -5 "$tmp/image-runsc.json" "$tmp/image-runsc.json.err"
fi

# and a good extra value is accepted (the harness itself can succeed)
if evalm "$tmp/extra-ok.json" --arg extra '{ memory = "3g"; memorySwap = "3g"; }' &&
   python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["failed"]==[] and d["configs"]["a"]["limits"]["memory"]=="3g" else 1)' "$tmp/extra-ok.json"; then
        ok
else
        bad "a valid extra option value was refused"; head -5 "$tmp/extra-ok.json.err"
fi

# the build cache: the submodule's defaults fill in what is left out, and the config carries it
if evalm "$tmp/cache.json" --arg extra '{ cache = { paths = [ "target" ".cache/pip" ]; }; }' &&
   python3 - "$tmp/cache.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["failed"] == [], d["failed"]
assert d["configs"]["a"]["cache"] == {"paths": ["target", ".cache/pip"], "max_bytes": "2g", "max_entries": 200000}, d["configs"]["a"].get("cache")
PY
then ok; else bad "cache: the generated config does not carry the cache with its defaults"; head -5 "$tmp/cache.json.err"; fi
# a cache without paths: the module system says the option has no value, or (where the config
# leaves an undefined option out) the assertion says the list is empty
if evalm "$tmp/cache-no-paths.json" --arg extra '{ cache = { maxBytes = "1g"; }; }'; then
        python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["failed"]; sys.exit(0 if len(f)==1 and "cache.paths: must name 1..16 workspace-relative paths, got 0" in f[0] else 1)' "$tmp/cache-no-paths.json" &&
                ok || bad "a cache without paths: not exactly the empty-paths assertion: $(head -c 300 "$tmp/cache-no-paths.json")"
elif grep -q "tentaflake.worker.agents.a.cache.paths' \(was accessed but has no value defined\|is used but not defined\)" "$tmp/cache-no-paths.json.err"; then
        ok
else
        bad "a cache without paths failed otherwise:"; grep -v nixbld "$tmp/cache-no-paths.json.err" | head -5
fi
if evalm "$tmp/cache-set.json" --arg extra '{ cache = { paths = [ "build" ]; maxBytes = 1073741824; maxEntries = 5000; }; }' &&
   python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["failed"]==[] and d["configs"]["a"]["cache"]=={"paths":["build"],"max_bytes":1073741824,"max_entries":5000} else 1)' "$tmp/cache-set.json"; then
        ok
else
        bad "cache: maxBytes and maxEntries are not carried as given"; head -5 "$tmp/cache-set.json.err"
fi

# network: the submodule's defaults fill in the bounds, and the config carries it
if evalm "$tmp/network.json" --arg extra '{ network = { allow = [ "pypi.org:443" "*.pythonhosted.org:443" ]; }; }' &&
   python3 - "$tmp/network.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["failed"] == [], d["failed"]
assert d["configs"]["a"]["network"] == {"allow": ["pypi.org:443", "*.pythonhosted.org:443"], "max_upload_bytes": "1m",
                                        "max_download_bytes": "2g"}, d["configs"]["a"].get("network")
assert d["services"]["tentaflake-worker@a"]["serviceConfig"]["PrivateNetwork"] is False
PY
then ok; else bad "network: the generated config does not carry the allowlist with its defaults"; head -5 "$tmp/network.json.err"; fi
# runc: the daemon and drain carry the runc drop-in's settings (systemd/controller-runc.conf.in),
# gc does not
if evalm "$tmp/runc.json" --arg extra '{ driver = "runc"; }' &&
   python3 - "$tmp/runc.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["failed"] == [], d["failed"]
for u in ["tentaflake-worker@a", "tentaflake-worker-queue@a"]:
    sc = d["services"][u]["serviceConfig"]
    assert sc.get("CapabilityBoundingSet") == "CAP_SYS_PTRACE" and sc.get("ProtectHostname") is False, (u, sc)
assert "CapabilityBoundingSet" not in d["services"]["tentaflake-worker-gc@a"]["serviceConfig"]
PY
then ok; else bad "runc: the services do not carry the runc drop-in's settings"; head -5 "$tmp/runc.json.err"; fi
# a network without allow: the module system says the option has no value
if evalm "$tmp/network-no-allow.json" --arg extra '{ network = { maxUploadBytes = "1m"; }; }'; then
        python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["failed"]; sys.exit(0 if len(f)==1 and "network.allow: must name 1..64" in f[0] else 1)' "$tmp/network-no-allow.json" &&
                ok || bad "a network without allow: not exactly the empty-allow assertion: $(head -c 300 "$tmp/network-no-allow.json")"
elif grep -q "tentaflake.worker.agents.a.network.allow' \(was accessed but has no value defined\|is used but not defined\)" "$tmp/network-no-allow.json.err"; then
        ok
else
        bad "a network without allow failed otherwise:"; grep -v nixbld "$tmp/network-no-allow.json.err" | head -5
fi

rev=$(cat "$lib/../REVISION" 2>/dev/null | cut -c1-12)
echo "nix module (lib.evalModules, $lib${rev:+, nixpkgs $rev}): $passes passed, $fails failed"
[ "$fails" -eq 0 ]
