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
#  - as nobody, who cannot read that config, and as root without a config: no id, no output;
#  - submit --attach and --cancel: the ids of the controller's own `list --json` (issue 35), as the
#    workspace's owner: --attach all it shows (inbox, pending, queued, running, recent results),
#    --cancel only those that can still be stopped; the --workspace and --results given on the
#    line; nothing, and no output, with no workspace, no results directory, as root, or when the
#    list never answers (a binary that hangs: the completion's own timeout ends it).
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
# Options: -u USER[:GROUP] (GROUP nogroup unless given), -C DIR (the directory to run in),
# -b BIN (the binary as the line's first word).
comp() {
        local pre=() dir=$tmp/cwd bin=$BIN
        while :; do
                case $1 in
                -u) pre=(setpriv --reuid="${2%%:*}" --regid="$([[ $2 = *:* ]] && echo "${2#*:}" || echo nogroup)" \
                        --clear-groups --); shift 2 ;;
                -C) dir=$2; shift 2 ;;
                -b) bin=$2; shift 2 ;;
                *) break ;;
                esac
        done
        (cd "$dir" && "${pre[@]}" env -i PATH="$PATH" HOME=/ REPO="$repo" BIN="$bin" LINE="$1" \
                bash --norc --noprofile "$tmp/comp.bash" 2>"$tmp/comp.err")
}
# want [comp's options] LINE EXPECTED...: exactly these candidates (sorted), and nothing on stderr
want() {
        local opts=()
        while [[ $1 = -[uCb] ]]; do opts+=("$1" "$2"); shift 2; done
        local line=$1; shift
        local got exp
        got=$(comp "${opts[@]}" "$line")
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
        # (what completes "--": a one-letter flag, shell's -c, does not start so)
        mapfile -t f < <(jq_py "print('\n'.join(x for x in h['verbs']['$verb'] if x.startswith('--')))")
        first=${verb%% *}
        want "tentaflake-worker $first --" "${f[@]}" --help
done < <(jq_py 'print("\n".join(h["verbs"]))')
want "tentaflake-worker --config worker-a.json approve x --" $(jq_py "print(' '.join(h['verbs']['approve']))") --help
# subcommands and fixed values
want "tentaflake-worker audit " verify
want "tentaflake-worker --config worker-a.json cache " clear
want "tentaflake-worker serve --sandbox " runsc runc docker podman
want "tentaflake-worker serve --log-level w" warning
want "tentaflake-worker submit --class l" local-reversible
want "tentaflake-worker serve --concurrency " # a number: nothing offered
want "tentaflake-worker shell -" $(jq_py "print(' '.join(h['verbs']['shell']))") --help
want "tentaflake-worker shell --apply " auto review
want "tentaflake-worker harness " claude-code codex
want "tentaflake-worker harness claude-code --apply r" review
# submit's --apply takes no value: what follows it is another flag
want "tentaflake-worker submit --apply --wa" --wait --wait-timeout
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

        # submit --attach and --cancel: the ids of the controller's own `list --json`, run as the
        # workspace's owner (10000) from the workspace, its results found by the drain's worker.json.
        # Besides the drain's two pending requests and its rejected one (a result), a request
        # queued and one running (their state files, as the worker writes them) and one still in
        # the inbox, and a state file beside its result (ended: the result counts).
        res=$tmp/results
        for s in q_4:queued run_5:running nope_3:running; do
                printf '{"version": 1, "id": "%s", "state": "%s", "since": "2026-12-01T09:00:00Z"}\n' \
                        "${s%%:*}" "${s#*:}" >"$res/${s%%:*}.state.json"
        done
        printf '{"version": 1, "id": "new_6", "argv": ["true"]}\n' >"$inbox/new_6.json"
        chown 10000:10000 "$inbox/new_6.json"
        chmod 0640 "$res"/*.state.json
        chgrp "$(stat -c %g "$res")" "$res"/*.state.json
        ctl=(-u 10000:10000 -C "$tmp/ws")
        (cd "$tmp/ws" && setpriv --reuid=10000 --regid=10000 --clear-groups "$BIN" list >"$tmp/list.out" 2>&1) ||
                bad "the controller's list of the test's workspace failed: $(cat "$tmp/list.out")"
        want "${ctl[@]}" "tentaflake-worker submit --attach " deploy_1 deploy_2 nope_3 q_4 run_5 new_6
        want "${ctl[@]}" "tentaflake-worker submit --cancel " deploy_1 deploy_2 q_4 run_5 new_6
        want "${ctl[@]}" "tentaflake-worker submit --cancel d" deploy_1 deploy_2
        want "${ctl[@]}" "tentaflake-worker submit --json --attach n" nope_3 new_6
        want "${ctl[@]}" "tentaflake-worker submit --cancel deploy_1 " # an id given: nothing more
        # --workspace and --results given before them, from a directory that is no workspace;
        # another results directory (the test's own, with one request running and one ended)
        want -u 10000:10000 "tentaflake-worker submit --workspace $tmp/ws --cancel " deploy_1 deploy_2 q_4 run_5 new_6
        mkdir -p "$tmp/res2/old_7"
        printf '{"version": 1, "id": "live_8", "state": "running", "since": "2026-12-01T09:00:00Z"}\n' >"$tmp/res2/live_8.state.json"
        printf '{"version": 1, "id": "old_7", "status": "succeeded", "exit_code": 0, "finished_at": "2026-12-01T09:00:00Z"}\n' \
                >"$tmp/res2/old_7/result.json"
        chmod -R a+rX "$tmp/res2"
        want -u 10000:10000 "tentaflake-worker submit --workspace $tmp/ws --results $tmp/res2 --attach " live_8 old_7 new_6
        want -u 10000:10000 "tentaflake-worker submit --results $tmp/res2 --workspace $tmp/ws --cancel " live_8 new_6
        want -u 10000:10000 -C "$tmp/ws" "tentaflake-worker submit --results $tmp/res2 --cancel " live_8 new_6
        # nothing answers: no workspace, a results directory that is not there, root (whose list
        # is the operator's): nothing offered, not a word on stderr
        want -u 10000:10000 "tentaflake-worker submit --attach "
        want -u 10000:10000 -C "$tmp/ws" "tentaflake-worker submit --results $tmp/no-such-dir --cancel "
        want -C "$tmp/ws" "tentaflake-worker submit --attach "
        # what is taken from a list's JSON: ids in the form of a request id, in their part (the
        # top level's other keys, a command's text, a state that cannot be stopped, never)
        cat >"$tmp/fake-list" <<'SH'
#!/bin/sh
[ "$1 $2" = "list --json" ] || exit 2
cat <<'JSON'
{
  "inbox": [
    {
      "id": "in_1",
      "state": "inbox",
      "command": "x\"\n      \"id\": \"evil_1\",\n      \"state\": \"running\","
    }
  ],
  "active": [
    {
      "id": "Bad_2",
      "state": "running"
    },
    {
      "id": "done_3",
      "state": "succeeded"
    },
    {
      "id": "-dash",
      "state": "queued"
    },
    {
      "id": "q_4",
      "state": "queued"
    }
  ],
  "recent": [
    {
      "id": "r_5",
      "status": "failed",
      "state": "running"
    },
    {
      "id": "$(touch pwned)",
      "status": "failed"
    }
  ],
  "recent_more": 0,
  "elsewhere": [
    {
      "id": "o_6",
      "state": "running"
    }
  ]
}
JSON
SH
        chmod 0755 "$tmp/fake-list"
        want -u 10000:10000 -b "$tmp/fake-list" "tentaflake-worker submit --attach " in_1 q_4 r_5
        want -u 10000:10000 -b "$tmp/fake-list" "tentaflake-worker submit --cancel " in_1 q_4
        # a list that never answers: the completion gives up (timeout 3 s), offering nothing
        printf '#!/bin/sh\nexec sleep 600\n' >"$tmp/hang"
        chmod 0755 "$tmp/hang"
        if got=$(timeout 60 bash -c "$(declare -f comp); tmp='$tmp' repo='$repo' BIN='$BIN'; comp -u 10000:10000 -b '$tmp/hang' 'tentaflake-worker submit --attach '"); then
                [ -z "$got" ] && [ ! -s "$tmp/comp.err" ] && ok || bad "a list that hangs: got [$got], stderr: $(cat "$tmp/comp.err")"
        else
                bad "a list that hangs: the completion did not give up within 60 s"
        fi
else
        echo "completion: $passes passed, $fails failed; SKIP the request ids: they need root (a worker of the test's own)"
        [ "$fails" -eq 0 ] && exit 77 || exit 1
fi

echo "completion: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
