#!/usr/bin/env bash
# The bash completion (completion/tentaflake-worker.bash, issue 22 item 3), loaded with
# bash-completion's own helpers and called as bash calls it (COMP_WORDS, COMP_CWORD, COMP_LINE,
# COMP_POINT), on the built binary:
#  - the verbs are those of `--help`, the global flags those of its Options: block, and each
#    verb's flags those of `VERB --help` (tests/unit/help-flags.py reads the binary as it is
#    now, so a new verb or flag fails here until the completion offers it);
#  - the subcommands of audit and cache; the fixed values of --sandbox, --class, --log-level;
#  - file names after --config, directories only after --workspace; after submit's `--`, commands;
#  - request ids from `list --json` on a worker of the test's own (root: it drains two pending
#    requests and a forbidden one): approve and deny offer the pending ones, show all three;
#  - as nobody, who cannot read that config, and as root without a config: no id, no output.
set -uo pipefail
BUILD=${BUILD:-build}
BIN=$(realpath "$BUILD/tentaflake-worker")
cd "$(dirname "$0")/../.."
repo=$(pwd)
BC=/usr/share/bash-completion/bash_completion

if [ ! -r "$BC" ]; then
        echo "SKIP: bash-completion is not installed (scripts/install-deps installs it)"
        exit 77
fi
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built"; exit 1; }
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

if [ "$(id -u)" -eq 0 ]; then
        mkdir -p -m 0755 /run/tentaflake-tests && tmp=$(mktemp -d /run/tentaflake-tests/completion.XXXXXX)
else
        tmp=$(mktemp -d)
fi
chmod 0755 "$tmp"
name=tfw-completion-$$
trap 'umount -l "$tmp/state/store" 2>/dev/null; rm -rf "$tmp"; rmdir /run/tentaflake-worker-$name/runsc /run/tentaflake-worker-$name 2>/dev/null' EXIT

# comp [-u USER] LINE: the candidates for LINE (the cursor at its end; a trailing space starts
# a new, empty word), sorted, one a line. Run in a fresh bash in $tmp/cwd.
mkdir -p "$tmp/cwd/somedir"
touch "$tmp/cwd/worker-a.json" "$tmp/cwd/worker-b.json" "$tmp/cwd/other.txt"
cat >"$tmp/comp.bash" <<'EOF'
. /usr/share/bash-completion/bash_completion
. "$REPO/completion/tentaflake-worker.bash"
read -r -a COMP_WORDS <<<"$LINE"
[[ $LINE = *" " ]] && COMP_WORDS+=("")
COMP_WORDS[0]=$BIN
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
_tentaflake_worker tentaflake-worker "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}" | sort -u | sed '/^$/d'
EOF
comp() {
        local pre=()
        if [ "$1" = -u ]; then pre=(setpriv --reuid="$2" --regid=nogroup --clear-groups --); shift 2; fi
        (cd "$tmp/cwd" && "${pre[@]}" env -i PATH="$PATH" HOME=/ REPO="$repo" BIN="$BIN" LINE="$1" \
                bash --norc --noprofile "$tmp/comp.bash" 2>"$tmp/comp.err")
}
# want LINE EXPECTED...: exactly these candidates (sorted), and nothing on stderr
want() {
        local line=$1; shift
        local got exp
        got=$(comp "$line")
        exp=$(printf '%s\n' "$@" | sort -u | sed '/^$/d')
        if [ "$got" = "$exp" ] && [ ! -s "$tmp/comp.err" ]; then ok; else
                bad "completing '$line': got [$(echo $got)], wanted [$(echo $exp)]; stderr: $(cat "$tmp/comp.err")"
        fi
}

if ! python3 tests/unit/help-flags.py "$BIN" >"$tmp/help.json" 2>"$tmp/err"; then
        bad "the binary's help could not be read: $(cat "$tmp/err")"; exit 1
fi
jq_py() { python3 -c "import json,sys; h=json.load(open('$tmp/help.json')); $1"; }

