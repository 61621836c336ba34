# SPDX-License-Identifier: MIT
# bash completion for tentaflake-worker (installed as
# share/bash-completion/completions/tentaflake-worker; needs bash-completion's helpers).
# Verbs, each verb's flags, the values of the flags that take a fixed set, file and directory
# names where a flag takes one, and the request ids of approve, deny (pending ones) and show
# (all), read from `tentaflake-worker [--config FILE | --name NAME] list --json`: only when that
# works for this user (the config and the state are root's), and silently nothing otherwise;
# the names of /etc/tentaflake/workers/*.json for --name.
# The ids after submit's --attach (any id the controller's own `list` shows: in the inbox, pending,
# queued, running, and the recent results) and --cancel (only those that can still be stopped: in
# the inbox, pending, queued, running), read from `tentaflake-worker list --json` run as the
# controller (not root, no config), with the --workspace and --results given before them.
# tests/unit/test-completion.sh checks each verb's flags against the binary's --help.

_tentaflake_worker_ids() { # _tentaflake_worker_ids CMD STATE|'' CONFIG-ARGS...: ids, one a line
        local cmd=$1 want=$2
        shift 2
        local all=()
        [ -n "$want" ] || all=(--all)
        # A config named but not readable: the user is not root, say nothing.
        local i
        for ((i = 1; i <= $#; i++)); do
                local j=$((i + 1))
                case ${!i} in
                --config) [ -r "${!j}" ] || return 0 ;;
                --name) [ -r "/etc/tentaflake/workers/${!j}.json" ] || return 0 ;;
                esac
        done
        local t=()
        command -v timeout >/dev/null 2>&1 && t=(timeout 3)
        "${t[@]}" "$cmd" "$@" list --json "${all[@]}" 2>/dev/null </dev/null |
                awk -v want="$want" '
                        /^  "requests": \[/ { inreq = 1; next }
                        inreq && /^  [\]}]/ { inreq = 0 }
                        !inreq { next }
                        /^ *\{/ { id = ""; st = "" }
                        /^ *"id": "/ { id = $0; sub(/^ *"id": "/, "", id); sub(/".*/, "", id) }
                        /^ *"state": "/ { st = $0; sub(/^ *"state": "/, "", st); sub(/".*/, "", st) }
                        /^ *\}/ { if (id ~ /^[a-z0-9][a-z0-9_-]*$/ && (want == "" || st == want)) print id }'
}

