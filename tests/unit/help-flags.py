#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Read the verbs and flags of a tentaflake-worker binary from its own help, as JSON on stdout:
#   {"global": [flags of --help's Options: block], "aliases": [verbs that Options: names as
#    another spelling of a flag, "(also: version)"], "verbs": {"audit verify": [flags], ...}}
# The verbs are the leading lower-case words of the first column of each line of the
# "Commands:" block; a verb's flags are every --flag or -f token of `VERB --help` (with
# --a-{b,c}-d expanded), less the global ones ("Requires --config FILE" names --config).
# Used by tests/unit/test-man-help.sh and tests/unit/test-completion.sh, so that both follow
# the binary as it is now.
import json, re, subprocess, sys

def expand(tok):
    m = re.search(r"\{([^}]*)\}", tok)
    if not m:
        return [tok]
    return [x for alt in m.group(1).split(",") for x in expand(tok[:m.start()] + alt + tok[m.end():])]

def flags_of(text):
    out = set()
    for tok in re.findall(r"(?<![\w-])--?[a-zA-Z0-9{][a-zA-Z0-9{},-]*", text):
        for f in expand(tok.rstrip(",-")):
            if re.fullmatch(r"--[a-z0-9][a-z0-9-]*|-[a-zA-Z]", f):
                out.add(f)
    return out

def run(args):
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    if p.returncode != 0:
        sys.exit("help-flags: %s exits %d: %s" % (" ".join(args), p.returncode, p.stdout))
    return p.stdout

binary = sys.argv[1]
text = run([binary, "--help"])
block, verbs, opts = None, [], ""
for line in text.split("\n"):
    if re.match(r"^\S.*:$", line):
        block = line[:-1]
        continue
    if block == "Commands" and line.startswith("  ") and line.strip():
        words = []
        for w in re.split(r"\s{2,}", line.strip())[0].split():
            if not re.fullmatch(r"[a-z][a-z0-9-]*", w):
                break
            words.append(w)
        if words:
            verbs.append(" ".join(words))
    elif block == "Options":
        opts += line + "\n"
glob = flags_of(opts)
# verbs the Options block names as another spelling of a flag: "(also: version)", "(also: help [COMMAND])"
aliases = sorted(set(re.findall(r"\(also: ([a-z][a-z0-9-]*)", opts)))
out = {"global": sorted(glob), "aliases": aliases, "verbs": {}}
for v in verbs:
    out["verbs"][v] = sorted(flags_of(run([binary, v.split()[0], "--help"])) - glob)
json.dump(out, sys.stdout, indent=1)
print()
