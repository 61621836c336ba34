#!/usr/bin/env bash
# The Nix side, without nixpkgs (nix-bin only, offline):
#  - every .nix file of the tree parses (nix-instantiate --parse);
#  - nixos/logic.nix, builtins only, evaluated on tests/data/nix/cases.nix: the good agents
#    pass every assertion and give exactly the configs of tests/data/nix/expected/, the groups,
#    tmpfiles rules and systemd drop-ins below; each bad case fails exactly one assertion, with
#    its own message;
#  - every generated config goes through the worker's real parser (config_load, via
#    build/tests/unit/test-nix-config --check): the good ones load; a bad case's config is
#    refused by the parser too where the assertion mirrors a parser rule, and accepted where
#    only the module can know (groups, two agents);
#  - the build cache (cache.paths/maxBytes/maxEntries): the config carries it as `cache`, and no
#    `cache` key without it; its bad paths and the docker driver fail one assertion each;
#  - network for jobs (network.allow/maxUploadBytes/maxDownloadBytes): the config carries it as
#    `network`, no key without it; the daemon and drain (not gc) get the settings of
#    systemd/controller-network.conf.in; an empty or too long allowlist, an entry without a
#    port and the docker driver fail one assertion each; the limits and defaults are the parser's;
#  - the egress proxies' own ids (parser/config.h): a notify.uid/gid or containerUid/Gid among
#    them fails one assertion, and the parser refuses it too;
#  - with a toolchain (issue 14): its bin is the capsule's /usr/bin and /bin, and the config is
#    built by closureMergeScript, run here with jq on a fake closure: one read-only mount per
#    store path, then accepted by the parser; a closure over the parser's mount limit fails the
#    build, extraSystemMounts counted with it; the path unit also watches the wake file (the name approve/decide.h uses); every
#    agent gets the hourly gc timer; the docker image loader loads locally and never pulls;
#  - flake.nix: nixosModules.default evaluates with no input at all.
# The module itself under lib.evalModules is tests/unit/test-nix-module.sh (needs nixpkgs).
set -uo pipefail
BUILD=${BUILD:-build}
CHECKER=$BUILD/tests/unit/test-nix-config
cd "$(dirname "$0")/../.."

if ! command -v nix-instantiate >/dev/null; then
        echo "SKIP: nix-instantiate is not installed (scripts/install-deps installs nix-bin)"
        exit 77
fi
if [ ! -x "$CHECKER" ]; then
        echo "FAIL: $CHECKER is not built (make unit-bins)"
        exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

# Evaluation only: no store writes, no daemon. stderr is kept for the failure message.
nixi() { nix-instantiate --readonly-mode "$@" 2>"$tmp/nix.err"; }
nix_error() { grep -v "build-users-group\|nixbld" "$tmp/nix.err" | sed 's/^/    /'; }

