#!/usr/bin/env bash
# The NixOS options for serve workers (issue 13, item 2), without nixpkgs (nix-bin only):
#  - nixos/serve-logic.nix, builtins only, on tests/data/nix/serve-cases.nix: the good workers
#    pass every assertion and give the /etc/tentaflake/serve files and drop-ins below; each bad
#    case (key or token in the store, an image not pinned, a default above its ceiling, a mount
#    without identity or over the token, two labels folding alike, ...) fails exactly one
#    assertion, with its own message;
#  - the generated TENTAFLAKE_SERVE_FLAGS, read as systemd reads an EnvironmentFile and split as
#    it splits $VAR, are the flags the logic meant, and the real `serve` flag parser accepts
#    them (it stops at its root check; a bad flag makes it stop earlier, with exit 2), the
#    --allow-host entries of allowHosts included (checked by the config's allowlist rule);
#  - allowHosts: --allow-network and one --allow-host each, and the unit gets the settings of
#    systemd/controller-network.conf.in; an engine sandbox, an entry without a port and more
#    than 64 entries fail one assertion each.
# The module itself under lib.evalModules: tests/unit/test-nix-module.sh (nixpkgs' lib).
set -uo pipefail
BUILD=${BUILD:-build}
BIN=$BUILD/tentaflake-worker
cd "$(dirname "$0")/../.."

if ! command -v nix-instantiate >/dev/null; then
        echo "SKIP: nix-instantiate is not installed (scripts/install-deps installs nix-bin)"
        exit 77
fi
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

for f in nixos/serve-logic.nix tests/data/nix/serve-cases.nix tests/data/nix/serve-run.nix nixos/module.nix; do
        if nix-instantiate --readonly-mode --parse "$f" >/dev/null 2>"$tmp/err"; then ok; else bad "$f does not parse"; cat "$tmp/err"; fi
done
if ! nix-instantiate --readonly-mode --eval --strict --json tests/data/nix/serve-run.nix >"$tmp/run.json" 2>"$tmp/err"; then
        bad "tests/data/nix/serve-run.nix does not evaluate"; grep -v nixbld "$tmp/err"
        echo "nix-serve: $passes passed, $fails failed"; exit 1
fi

python3 - "$tmp/run.json" "$tmp" >"$tmp/py.out" <<'PY'
import json, os, re, sys
d = json.load(open(sys.argv[1])); tmp = sys.argv[2]
def check(cond, what): print(("ok " if cond else "FAIL ") + what)
g = d["good"]
check(g["failed"] == [], "good workers pass every assertion (failed: %s)" % g["failed"])
check(g["assertionCount"] >= 2 * 20, "good: %d assertions were evaluated" % g["assertionCount"])
check(d["fold"] == ["serve-ci-1", "serve-ci-1", "serve-service-ci-1"], "labels fold as serve folds them: %s" % d["fold"])
check(d["address"] == ["forge.example:443", "forge:8080", "[::1]:81", "h:80"], "server addresses: %s" % d["address"])
e = g["etc"]
check(e.get("tentaflake/serve/ci-1.key") == "/run/secrets/ci-1.key" and e.get("tentaflake/serve/ci-1.token") == "/run/secrets/ci-1.token",
      "the key and the token are linked from outside the store, not copied (%s)" % e)
check(e.get("tentaflake/serve/ci-1.conf") == "text", "the flags file is generated")
s = g["services"].get("tentaflake-worker-serve@ci-1", {})
check(s.get("overrideStrategy") == "asDropin" and s.get("wantedBy") == ["multi-user.target"], "the unit is the package's, wanted")
check(s.get("serviceConfig", {}).get("InaccessiblePaths") == ["-/run/secrets/ci-1.key", "-/run/secrets/ci-1.token"],
      "the originals are inaccessible to the worker")
check("tentaflake-worker-serve@service:ci-docker" in g["services"], "the label, not the attribute name, is the instance")
# MemoryMax= and TasksMax= for the lanes (issue 33; docs/validation.md, "Memory"): 256 MiB and
# 64 tasks, and 1024 MiB and 256 tasks a lane; one lane's are the package unit's own.
def limits(u):
    sc = g["services"][u].get("serviceConfig", {})
    return (sc.get("MemoryMax"), sc.get("TasksMax"))
check(limits("tentaflake-worker-serve@ci-1") == ("2304M", 576), "ci-1 (2 lanes): MemoryMax 2304M, TasksMax 576 (got %s)"
      % (limits("tentaflake-worker-serve@ci-1"),))
one = limits("tentaflake-worker-serve@service:ci-docker")
unit = open("systemd/tentaflake-worker-serve@.service.in").read()
check(one == ("1280M", 320) and "\nMemoryMax=1280M\n" in unit and "\nTasksMax=320\n" in unit,
      "one lane: 1280M and 320, the package unit's MemoryMax=1280M and TasksMax=320 (got %s)" % (one,))