_tentaflake_worker_ctl_ids() { # _tentaflake_worker_ctl_ids CMD attach|cancel [--workspace DIR] [--results DIR]
        local cmd=$1 want=$2
        shift 2
        # As root, `list` is the operator's (it needs a config): the controller's ids are not there.
        [ "${EUID:-0}" -ne 0 ] || return 0
        local t=()
        command -v timeout >/dev/null 2>&1 && t=(timeout 3)
        # `list --json` is jansson's, indented by 2 with its keys in order: each row's keys on lines
        # of their own, a string's newlines and quotes escaped. Bash reads it, line by line, with
        # globs (a regex costs 0.1 ms a line); an id is taken only in the form a request id has
        # (^[a-z0-9][a-z0-9_-]{0,63}$), and for --cancel only in a state it can be stopped from
        # (the recent results have ended: none for --cancel). mapfile reads the pipe by blocks,
        # where read takes a byte at a time.
        local line lines v part="" id="" an=abcdefghijklmnopqrstuvwxyz0123456789
        mapfile -t lines < <("${t[@]}" "$cmd" list --json "$@" 2>/dev/null </dev/null)
        for line in "${lines[@]}"; do
                case $line in
                '  "inbox": ['* | '  "active": ['* | '  "recent": ['*)
                        part=${line#  \"}
                        part=${part%%\"*}
                        id="" ;;
                '  '[!\ ]*) # a key of the top level, or the end of a list
                        part="" ;;
                '      "id": "'*)
                        v=${line#'      "id": "'}
                        v=${v%,}
                        id=""
                        [[ -n $part && $v = *\" ]] || continue
                        v=${v%\"}
                        [[ $v = [${an}]* && $v != *[!${an}_-]* && ${#v} -le 64 ]] || continue
                        id=$v
                        [ "$part" = recent ] && [ "$want" = attach ] && printf '%s\n' "$id" ;;
                '      "state": "'*)
                        v=${line#'      "state": "'}
                        case ${v%,} in
                        'inbox"' | 'pending"' | 'queued"' | 'running"')
                                [ -n "$id" ] && [ "$part" != recent ] && printf '%s\n' "$id" ;;
                        esac
                        id="" ;;
                esac
        done
}

_tentaflake_worker_takes_value() { # FLAG VERB
        case $1 in
        --apply) # shell's and harness's take auto or review; submit's none
                [ "${2:-}" = shell ] || [ "${2:-}" = harness ]
                return ;;
        --config | --name | --key | --token-file | --out | --runsc | --workspace | --results | --state-dir | \
        --mount | --sandbox | --class | --log-level | --platform | --expect-sha256 | --timeout | -c | --prefix-program | \
        --reason | --identity | --server | --image | --engine-runtime | --label | --id | --wait-timeout | --cancel | --attach | --recent | \
        --server-socket | --system-mounts-identity | --*-secs | --*-mb | --*-kb | --max-pids | \
        --default-pids | --concurrency | --sandbox-uid | --sandbox-gid | --open-files | --allow-host)
                return 0 ;;
        esac
        return 1
}

_tentaflake_worker() {
        local cur prev words cword
        _init_completion || return

        local verbs="run drain approve deny list show doctor gc audit check-config cache store keygen serve
                submit apply mcp shell harness help version"
        local global="--config --name --version --help -h"
        local -A flags=(
                [run]="--help" [drain]="--help"
                [approve]="--expect-sha256 --wait --timeout --json --help"
                [deny]="--reason --json --help"
                [list]="--json --all --workspace --results --recent --help"
                [show]="--json --help"
                [doctor]="--json --help"
                [gc]="--scheduled --json --help"
                [audit]="--json --help" [cache]="--help" [store]="--help" [check-config]="--help"
                [keygen]="--out --identity --help"
                [serve]="--server --key --check --json --sandbox --image --engine-runtime --label --concurrency
                        --max-timeout-secs --max-cpu-secs --max-memory-mb --max-pids
                        --default-timeout-secs --default-cpu-secs --default-memory-mb --default-pids
                        --output-mb --tmp-mb --max-checkout-mb --allow-network --allow-host --mount
                        --no-system-mounts --system-mounts-identity --lease-secs --wait-secs
                        --retry-after-secs --backoff-max-secs --client-timeout-secs
                        --shutdown-grace-secs --state-dir --runsc --platform --warm-secs
                        --sandbox-uid --sandbox-gid --token-file --result-tail-kb --open-files
                        --file-size-mb --engine-timeout-secs --log-level --server-socket --help"
                [submit]="--workspace --class --timeout --reason --id --wait --no-wait --json --apply --raw --wait-timeout --results --cancel --attach --help"
                [apply]="--workspace --results --dry-run --diff --allow-git --help"
                [mcp]="--workspace --results --help"
                [shell]="--apply --timeout --workspace --results -c --help"
                [harness]="--apply --dry-run --remove --workspace --prefix-program --help"
        )
        local -A subverbs=([audit]="verify" [cache]="clear" [store]="mount remove" [harness]="claude-code codex")

        # The verb, its first operand, and the options that select the config (passed on to
        # `list --json`; TENTAFLAKE_WORKER_CONFIG reaches it by itself) or, for the controller's
        # own list, the workspace and its results (a leading ~ expanded; a value still quoted is
        # passed as written, never evaluated); after submit's `--` the rest is a command line of
        # its own.
        local i verb="" operand="" cfg=() site=()
        for ((i = 1; i < cword; i++)); do
                case ${words[i]} in
                --config | --name)
                        cfg+=("${words[i]}" "${words[i + 1]}")
                        i=$((i + 1)) ;;
                --workspace | --results)
                        if ((i + 1 < cword)); then
                                local v=${words[i + 1]}
                                [[ $v = \~ || $v = \~/* ]] && v=$HOME${v#\~}
                                site+=("${words[i]}" "$v")
                        fi
                        i=$((i + 1)) ;;
                --)
                        if [ "$verb" = submit ] || [ "$verb" = shell ]; then
                                _command_offset $((i + 1))
                                return
                        fi ;;
                -*)
                        # a flag that takes a value: skip the value
                        _tentaflake_worker_takes_value "${words[i]}" "$verb" && i=$((i + 1)) ;;
                *)
                        if [ -z "$verb" ]; then
                                verb=${words[i]}
                        elif [ -z "$operand" ]; then
                                operand=${words[i]}
                        fi ;;
                esac
        done

        # A flag's value.
        case $prev in
        --config | --key | --token-file | --out | --runsc | --prefix-program)
                _filedir
                return ;;
        --workspace | --results | --state-dir)
                _filedir -d
                return ;;
        --mount)
                _filedir
                return ;;
        --name)
                # the configurations the units use, as far as this user may list them
                local n names=()
                for n in /etc/tentaflake/workers/*.json; do
                        [ -e "$n" ] || continue
                        n=${n##*/}
                        names+=("${n%.json}")
                done
                COMPREPLY=($(compgen -W "${names[*]}" -- "$cur"))
                return ;;
        --sandbox)
                COMPREPLY=($(compgen -W "runsc runc docker podman" -- "$cur"))
                return ;;
        --class)
                COMPREPLY=($(compgen -W "local-reversible external-reversible irreversible financial production communicative privileged" -- "$cur"))
                return ;;
        --log-level)
                COMPREPLY=($(compgen -W "error warning notice info debug" -- "$cur"))
                return ;;
        --platform)
                COMPREPLY=($(compgen -W "systrap ptrace kvm" -- "$cur"))
                return ;;
        --apply)
                if [ "$verb" = shell ] || [ "$verb" = harness ]; then
                        COMPREPLY=($(compgen -W "auto review" -- "$cur"))
                        return
                fi ;;
        --attach | --cancel)
                if [ "$verb" = submit ]; then
                        local mode=${prev#--}
                        COMPREPLY=($(compgen -W "$(_tentaflake_worker_ctl_ids "${words[0]}" "$mode" "${site[@]}")" -- "$cur"))
                fi
                return ;;
        esac
        # any other flag that takes a value: nothing to offer
        _tentaflake_worker_takes_value "$prev" "$verb" && return

        if [ -z "$verb" ]; then
                if [[ $cur = -* ]]; then
                        COMPREPLY=($(compgen -W "$global" -- "$cur"))
                else
                        COMPREPLY=($(compgen -W "$verbs" -- "$cur"))
                fi
                return
        fi
        if [ -n "${subverbs[$verb]:-}" ] && [ -z "$operand" ] && [[ $cur != -* ]]; then
                COMPREPLY=($(compgen -W "${subverbs[$verb]}" -- "$cur"))
                return
        fi
        if [[ $cur = -* ]]; then
                COMPREPLY=($(compgen -W "${flags[$verb]:-}" -- "$cur"))
                return
        fi
        case $verb in
        help)
                [ -n "$operand" ] || COMPREPLY=($(compgen -W "$verbs" -- "$cur")) ;;
        approve | deny | show)
                if [ -z "$operand" ]; then
                        local state=pending
                        [ "$verb" = show ] && state=
                        COMPREPLY=($(compgen -W "$(_tentaflake_worker_ids "${words[0]}" "$state" "${cfg[@]}")" -- "$cur"))
                fi ;;
        esac
} && complete -F _tentaflake_worker tentaflake-worker