# 1. Every .nix file parses.
mapfile -t nixfiles < <(find . -name '*.nix' -not -path './.git/*' -not -path './build*' | sort)
[ ${#nixfiles[@]} -ge 8 ] || bad "expected the nix files of nixos/, flake.nix and tests/data/nix, found ${#nixfiles[@]}"
for f in "${nixfiles[@]}"; do
        if nixi --parse "$f" >/dev/null; then ok; else bad "$f does not parse"; nix_error; fi
done

# 2. The builtins-only logic on the test cases.
if ! nixi --eval --strict --json tests/data/nix/run.nix >"$tmp/run.json"; then
        bad "tests/data/nix/run.nix does not evaluate"; nix_error
        echo "nix: $passes passed, $fails failed"; exit 1
fi
mkdir -p "$tmp/good" "$tmp/bad"
python3 - "$tmp/run.json" "$tmp" >"$tmp/py.out" <<'PY'
import json, os, re, sys
d = json.load(open(sys.argv[1])); tmp = sys.argv[2]
g = d["good"]; problems = []
def check(cond, what):
    print(("ok " if cond else "FAIL ") + what)
pkg = "/nix/store/00000000000000000000000000000000-tentaflake-worker-0.1.0"

check(g["failed"] == [], "good agents pass every assertion (failed: %s)" % g["failed"])
check(g["assertionCount"] >= 5 * 20, "good: %d assertions were evaluated" % g["assertionCount"])
check(g["etcMatches"], "environment.etc holds the JSON of each config")
exp_dir = "tests/data/nix/expected"
expected = {f[:-5]: json.load(open(os.path.join(exp_dir, f))) for f in os.listdir(exp_dir) if f.endswith(".json")}
check(sorted(expected) == sorted(g["configs"]), "one expected config per good agent: %s" % sorted(g["configs"]))
for n, c in g["configs"].items():
    check(expected.get(n) == c, "config of %s equals %s/%s.json" % (n, exp_dir, n))
    json.dump(c, open(os.path.join(tmp, "good", n + ".json"), "w"))
# docker: no runsc-only key even as null (the parser refuses them for docker)
check(set(g["configs"]["docker-one"]["runtime"]) == {"driver", "image"}, "docker runtime has only driver and image")
check(g["configs"]["docker-one"]["runtime"]["image"] == "sha256:" + "0123456789abcdef" * 4, "docker: runtime.image is imageReference")
# the build cache: maxBytes as given, maxEntries the worker's default; no key without the option
check(g["configs"]["builder"].get("cache") == {"paths": ["target", "build/cache"], "max_bytes": "1g", "max_entries": 200000},
      "builder: cache carries paths, max_bytes and the default max_entries (%s)" % g["configs"]["builder"].get("cache"))
check([n for n, c in sorted(g["configs"].items()) if "cache" in c] == ["builder"],
      "no cache key for the agents without the cache option")
# network: maxUploadBytes as given, maxDownloadBytes the worker's default; no key without it
check(g["configs"]["builder"].get("network") == {"allow": ["registry.npmjs.org:443", "*.pythonhosted.org:443", "10.0.0.5:3128"],
                                                 "max_upload_bytes": "512k", "max_download_bytes": "2g"},
      "builder: network carries allow, max_upload_bytes and the default max_download_bytes (%s)" % g["configs"]["builder"].get("network"))
check([n for n, c in sorted(g["configs"].items()) if "network" in c] == ["builder"],
      "no network key for the agents without the network option")
netcfg = {"PrivateNetwork": False, "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK", "IPAddressDeny": "",
          "RuntimeDirectory": "tentaflake-egress-ids", "RuntimeDirectoryPreserve": "yes"}
tmpl = dict(l.split("=", 1) for l in open("systemd/controller-network.conf.in").read().splitlines()
            if l and not l.startswith("#") and not l.startswith("["))
check(tmpl == {"PrivateNetwork": "no", "RestrictAddressFamilies": netcfg["RestrictAddressFamilies"], "IPAddressDeny": "",
               "RuntimeDirectory": "tentaflake-egress-ids", "RuntimeDirectoryPreserve": "yes"}
      and d["networkServiceConfig"] == netcfg,
      "the module's network settings are systemd/controller-network.conf.in's (%s; %s)" % (d["networkServiceConfig"], tmpl))
# the runc drop-in: the same lines, SystemCallFilter's three as a list, ProtectHostname's "no" a bool
rtmpl = {}
for l in open("systemd/controller-runc.conf.in").read().splitlines():
    if l and not l.startswith("#") and not l.startswith("["):
        k, v = l.split("=", 1)
        rtmpl.setdefault(k, []).append(v)
rtmpl = {k: (v if k == "SystemCallFilter" else {"no": False}.get(v[0], v[0])) for k, v in rtmpl.items()}
check(d["runcServiceConfig"] == rtmpl,
      "the module's runc settings are systemd/controller-runc.conf.in's (%s; %s)" % (d["runcServiceConfig"], rtmpl))
for unit in ["tentaflake-worker@builder", "tentaflake-worker-queue@builder"]:
    sc = g["services"].get(unit, {}).get("serviceConfig", {})
    check(all(sc.get(k) == v for k, v in netcfg.items()), "%s: the host's network for the egress proxy (%s)" % (unit, sc))
for unit in ["tentaflake-worker-gc@builder", "tentaflake-worker@hermes-coding", "tentaflake-worker-queue@hermes-coding"]:
    sc = g["services"].get(unit, {}).get("serviceConfig", {})
    check(not any(k in sc for k in netcfg), "%s: no network settings (gc starts no capsule; no network option)" % unit)
env = d["toolchainEnv"]
check(g["configs"]["tools"]["runtime"]["system_mounts"] == [env + "/bin:/usr/bin", env + "/bin:/bin"],
      "toolchain: its bin is the capsule's /usr/bin and /bin (%s)" % g["configs"]["tools"]["runtime"].get("system_mounts"))
check("tentaflake/workers/tools.json" not in g["etcNames"] and sorted(g["closureMerges"]) == ["tools"]
      and g["closureMerges"]["tools"]["closure"] == "/nix/store/33333333333333333333333333333333-closure-info",
      "toolchain: the config is built from the closure, not written at evaluation (%s)" % sorted(g["closureMerges"]))
open(os.path.join(tmp, "tools-base.json"), "w").write(g["closureMerges"]["tools"]["base"])
open(os.path.join(tmp, "merge.sh"), "w").write(d["closureMergeScript"])
open(os.path.join(tmp, "load-image.sh"), "w").write(d["imageLoad"])
open(os.path.join(tmp, "max-mounts"), "w").write(str(d["maxSystemMounts"]))
wake = d["wakeFile"]

# Groups: one tfw-gid-<gid> per gid (hermes-coding and hermes-review share 10000), nogroup
# reused for 65534, the hostGroup of builder used as it is.
check(g["groups"] == {"tfw-gid-10000": {"gid": 10000}, "tfw-gid-1001": {"gid": 1001}, "tfw-gid-2001": {"gid": 2001}},
      "groups: %s" % g["groups"])
check(g["groupNames"] == {"hermes-coding": "tfw-gid-10000", "hermes-review": "tfw-gid-10000",
                          "zeroclaw": "nogroup", "builder": "builders", "docker-one": "tfw-gid-1001",
                          "tools": "tfw-gid-2001"},
      "result groups: %s" % g["groupNames"])
t = g["tmpfiles"]
for line in ["d /run/tentaflake-worker-hermes-coding 0755 root root -",
             "d /run/tentaflake-worker-hermes-coding/results 2750 root tfw-gid-10000 -",
             "d /run/tentaflake-worker-zeroclaw/results 2750 root nogroup -",
             "d /srv/tfw/builder-results 2750 root builders -"]:
    check(line in t, "tmpfiles rule %r" % line)
check(len(t) == 12, "two tmpfiles rules per agent (%d)" % len(t))

s, p = g["services"], g["paths"]
h = s.get("tentaflake-worker@hermes-coding", {})
check(h.get("overrideStrategy") == "asDropin", "the units are the package's; agents get drop-ins")
check(h.get("serviceConfig", {}).get("ExecStart") ==
      ["", pkg + "/bin/tentaflake-worker --config /etc/tentaflake/workers/hermes-coding.json run"],
      "hermes-coding ExecStart runs `run` with its config")
check(h.get("serviceConfig", {}).get("ReadWritePaths") == ["/var/lib/hermes-coding/workspace"],
      "hermes-coding: only the workspace is added writable (state and results come from the unit)")
check("ProtectHome" not in h.get("serviceConfig", {}), "hermes-coding keeps ProtectHome=yes")
check(h.get("wantedBy") == ["multi-user.target"], "activation daemon: the daemon is wanted")
q = s.get("tentaflake-worker-queue@hermes-coding", {})
check(q.get("serviceConfig", {}).get("ExecStart", [""])[-1].endswith("/hermes-coding.json drain")
      and q.get("wantedBy") == [], "the drain service exists, not wanted by itself")
check(p.get("tentaflake-worker-queue@hermes-coding", {}).get("wantedBy") == [], "activation daemon: no path unit wanted")
z = p.get("tentaflake-worker-queue@zeroclaw", {})
check(z.get("wantedBy") == ["paths.target"] and
      z.get("pathConfig") == {"DirectoryNotEmpty": "/var/lib/zeroclaw-zeroclaw/data/.tentaflake-worker/inbox",
                              "PathExists": "/var/lib/tentaflake-worker-zeroclaw/" + wake},
      "activation path: the path unit watches the inbox and the wake file (%s)" % z.get("pathConfig"))
bp = p.get("tentaflake-worker-queue@builder", {}).get("pathConfig", {})
check(bp.get("PathExists") == "/srv/tfw/builder-state/" + wake, "the wake file is in the agent's own stateDir (%s)" % bp)
tm = g["timers"]
check(sorted(tm) == sorted("tentaflake-worker-gc@" + n for n in g["configs"]) and
      all(t.get("wantedBy") == ["timers.target"] and t.get("overrideStrategy") == "asDropin" for t in tm.values()),
      "every agent's hourly gc timer is wanted (%s)" % sorted(tm))
gc = s.get("tentaflake-worker-gc@builder", {}).get("serviceConfig", {})
check(gc.get("ExecStart", [""])[-1] == pkg + "/bin/tentaflake-worker --config /etc/tentaflake/workers/builder.json gc --scheduled",
      "the gc service runs `gc --scheduled` with the agent's config")
check(gc.get("ReadWritePaths") == ["/srv/tfw/builder-state", "/srv/tfw/builder-results"],
      "gc: the custom state and results directories writable, never the workspace (%s)" % gc.get("ReadWritePaths"))
check(s.get("tentaflake-worker-gc@hermes-coding", {}).get("serviceConfig", {}).get("ReadWritePaths") == [],
      "gc: nothing added for the default directories")
check(s.get("tentaflake-worker@zeroclaw", {}).get("wantedBy") == [], "activation path: the daemon is not wanted")
b = s.get("tentaflake-worker@builder", {}).get("serviceConfig", {})
check(b.get("ReadWritePaths") == ["/home/builder/ws", "/srv/tfw/builder-state", "/srv/tfw/builder-results"],
      "builder: workspace, custom state and results directories writable (%s)" % b.get("ReadWritePaths"))
check(b.get("ProtectHome") == "read-only", "builder: a workspace under /home gets ProtectHome=read-only")
# MemoryMax= and TasksMax= from the config (issue 33; docs/install.md, "Memory and tasks"),
# computed here again: the store's tmpfs bytes, 1 KiB an inode of it, the scratch, the worker,
# 256 MiB and 256 tasks a job; on the daemon and drain, not on gc. The default config's fits in
# the package unit's own (systemd/tentaflake-worker@.service.in).
def limits(sc):
    return (sc.get("MemoryMax"), sc.get("TasksMax"))
def ceil_div(a, b):
    return -(-a // b)
def expected(c, store, cache_bytes, cache_entries, entries=200000, cache_paths=()):
    lanes = min(c + 1, 65)
    caches = 2 * c + 1 if cache_bytes else 0
    # docs/config.md, "Sizing the store": per cache its entries, roots and 6 files; 64; per lane
    # a directory per component of each cache path
    dirs = sum(len(p.split("/")) for p in cache_paths)
    inodes = lanes * (entries + 8) + 1024 + (caches * (cache_entries + len(cache_paths) + 6) + 64 + lanes * dirs
                                             if cache_bytes else 0)
    mem = ceil_div(store + caches * cache_bytes, 1 << 20) + ceil_div(inodes, 1024) + 64 + 256 + 256 * c
    return ("%dM" % mem, 64 + 256 * c)
want_b = expected(2, 2 << 30, 1 << 30, 200000, cache_paths=("target", "build/cache"))
check(limits(b) == want_b and limits(s.get("tentaflake-worker-queue@builder", {}).get("serviceConfig", {})) == want_b,
      "builder (2 jobs, a 1g cache): MemoryMax and TasksMax %s on the daemon and drain (got %s)" % (want_b, limits(b)))
want_h = expected(1, 2 << 30, 0, 0)
check(limits(h.get("serviceConfig", {})) == want_h, "hermes-coding (the defaults): %s (got %s)" % (want_h, limits(h.get("serviceConfig", {}))))
check("MemoryMax" not in gc and "TasksMax" not in gc, "gc: no limits of its own")
unit = open("systemd/tentaflake-worker@.service.in").read()
m = re.search(r"^MemoryMax=(\d+)G$", unit, re.M)
t = re.search(r"^TasksMax=(\d+)$", unit, re.M)
check(m and t and int(m.group(1)) * 1024 >= int(want_h[0][:-1]) and int(t.group(1)) >= want_h[1],
      "the package unit's MemoryMax and TasksMax hold the default config (%s)" % (want_h,))

for name, c in d["bad"].items():
    one = len(c["failed"]) == 1 and c["expect"] in c["failed"][0]
    check(one, "bad case %s fails exactly with %r (got %s)" % (name, c["expect"], c["failed"]))
    os.makedirs(os.path.join(tmp, "bad", name), exist_ok=True)
    for n, conf in c["configs"].items():
        json.dump(conf, open(os.path.join(tmp, "bad", name, n + ".json"), "w"))
    open(os.path.join(tmp, "bad", name, "parser-rejects"), "w").write("1" if c["parserRejects"] else "0")
PY
while read -r status what; do
        if [ "$status" = ok ]; then ok; else bad "$what"; fi
done <"$tmp/py.out"

# 3. The real parser on the generated configs.
if out=$("$CHECKER" --check "$tmp"/good/*.json); then ok; else bad "the parser refuses a generated config:"; echo "$out"; fi
[ "$(grep -c ': ok$' <<<"$out")" -eq 6 ] && ok || bad "expected 6 good configs checked, got: $out"

# 3b. The toolchain's config as the module builds it: closureMergeScript (jq) on a closure.
wake=$(sed -n 's/^#define WORKER_WAKE_FILE "\(.*\)"$/\1/p' orchestrator/worker.h)
python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["wakeFile"] == sys.argv[2] else 1)' "$tmp/run.json" "$wake" &&
        ok || bad "nixos/logic.nix's wake file is not approve/decide.h's '$wake'"
env=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["toolchainEnv"])' "$tmp/run.json")
mkdir -p "$tmp/closure"
printf '%s\n' /nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-glibc-2.40 /nix/store/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-gcc-13.3.0 \
        "$env" >"$tmp/closure/store-paths"
merge() { (cd "$tmp" && closure=$tmp/closure basePath=$tmp/tools-base.json out=$tmp/$1 bash -e merge.sh); }
if command -v jq >/dev/null && merge tools.json 2>"$tmp/merge.err"; then
        ok
        want=$(printf '%s\n' /nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-glibc-2.40 /nix/store/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-gcc-13.3.0 \
                "$env" "$env/bin:/usr/bin" "$env/bin:/bin")
        got=$(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["runtime"]["system_mounts"]))' "$tmp/tools.json")
        [ "$got" = "$want" ] && ok || bad "merged mounts: each closure path, then the bins; got: $got"
        out=$("$CHECKER" --check "$tmp/tools.json") && ok || bad "the parser refuses the merged toolchain config: $out"
        max=$(cat "$tmp/max-mounts")
        python3 - "$tmp/run.json" parser/config.h <<'PY' && ok || bad "nixos/logic.nix's cache or network limits or defaults are not parser/config.h's"
import json, re, sys
d = json.load(open(sys.argv[1])); h = open(sys.argv[2]).read()
def define(n): return re.search(r"^#define %s (.*?)\s*(/\*.*)?$" % n, h, re.M).group(1)
assert str(d["maxCachePaths"]) == define("CONFIG_CACHE_PATHS_MAX")
assert str(d["maxCachePathBytes"]) == define("CONFIG_CACHE_PATH_MAX")
assert str(d["cacheDefaults"]["maxEntries"]) == define("CONFIG_DEFAULT_CACHE_MAX_ENTRIES")
assert d["cacheDefaults"]["maxBytes"] == "2g" and define("CONFIG_DEFAULT_CACHE_MAX_BYTES") == "(UINT64_C(2) << 30)"
assert str(d["maxNetworkAllow"]) == define("CONFIG_NETWORK_ALLOW_MAX")
assert d["networkDefaults"] == {"maxUploadBytes": "1m", "maxDownloadBytes": "2g"}
assert define("CONFIG_DEFAULT_MAX_UPLOAD_BYTES") == "(UINT64_C(1) << 20)" and define("CONFIG_DEFAULT_MAX_DOWNLOAD_BYTES") == "(UINT64_C(2) << 30)"
assert define("CONFIG_EGRESS_ID_FIRST") == "UINT32_C(%d)" % d["egressIdFirst"] and define("CONFIG_EGRESS_ID_COUNT") == "UINT32_C(%d)" % (d["egressIdLast"] - d["egressIdFirst"] + 1)
PY
        [ "$max" = "$(sed -n 's/^#define CONFIG_MAX_SYSTEM_MOUNTS \([0-9]*\)$/\1/p' parser/config.h)" ] && ok ||
                bad "nixos/logic.nix's maxSystemMounts ($max) is not the parser's CONFIG_MAX_SYSTEM_MOUNTS"
        for i in $(seq "$max"); do printf '/nix/store/%032d-p\n' "$i"; done >"$tmp/closure/store-paths"
        if merge big.json 2>"$tmp/merge.err"; then bad "a closure over $max mounts was built"; else ok; fi
        grep -q "needs $((max + 2)) system mounts; the worker takes at most $max" "$tmp/merge.err" && ok ||
                bad "no message for a closure too large: $(cat "$tmp/merge.err")"
        # extraSystemMounts count too: max - 3 paths, the 2 bins and 2 extra mounts are one too many
        for i in $(seq $((max - 3))); do printf '/nix/store/%032d-p\n' "$i"; done >"$tmp/closure/store-paths"
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); d["runtime"]["extra_system_mounts"]=["/opt/a:/a","/opt/b:/b"]; json.dump(d,open(sys.argv[2],"w"))' \
                "$tmp/tools-base.json" "$tmp/tools-extra-base.json"
        if (cd "$tmp" && closure=$tmp/closure basePath=$tmp/tools-extra-base.json out=$tmp/extra.json bash -e merge.sh) 2>"$tmp/merge.err"; then
                bad "a closure with extra mounts over $max was built"
        else ok; fi
        grep -q "needs $((max + 1)) system mounts" "$tmp/merge.err" && ok ||
                bad "extra mounts not counted: $(cat "$tmp/merge.err")"
else
        bad "closureMergeScript failed (jq: $(command -v jq)): $(cat "$tmp/merge.err" 2>/dev/null)"
fi

# 3c. The image loader, against a fake engine: it loads the archive only when the reference is
# missing, checks the reference after, and never pulls.
cat >"$tmp/engine" <<'SH'
#!/bin/sh
echo "$*" >>"$ENGINE_LOG"
case "$1 $2" in
"image inspect") [ -e "$ENGINE_STORE/loaded" ] ;;
"load --input") [ "$3" = /nix/store/cccccccccccccccccccccccccccccccc-image.tar.gz ] && [ -z "$ENGINE_BAD_ARCHIVE" ] && : >"$ENGINE_STORE/loaded"; exit 0 ;;
*) exit 3 ;;
esac
SH
chmod +x "$tmp/engine"
sed -e "s|@ENGINE@|$tmp/engine|g; s|@IMAGE@|/nix/store/cccccccccccccccccccccccccccccccc-image.tar.gz|g; s|@REF@|sha256:0123|g" \
        "$tmp/load-image.sh" >"$tmp/load"
loader() { rm -f "$tmp/engine.log"; ENGINE_LOG=$tmp/engine.log ENGINE_STORE=$tmp ENGINE_BAD_ARCHIVE=${1:-} bash "$tmp/load" 2>"$tmp/load.err"; }
rm -f "$tmp/loaded"
loader && ok || bad "the loader failed: $(cat "$tmp/load.err")"
[ "$(cat "$tmp/engine.log")" = "image inspect sha256:0123
load --input /nix/store/cccccccccccccccccccccccccccccccc-image.tar.gz
image inspect sha256:0123" ] && ok || bad "missing image: inspect, load, inspect; got: $(cat "$tmp/engine.log")"
loader && ! grep -q '^load' "$tmp/engine.log" && ok || bad "image present: not loaded again: $(cat "$tmp/engine.log")"
rm -f "$tmp/loaded"
if loader bad; then bad "a reference the archive lacks was accepted"; else ok; fi
grep -q "imageReference 'sha256:0123' is not in the local store" "$tmp/load.err" && ok || bad "no message: $(cat "$tmp/load.err")"
grep -q pull "$tmp/engine.log" "$tmp/load" && bad "the loader pulls" || ok
for dir in "$tmp"/bad/*/; do
        name=$(basename "$dir")
        out=$("$CHECKER" --check "$dir"*.json); rc=$?
        if [ "$(cat "$dir/parser-rejects")" = 1 ]; then
                # the module's assertion mirrors a parser rule: the parser refuses it too
                [ $rc -eq 1 ] && ok || bad "bad case $name: the parser accepts what the module refuses: $out"
        else
                # only the module can see this (groups, other agents): the file alone is valid
                [ $rc -eq 0 ] && ok || bad "bad case $name: the parser refuses it: $out"
        fi
done

# 4. The checker really refuses what the parser refuses (a check that cannot fail is none).
printf '{"version": 1, "name": "x", "workspace": "/w", "container_uid": 1, "container_gid": 1, "limits": {"memroy": "2g"}}' >"$tmp/typo.json"
out=$("$CHECKER" --check "$tmp/typo.json"); rc=$?
[ $rc -eq 1 ] && grep -q "unknown_field" <<<"$out" && ok || bad "the checker accepted an unknown key: $out"

# 5. flake.nix: the module output needs no input, and the module is a module function.
cat >"$tmp/flake.nix" <<NIX
let
  flake = import $PWD/flake.nix;
  out = flake.outputs { self = throw "self is not needed"; nixpkgs = throw "nixpkgs is not needed"; };
in builtins.isFunction out.nixosModules.default
  && builtins.functionArgs out.nixosModules.default == builtins.functionArgs (import $PWD/nixos/module.nix)
  && builtins.isFunction (import $PWD/nixos/package.nix)
NIX
if r=$(nixi --eval --strict "$tmp/flake.nix") && [ "$r" = true ]; then ok; else bad "flake.nix: nixosModules.default needs an input or is not the module ($r)"; nix_error; fi

echo "nix: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