# allowHosts: --allow-network once and one --allow-host each; the unit gets the host's network
f = g["flags"]["ci-1"]
check(f.count("--allow-network") == 1 and [f[i + 1] for i, x in enumerate(f) if x == "--allow-host"] ==
      ["registry.npmjs.org:443", "*.pythonhosted.org:443"], "ci-1: --allow-network and one --allow-host per entry (%s)" % f)
check("--allow-network" not in g["flags"]["service:ci-docker"], "no allowHosts: no --allow-network")
net = {"PrivateNetwork": False, "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK", "IPAddressDeny": "",
       "RuntimeDirectory": "tentaflake-egress-ids", "RuntimeDirectoryPreserve": "yes"}
sc = s.get("serviceConfig", {})
check(all(sc.get(k) == v for k, v in net.items()), "ci-1: the network drop-in's settings for the egress proxy (%s)" % sc)
check(not any(k in g["services"]["tentaflake-worker-serve@service:ci-docker"].get("serviceConfig", {}) for k in net),
      "no allowHosts: the unit keeps no network")
# the runc sandbox: --sandbox runc and no gVisor flag; the unit gets pkgs.runc on its PATH and
# the settings of systemd/controller-runc.conf.in (what runc's own work needs under the unit's
# sandbox), which the runsc and engine units do not
f = g["flags"]["ci-runc"]
check(f[f.index("--sandbox") + 1] == "runc" and "--runsc" not in f and "--platform" not in f,
      "ci-runc: --sandbox runc, no gVisor flag (%s)" % f)
drop = {}
for line in open("systemd/controller-runc.conf.in"):
    line = line.strip()
    if line and not line.startswith(("#", "[")):
        k, v = line.split("=", 1)
        drop.setdefault(k, []).append(v)
want = {"RestrictNamespaces": "cgroup", "RestrictAddressFamilies": "AF_NETLINK AF_INET AF_INET6", "ProtectHostname": False,
        "CapabilityBoundingSet": "CAP_SYS_PTRACE"}
rs = g["services"]["tentaflake-worker-serve@ci-runc"]
sc = rs.get("serviceConfig", {})
check(all(sc.get(k) == v for k, v in want.items()) and
      sorted(" ".join(sc.get("SystemCallFilter", [])).split()) == sorted(" ".join(drop.get("SystemCallFilter", [])).split()),
      "ci-runc: the unit gets controller-runc.conf.in's settings (%s)" % sc)
check(all(drop.get(k) == [v if isinstance(v, str) else "no"] for k, v in want.items()), "ci-runc: each setting is the drop-in's (%s)" % drop)
check(rs.get("path") == ["/nix/store/22222222222222222222222222222222-runc"], "ci-runc: runc on the unit's PATH (%s)" % rs.get("path"))
check(not any("RestrictNamespaces" in g["services"][u].get("serviceConfig", {}) or "path" in g["services"][u]
              for u in g["services"] if u != "tentaflake-worker-serve@ci-runc"), "runsc and docker units: no runc settings")
for label, conf in g["conf"].items():
    env = {}
    for line in conf.splitlines():
        if not line or line.startswith("#"): continue
        k, v = line.split("=", 1)
        if len(v) >= 2 and v[0] == '"' and v[-1] == '"': v = v[1:-1]
        env[k] = v
    words = env.get("TENTAFLAKE_SERVE_FLAGS", "").split()
    check(words == g["flags"][label], "%s: $TENTAFLAKE_SERVE_FLAGS splits into the flags meant" % label)
    check(re.fullmatch(r"[^\s:]+:[0-9]+", env.get("TENTAFLAKE_SERVE_ADDRESS", "")) is not None or
          env.get("TENTAFLAKE_SERVE_ADDRESS", "").startswith("["), "%s: a host:port for the proxy" % label)
    open(os.path.join(tmp, "flags-" + label.replace(":", "_")), "w").write("\n".join(words) + "\n")
for name, c in d["bad"].items():
    check(len(c["failed"]) == 1 and c["expect"] in c["failed"][0],
          "bad case %s fails exactly with %r (got %s)" % (name, c["expect"], c["failed"]))
check(len(d["bad"]) >= 15, "%d bad cases" % len(d["bad"]))
PY
while read -r status what; do
        if [ "$status" = ok ]; then ok; else bad "$what"; fi
done <"$tmp/py.out"

