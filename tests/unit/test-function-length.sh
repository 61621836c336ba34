#!/usr/bin/env bash
# No function of the worker's own code is longer than 150 lines (issue 38): the one that grows
# past it is split into named steps when it is written, not found later. Covered: every .c file
# of the tree outside tests/ (the tests' own helpers and fixtures), scripts/demo-project/ (the
# demo's project, not the worker's) and the build directories (build*/): the library, cli/,
# capsule-init/ and egress-proxy/. A function's length is from the line of its name to its
# closing brace, as Universal Ctags reports them (line: and end:). Each offender is printed as
# file:line, its name and its length.
set -uo pipefail
cd "$(dirname "$0")/../.."
limit=150
fixture=tests/data/function-length/long-function.c
passed=0 failed=0
rule() { # rule DESCRIPTION OFFENDERS
        if [ -z "$2" ]; then
                passed=$((passed + 1))
        else
                echo "FAIL: $1:"
                sed 's/^/    /' <<<"$2"
                failed=$((failed + 1))
        fi
}
# Universal Ctags (Debian's universal-ctags, installed by scripts/install-deps): Exuberant Ctags
# has no end: field, and without it no length would be measured at all.
if ! ctags --version 2>/dev/null | grep -q 'Universal Ctags'; then
        echo "FAIL: Universal Ctags is needed (scripts/install-deps installs universal-ctags)"
        exit 1
fi

# lengths FILE...: "LENGTH FILE:LINE NAME" for every function definition of the files.
lengths() {
        ctags --languages=C --language-force=C --kinds-C=f --fields=+ne -o - "$@" |
                awk -F'\t' '{
                        line = ""; end = ""
                        for (i = 4; i <= NF; i++) {
                                if ($i ~ /^line:/) line = substr($i, 6)
                                if ($i ~ /^end:/) end = substr($i, 5)
                        }
                        print (end == "" ? "?" : end - line + 1), $2 ":" line, $1
                }'
}
# offenders FILE...: the functions over the limit, longest first, and any whose end ctags missed.
offenders() {
        lengths "$@" | awk -v limit="$limit" '$1 == "?" { print $2 " " $3 ": no end found"; next }
                $1 > limit { print $1 "\t" $2 " " $3 ": " $1 " lines" }' |
                sort -rn | cut -f2-
}

mapfile -t sources < <(find . -name '*.c' -not -path './build*' -not -path './.git/*' \
        -not -path './tests/*' -not -path './scripts/demo-project/*' | sed 's|^\./||' | sort)
rule "functions over $limit lines (split each into named steps; docs/architecture.md)" \
        "$(offenders "${sources[@]}")"

# The rule sees what it looks for (a rule that cannot fail checks nothing).
rule "the tree's sources are found (cli/, capsule-init/, egress-proxy/ and the library)" \
        "$(for f in cli/main.c capsule-init/capsule-init.c egress-proxy/egress-proxy.c exec/exec.c; do
                printf '%s\n' "${sources[@]}" | grep -qxF "$f" || echo "$f not among the sources"
        done; [ "${#sources[@]}" -gt 100 ] || echo "only ${#sources[@]} sources")"
rule "the tree's functions are measured" \
        "$(n=$(lengths "${sources[@]}" | grep -vc '^?'); [ "$n" -gt 1000 ] || echo "only $n functions measured")"
rule "a function of $((limit + 1)) lines is reported with its file:line and length" \
        "$(out=$(offenders "$fixture"); [ "$out" = "$fixture:8 long_151: 151 lines" ] || echo "got: '$out'")"
rule "a function of $limit lines is not" \
        "$(lengths "$fixture" | grep -qx "$limit $fixture:160 at_limit_150" || echo "at_limit_150 not measured as $limit lines")"

echo "test-function-length.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
