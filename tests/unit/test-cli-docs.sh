#!/usr/bin/env bash
# What the built binary says about itself against what the documents say (issue 47, item 3);
# tests/unit/test-cli-options.c holds each verb's parser to its --help, test-man-help.sh the man
# page's flags to --help:
#  - submit's exit statuses: the 125s of controller/outcome.h (CONTROLLER_EXIT_NOT_RUN_STATUSES,
#    the result statuses, and CONTROLLER_EXIT_NOT_RUN_SUBMIT, submit's own endings), which
#    test-controller.c holds controller_exit_status() to, are what `submit --help` and
#    tentaflake-worker(8)'s EXIT STATUS (as mandoc renders it) say, each of them, with 124 and
#    128+N;
#  - the MCP server's tools: the arguments each tool's inputSchema advertises in tools/list
#    (the binary's own answer, driven on stdin with no worker) are exactly those `mcp --help`
#    lists for it ("  run     argv, action_class, ...:") and those docs/controller.md's table
#    of tools names (each argument's first `code` in its column), and the three name the same
#    tools.
set -uo pipefail
BUILD=${BUILD:-build}
BIN=$BUILD/tentaflake-worker
cd "$(dirname "$0")/../.."

if ! command -v mandoc >/dev/null; then
        echo "SKIP: mandoc is not installed (scripts/install-deps installs it)"
        exit 77
fi
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built"; exit 1; }
if ! out=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s BUILD="$BUILD" man 2>&1); then
        echo "FAIL: make man: $out"; exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0

"$BIN" submit --help >"$tmp/submit.help" 2>&1 || echo "FAIL submit --help exits non-zero" >>"$tmp/py.out"
mandoc -T ascii "$BUILD/man/tentaflake-worker.8" >"$tmp/man.txt"
"$BIN" mcp --help >"$tmp/mcp.help" 2>&1 || echo "FAIL mcp --help exits non-zero" >>"$tmp/py.out"
# initialize, then tools/list: the server answers both without a worker (run from a directory
# that is no workspace, so nothing of this tree's own is read).
printf '%s\n' \
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test-cli-docs","version":"1"}}}' \
        '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
        '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' >"$tmp/in.jsonl"
(cd "$tmp" && timeout 30 "$OLDPWD/$BIN" mcp <in.jsonl >out.jsonl 2>err.txt) ||
        echo "FAIL mcp with initialize and tools/list exits non-zero: $(cat "$tmp/err.txt")" >>"$tmp/py.out"

python3 - controller/outcome.h "$tmp" docs/controller.md >>"$tmp/py.out" <<'PY'
import json, re, sys
hdr, tmp, ctl = open(sys.argv[1]).read(), sys.argv[2], open(sys.argv[3]).read()
def check(cond, what): print(("ok " if cond else "FAIL ") + what)
def flat(s): return " ".join(s.replace("\u2010\n", "").split())

# ---- submit's exit statuses
def define(name):
    m = re.search(r'#define %s "([^"]*)"' % name, hdr)
    check(m is not None, "controller/outcome.h defines %s" % name)
    return m.group(1) if m else ""
statuses, own = define("CONTROLLER_EXIT_NOT_RUN_STATUSES"), define("CONTROLLER_EXIT_NOT_RUN_SUBMIT")
help_text = flat(open(tmp + "/submit.help").read())
man = re.sub(r".\x08", "", open(tmp + "/man.txt").read())  # mandoc's overstrikes (bold, underline)
m = re.search(r"^EXIT STATUS\n(.*?)^\S", man, re.M | re.S)
check(m is not None, "tentaflake-worker(8) has an EXIT STATUS section")
man_exit = flat(m.group(1) if m else "")
for where, text in (("submit --help", help_text), ("tentaflake-worker(8) EXIT STATUS", man_exit)):
    check(statuses in text, "%s names the 125 statuses as one list '%s'" % (where, statuses))
    for s in statuses.split(", "):
        check(re.search(r"\b%s\b" % s, text) is not None, "%s names the status %s" % (where, s))
    for cause in own.split(", "):
        check(cause in text, "%s names '%s' among the 125s" % (where, cause))
    for code in ("124", "128+N", "125"):
        check(code in text, "%s names the exit status %s" % (where, code))

# ---- the MCP tools: tools/list, mcp --help, docs/controller.md
schema = {}
for line in open(tmp + "/out.jsonl"):
    msg = json.loads(line)
    if msg.get("id") == 2:
        for t in msg.get("result", {}).get("tools", []):
            schema[t["name"]] = set(t["inputSchema"].get("properties", {}))
check(len(schema) >= 5, "tools/list answers with the tools (%s)" % sorted(schema))
helpt, tools_help, cur = open(tmp + "/mcp.help").read(), {}, None
block = re.search(r"Tools:\n(.*?)\n(?!  )", helpt, re.S)
check(block is not None, "mcp --help has its Tools: block")
for line in (block.group(1).split("\n") if block else []):
    m = re.match(r"  ([a-z_]+) {2,}(.*)", line)
    if m:
        cur, rest = m.group(1), m.group(2)
        tools_help[cur] = [rest, ":" in rest]
    elif cur and not tools_help[cur][1]:
        tools_help[cur][0] += " " + line.strip()
        tools_help[cur][1] = ":" in line
tools_help = {t: set(a.strip() for a in v[0].split(":")[0].split(",") if a.strip()) for t, v in tools_help.items()}
sec = re.search(r"^### `mcp`\n(.*?)^#", ctl, re.M | re.S)
tools_doc = {}
for line in (sec.group(1).split("\n") if sec else []):
    m = re.match(r"\| `([a-z_]+)` \| (.*?) \| .* \|$", line)
    if not m:
        continue
    depth, items, cur_item = 0, [], ""
    for ch in m.group(2):  # the column's arguments: commas outside parentheses part them
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            items.append(cur_item); cur_item = ""
        else:
            cur_item += ch
    items.append(cur_item)
    tools_doc[m.group(1)] = set(re.search(r"`([a-z_]+)`", i).group(1) for i in items if re.search(r"`([a-z_]+)`", i))
check(sec is not None and len(tools_doc) >= 5, "docs/controller.md's mcp section has its table of tools (%s)" % sorted(tools_doc))
def diff(a, b): return "only in tools/list: %s; only here: %s" % (sorted(a - b), sorted(b - a))
for where, got in (("mcp --help", tools_help), ("docs/controller.md", tools_doc)):
    check(set(got) == set(schema), "%s names the tools of tools/list (%s)" % (where, diff(set(schema), set(got))))
    for t in sorted(schema):
        check(got.get(t, set()) == schema[t], "%s: %s's arguments are its inputSchema's (%s)" % (where, t, diff(schema[t], got.get(t, set()))))
PY
while read -r status what; do
        if [ "$status" = ok ]; then passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); fi
done <"$tmp/py.out"
[ -s "$tmp/py.out" ] || { echo "FAIL: the comparison printed nothing"; fails=$((fails + 1)); }
echo "cli-docs: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
