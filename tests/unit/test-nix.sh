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
import json, os, sys
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

# Groups: one tfw-gid-<gid> per gid (hermes-coding and hermes-review share 10000), nogroup
# reused for 65534, the hostGroup of builder used as it is.
check(g["groups"] == {"tfw-gid-10000": {"gid": 10000}, "tfw-gid-1001": {"gid": 1001}}, "groups: %s" % g["groups"])
check(g["groupNames"] == {"hermes-coding": "tfw-gid-10000", "hermes-review": "tfw-gid-10000",
                          "zeroclaw": "nogroup", "builder": "builders", "docker-one": "tfw-gid-1001"},
      "result groups: %s" % g["groupNames"])
t = g["tmpfiles"]
for line in ["d /run/tentaflake-worker-hermes-coding 0755 root root -",
             "d /run/tentaflake-worker-hermes-coding/results 2750 root tfw-gid-10000 -",
             "d /run/tentaflake-worker-zeroclaw/results 2750 root nogroup -",
             "d /srv/tfw/builder-results 2750 root builders -"]:
    check(line in t, "tmpfiles rule %r" % line)
check(len(t) == 10, "two tmpfiles rules per agent (%d)" % len(t))

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
      z.get("pathConfig") == {"DirectoryNotEmpty": "/var/lib/zeroclaw-zeroclaw/data/.tentaflake-worker/inbox"},
      "activation path: the path unit watches the inbox")
check(s.get("tentaflake-worker@zeroclaw", {}).get("wantedBy") == [], "activation path: the daemon is not wanted")
b = s.get("tentaflake-worker@builder", {}).get("serviceConfig", {})
check(b.get("ReadWritePaths") == ["/home/builder/ws", "/srv/tfw/builder-state", "/srv/tfw/builder-results"],
      "builder: workspace, custom state and results directories writable (%s)" % b.get("ReadWritePaths"))
check(b.get("ProtectHome") == "read-only", "builder: a workspace under /home gets ProtectHome=read-only")

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
[ "$(grep -c ': ok$' <<<"$out")" -eq 5 ] && ok || bad "expected 5 good configs checked, got: $out"
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