# The real flag parser. As root, serve would go on and start: run it as nobody, so it stops at
# the root check, past the flags, the token and the key.
"$BIN" keygen --out "$tmp/ci.key" --identity service:ci-1 >/dev/null
echo tok-nix >"$tmp/token"
as() { "$@"; }
if [ "$(id -u)" -eq 0 ]; then
        chmod 0755 "$tmp"; chown 65534:65534 "$tmp/ci.key" "$tmp/token"
        as() { setpriv --reuid 65534 --regid 65534 --clear-groups "$@"; }
fi
serve_flags() { # serve_flags FILE [EXTRA...]: serve with the flags in FILE and the unit's own
        local f=$1; shift
        mapfile -t words <"$f"
        as "$BIN" serve "${words[@]}" "$@" --label ci-1 --key "$tmp/ci.key" --token-file "$tmp/token" \
                --state-dir "$tmp/state" --server-socket /run/tentaflake-worker-serve-ci-1.sock 2>&1
}
for f in "$tmp"/flags-*; do
        out=$(serve_flags "$f"); rc=$?
        if [ $rc -eq 1 ] && grep -q 'sandbox needs root' <<<"$out"; then ok; else bad "serve refuses the flags of $(basename "$f") (exit $rc): $out"; fi
done
out=$(serve_flags "$tmp/flags-ci-1" --max-memory-mb lots); rc=$?
[ $rc -eq 2 ] && grep -q "'lots' is not a number for --max-memory-mb" <<<"$out" && ok || bad "the check cannot fail: exit $rc: $out"

# The module itself under lib.evalModules, with NIXPKGS_LIB naming a nixpkgs lib/ directory,
# by default ../shared/vendor/nixpkgs-lib/lib beside the repository (as
# tests/unit/test-nix-module.sh; without either this part is left out, said so, and the test
# exits 77): the good workers give the logic's files, each bad case is refused, by its
# assertion or earlier by an option type.
if [ -z "${NIXPKGS_LIB:-}" ] && [ -f ../shared/vendor/nixpkgs-lib/lib/default.nix ]; then
        NIXPKGS_LIB=../shared/vendor/nixpkgs-lib/lib
fi
module_run=0
if [ -n "${NIXPKGS_LIB:-}" ]; then
        module_run=1
        evals() { nix-instantiate --readonly-mode --eval --strict --json tests/data/nix/serve-module-eval.nix \
                --arg libPath "$(realpath "$NIXPKGS_LIB")" "$@" 2>"$tmp/merr"; }
        if evals >"$tmp/mgood.json"; then
                python3 - "$tmp/mgood.json" "$tmp/run.json" >"$tmp/mpy.out" <<'PY'
import json, sys
m = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))["good"]
def check(cond, what): print(("ok " if cond else "FAIL ") + what)
check(m["failed"] == [], "module: the good workers pass (%s)" % m["failed"])
gv = "--runsc /nix/store/11111111111111111111111111111111-gvisor/bin/runsc "
for label, conf in r["conf"].items():
    got = m["etc"].get("tentaflake/serve/%s.conf" % label, "").replace(gv, "")
    check(got == conf, "module: %s.conf is the logic's (+ runsc from pkgs.gvisor)" % label)
check(m["etc"].get("tentaflake/serve/ci-1.key") == "/run/secrets/ci-1.key", "module: the key is linked, not copied")
check(sorted(m["services"]) == sorted(r["services"]), "module: the drop-ins are the logic's")
check(m["packages"] == ["/nix/store/00000000000000000000000000000000-tentaflake-worker-0.1.0"], "module: the package's units")
PY
                while read -r status what; do
                        if [ "$status" = ok ]; then ok; else bad "$what"; fi
                done <"$tmp/mpy.out"
        else
                bad "module: the good workers do not evaluate"; grep -v nixbld "$tmp/merr"
        fi
        mapfile -t cases < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1]))["bad"]))' "$tmp/run.json")
        for c in "${cases[@]}"; do
                expect=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bad"][sys.argv[2]]["expect"])' "$tmp/run.json" "$c")
                if out=$(evals --argstr case "$c"); then
                        python3 -c 'import json,sys; f=json.loads(sys.argv[1])["failed"]; sys.exit(0 if len(f)==1 and sys.argv[2] in f[0] else 1)' "$out" "$expect" \
                                && ok || bad "module: bad case $c: $out"
                else
                        grep -q "is not of type" "$tmp/merr" && ok || { bad "module: bad case $c does not evaluate:"; grep -v nixbld "$tmp/merr" | head -5; }
                fi
        done
else
        echo "note: NIXPKGS_LIB is not set and there is no ../shared/vendor/nixpkgs-lib/lib: the module half (lib.evalModules) was not run"
fi

echo "nix-serve: $passes passed, $fails failed"
[ "$fails" -eq 0 ] || exit 1
[ $module_run = 1 ] || { echo "SKIP: the module half needs nixpkgs' lib"; exit 77; }