# verbs and global flags
# (and the verbs --help's Options: names as other spellings: "(also: version)")
mapfile -t verbs < <(jq_py 'print("\n".join(sorted({v.split()[0] for v in h["verbs"]} | set(h.get("aliases", [])))))')
want "tentaflake-worker " "${verbs[@]}"
mapfile -t globals < <(jq_py 'print("\n".join(f for f in h["global"] if f.startswith("--")))')
want "tentaflake-worker --" "${globals[@]}"
want "tentaflake-worker --config worker-a.json " "${verbs[@]}"
want "tentaflake-worker ap" apply approve
want "tentaflake-worker help " "${verbs[@]}"
want "tentaflake-worker help approve " # one command only
# each verb's flags (and --help, which every verb takes)
while read -r verb; do
        mapfile -t f < <(jq_py "print('\n'.join(h['verbs']['$verb']))")
        first=${verb%% *}
        want "tentaflake-worker $first --" "${f[@]}" --help
done < <(jq_py 'print("\n".join(h["verbs"]))')
want "tentaflake-worker --config worker-a.json approve x --" $(jq_py "print(' '.join(h['verbs']['approve']))") --help
# subcommands and fixed values
want "tentaflake-worker audit " verify
want "tentaflake-worker --config worker-a.json cache " clear
want "tentaflake-worker serve --sandbox " runsc docker podman
want "tentaflake-worker serve --log-level w" warning
want "tentaflake-worker submit --class l" local-reversible
want "tentaflake-worker serve --concurrency " # a number: nothing offered
# file names
want "tentaflake-worker --config worker-" worker-a.json worker-b.json
want "tentaflake-worker --config so" somedir
want "tentaflake-worker submit --workspace " somedir
# after submit's --, a command
got=$(comp "tentaflake-worker submit --class local-reversible -- bas")
grep -qx bash <<<"$got" && ok || bad "after submit --: no command names offered ($(echo $got | head -c 200))"

# request ids
if [ "$(id -u)" -eq 0 ]; then
        mkdir -p "$tmp/ws/.tentaflake-worker/inbox"
        chown -R 10000:10000 "$tmp/ws"
        cat >"$tmp/config.json" <<JSON
{"version": 1, "name": "$name", "workspace": "$tmp/ws", "container_uid": 10000, "container_gid": 10000,
 "state_dir": "$tmp/state", "results_dir": "$tmp/results", "runtime": {"warm_seconds": 0}}
JSON
        chmod 0600 "$tmp/config.json"
        inbox=$tmp/ws/.tentaflake-worker/inbox
        for id in deploy_1 deploy_2; do
                printf '{"version": 1, "id": "%s", "action_class": "irreversible", "argv": ["true"]}\n' "$id" >"$inbox/$id.json"
        done
        printf '{"version": 1, "id": "nope_3", "action_class": "forbidden", "argv": ["true"]}\n' >"$inbox/nope_3.json"
        if ! timeout 60 "$BIN" --config "$tmp/config.json" drain >"$tmp/drain.log" 2>&1; then
                bad "drain of the test's own worker failed: $(cat "$tmp/drain.log")"
        fi
        want "tentaflake-worker --config $tmp/config.json approve " deploy_1 deploy_2
        want "tentaflake-worker --config $tmp/config.json deny deploy_" deploy_1 deploy_2
        want "tentaflake-worker --config $tmp/config.json show " deploy_1 deploy_2 nope_3
        want "tentaflake-worker --config $tmp/config.json approve --wait " deploy_1 deploy_2
        want "tentaflake-worker --config $tmp/config.json approve deploy_1 " # one id only
        want "tentaflake-worker approve " # no config: the binary refuses, nothing is offered
        want "tentaflake-worker --name tfw-no-such-worker-$$ approve " # a name with no config: nothing
        # nobody cannot read the config (0600): nothing, and not a word on stderr
        got=$(comp -u nobody "tentaflake-worker --config $tmp/config.json approve ")
        [ -z "$got" ] && [ ! -s "$tmp/comp.err" ] && ok || bad "as nobody: got [$got], stderr: $(cat "$tmp/comp.err")"
        # ... nor when the config is readable but the state is not (root's 0700)
        chmod 0644 "$tmp/config.json"
        got=$(comp -u nobody "tentaflake-worker --config $tmp/config.json show ")
        [ -z "$got" ] && [ ! -s "$tmp/comp.err" ] && ok || bad "as nobody, readable config: got [$got], stderr: $(cat "$tmp/comp.err")"
else
        echo "completion: $passes passed, $fails failed; SKIP the request ids: they need root (a worker of the test's own)"
        [ "$fails" -eq 0 ] && exit 77 || exit 1
fi

echo "completion: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
