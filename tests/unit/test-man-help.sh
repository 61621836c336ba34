#!/usr/bin/env bash
# The manual pages (issue 22, item 2):
#  - the verbs and flags of the built binary's `--help` and of each `VERB --help` are the ones
#    man/tentaflake-worker.8.in documents, both ways: a verb or flag the binary has and the page
#    lacks fails, and one the page has and the binary lacks fails too. The binary's help is read
#    as it is now, so a new verb or flag fails here until the page has it;
#  - every key of the config parser's key tables (parser/config.c) has its item in
#    tentaflake-worker.json(5);
#  - every page, as `make man` builds it in $BUILD/man, is `mandoc -T lint -W warning` clean;
#  - each page renders (man -l) with its NAME section.
# How the two are read: the help's "Commands:" block gives the verbs (the leading lower-case
# words of each line's first column: "audit verify"), its "Options:" block the global flags,
# and `VERB --help` the verb's flags (every --flag or -f token, --a-{b,c}-d expanded). The page
# gives the verbs from the `.It Cm` items of COMMANDS, each verb's flags from the `Fl` macros of
# its item, and the global flags from OPTIONS. Global flags named in a verb's help ("Requires
# --config FILE") are not counted as the verb's.
set -uo pipefail
BUILD=${BUILD:-build}
BIN=$BUILD/tentaflake-worker
cd "$(dirname "$0")/../.."

if ! command -v mandoc >/dev/null; then
        echo "SKIP: mandoc is not installed (scripts/install-deps installs it)"
        exit 77
fi
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built"; exit 1; }
pages=(tentaflake-worker.8 tentaflake-worker.json.5 tentaflake-worker-request.5)
# The pages as make builds them (`make asan` builds no `all`: made here, a nested make without
# the outer one's jobserver; up to date, it does nothing).
if ! out=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s BUILD="$BUILD" man 2>&1); then
        echo "FAIL: make man: $out"; exit 1
fi
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

for p in "${pages[@]}"; do
        f=$BUILD/man/$p
        if [ ! -f "$f" ]; then bad "$f is not built (make builds the man pages)"; continue; fi
        if out=$(mandoc -T lint -W warning "$f" 2>&1); then ok; else bad "mandoc lint of $p:"; echo "$out" | sed 's/^/    /'; fi
        if MANWIDTH=80 man -l "$f" 2>/dev/null | grep -q '^NAME'; then ok; else bad "$p does not render with a NAME section"; fi
        grep -q '@[A-Z]*@' "$f" && bad "$p: a placeholder is left" || ok
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 tests/unit/help-flags.py "$BIN" >"$tmp/help.json" 2>"$tmp/err"; then
        bad "the binary's help could not be read: $(cat "$tmp/err")"
fi
python3 - "$tmp/help.json" man/tentaflake-worker.8.in >"$tmp/py.out" <<'PY'
import json, re, sys
h = json.load(open(sys.argv[1]))
help_global, verbs = set(h["global"]), h["verbs"]
man = open(sys.argv[2]).read().split("\n")

# the page: its sections, and in COMMANDS the items of the outermost list
def fl_of(line):
    out, toks = set(), line.split()
    for i, t in enumerate(toks):
        if t == "Fl" and i + 1 < len(toks):
            a = toks[i + 1]
            a = re.sub(r"[,;.)]+$", "", a) if len(a) > 1 else a
            if re.fullmatch(r"-[a-z0-9][a-z0-9-]*|[a-zA-Z]", a):  # not `Fl -`: the "--" before an argv
                out.add("-" + a)
    return out
sect, depth, cur = None, 0, None
man_verbs, man_global = {}, set()
for line in man:
    if line.startswith(".Sh "):
        sect, depth, cur = line[4:].strip(), 0, None
        continue
    if line.startswith(".Bl"): depth += 1
    if line.startswith(".El"): depth -= 1
    if sect == "COMMANDS":
        if depth == 1 and line.startswith(".It Cm "):
            words = []
            for w in line.split()[2:]:
                if not re.fullmatch(r"[a-z][a-z0-9-]*", w): break
                words.append(w)
            cur = " ".join(words)
            man_verbs.setdefault(cur, set())  # a verb may have several synopsis items
            line = " ".join(line.split()[2 + len(words):])
        if cur is not None: man_verbs[cur] |= fl_of(line)
    elif sect == "OPTIONS":
        man_global |= fl_of(line)

def check(cond, what): print(("ok " if cond else "FAIL ") + what)
def diff(a, b): return "missing from the page: %s; not in --help: %s" % (sorted(a - b), sorted(b - a))
check(help_global == man_global, "global options of --help and of the page's OPTIONS (%s)" % diff(help_global, man_global))
check(set(verbs) == set(man_verbs), "verbs of --help and of the page's COMMANDS (%s)" % diff(set(verbs), set(man_verbs)))
page = "\n".join(man)
for a in h.get("aliases", []):
    check(re.search(r"^\.Cm %s\b" % re.escape(a), page, re.M) is not None, "the page names the verb '%s' (--help: 'also: %s')" % (a, a))
for v, f in verbs.items():
    hf, mf = set(f), man_verbs.get(v, set()) - man_global
    check(hf == mf, "%s: flags of '%s --help' and of the page (%s)" % (v, v.split()[0], diff(hf, mf)))
PY
# tentaflake-worker.json(5): every key parser/config.c accepts has an .It Cm item in KEYS
python3 - parser/config.c man/tentaflake-worker.json.5.in >>"$tmp/py.out" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
page = open(sys.argv[2]).read()
items = set()
sect = None
for line in page.split("\n"):
    if line.startswith(".Sh "): sect = line[4:].strip()
    if sect == "KEYS" and line.startswith(".It Cm "):
        items |= set(re.findall(r"[a-z_]+", line[7:].split(" Pq ")[0]))
groups = re.findall(r"static const char \*const (\w+)_keys\[\] = \{(.*?)\};", src, re.S)
print(("ok " if len(groups) >= 4 else "FAIL ") + "the config parser's key tables are found (%s)" % [g for g, _ in groups])
for group, body in groups:
    for key in re.findall(r'"([a-z_]+)"', body):
        print(("ok " if key in items else "FAIL ") + "tentaflake-worker.json(5) documents %s key '%s'" % (group, key))
PY
while read -r status what; do
        if [ "$status" = ok ]; then ok; else bad "$what"; fi
done <"$tmp/py.out"
[ -s "$tmp/py.out" ] || bad "the comparison printed nothing"

echo "man pages and --help: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
