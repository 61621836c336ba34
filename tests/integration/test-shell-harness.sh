#!/usr/bin/env bash
# The harness's own shell through the worker (issue 50; docs/controller.md, "Make the worker the
# agent's only shell"), against the real daemon and real runsc capsules, with the real Claude
# Code (@anthropic-ai/claude-code 2.1.197, installed with npm into the test's directory).
# `shell` is driven with exactly the argument shapes that package builds under
# CLAUDE_CODE_SHELL_PREFIX (its Bash tool's string, a shell-form hook, an MCP server's start;
# the pieces are checked against the installed binary first), as the controller (uid 10000):
# the command runs in a capsule (its request in `list`, gVisor's kernel), its output and exit
# status come back, its changes land (auto) or are listed (review), the cwd file names the
# host's directory (never written through a link, never for a directory outside the
# workspace), a change to a harness's settings is refused, `tentaflake-worker mcp` starts
# unwrapped. Then `harness claude-code`: `claude mcp list` says the worker's server is
# Connected, started through the prefix; `--remove` leaves the files as they were, byte for
# byte; `harness codex` likewise.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker
command -v setpriv >/dev/null || { echo "SKIP: setpriv (util-linux) is not installed"; exit 77; }
command -v npm >/dev/null || { echo "SKIP: npm is not installed"; exit 77; }

dir=$(test_dir i50-shell)
chmod 0755 "$dir"
cwdfiles=()
trap 'rm -f "${cwdfiles[@]}"; worker_cleanup "$dir"' EXIT
new_worker "$dir" ', "limits": {"default_timeout_seconds": 60, "max_timeout_seconds": 120}'
ws="$dir/ws"
mkdir -p "$dir/bin" "$dir/out" "$dir/home" "$ws/.tentaflake-worker"
install -m 0755 "${TFW_CONTROLLER_BIN:-$BIN}" "$dir/bin/tentaflake-worker"
# The shell prefix as `make install` puts it: a link, root's, in directories only root can write.
ln -s tentaflake-worker "$dir/bin/tentaflake-worker-shell"
chown 10000:10000 "$dir/out" "$dir/home" "$ws/.tentaflake-worker"
chmod 0700 "$ws/.tentaflake-worker"
CTL_BIN="$dir/bin/tentaflake-worker"

echo "-- [$SECONDS s] npm install @anthropic-ai/claude-code@2.1.197"
mkdir -p "$dir/npm"
if ! npm install --prefix "$dir/npm" --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@2.1.197 \
        >"$dir/npm.log" 2>&1; then
        cat "$dir/npm.log"
        echo "SKIP: cannot install @anthropic-ai/claude-code 2.1.197 from the npm registry"
        exit 77
fi
CLAUDE="$dir/npm/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
# The pieces of the strings below, as the pinned package builds them (its Bash tool's
# buildExecCommand, the prefix's split at the last " -", an MCP start's argv in one word); and
# how it reads the deny rules harness writes: every tool that edits a file is held to Edit
# rules, and a project rule's "/x" is x below the project's directory (its cwd).
for piece in 'b.push(`source ${Qa([v])} 2>/dev/null || true`)' \
        '"{ shopt -u extglob || setopt NO_EXTENDED_GLOB NO_BARE_GLOB_QUAL; } >/dev/null 2>&1 || true"' \
        'b.push(`eval ${y}`),b.push(`pwd -P >| ${Qa([f])}`);let A=b.join(" && ")' \
        '`claude-${a.id}-cwd`' 'Math.floor(Math.random()*65536).toString(16).padStart(4,"0")' \
        'let n=e.lastIndexOf(" -");if(n>0)' 'return`${Qa([e])} ${Qa([t])}`' \
        'M=process.env.CLAUDE_CODE_SHELL_PREFIX?[Qa([t.command,...t.args])]:t.args' \
        'case"edit":return Ca;' 'Ca="Edit"' 'let m=Kv(f,n,"edit","deny");if(m)return{behavior:"deny"' \
        'else if(e.startsWith(Jme))return{relativePattern:e,root:Dim(t)}' \
        'case"projectSettings":case"localSettings":return p1.resolve(t.cwd)'; do
        check "the pinned package builds: $piece" grep -qaF -- "$piece" "$CLAUDE"
done

start_daemon "$dir" || exit 1

# qa WORD: the package's quoting (Qa): a safe word as it is, else in '...' with ' as '"'"'.
qa() { python3 -c 'import re,sys
s = sys.argv[1]
print(s if re.fullmatch(r"[A-Za-z0-9_./:=@+,-]+", s) else "\x27" + s.replace("\x27", "\x27\"\x27\"\x27") + "\x27")' "$1"; }
# as_ctl CWD CMD...: as the controller, no privilege, a clean environment.
as_ctl() {
        local cwd=$1; shift
        (cd "$cwd" && setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs \
                env -i PATH=/usr/bin:/bin HOME="$dir/home" "$@")
}
# bash_call NAME CWD PREFIX CMD CWDFILE: the Bash tool's call: `bash -c "PREFIX STRING"` with
# STRING as the package builds it (snapshot, extglob off, eval of the command, pwd -P into
# its cwd file); stdout, stderr, status in $dir/out/NAME.*.
snapshot="$dir/home/.claude/shell-snapshots/snapshot-bash-1765100000000-abc123.sh"
claude_string() { # claude_string CMD CWDFILE
        echo "source $(qa "$snapshot") 2>/dev/null || true && { shopt -u extglob || setopt NO_EXTENDED_GLOB NO_BARE_GLOB_QUAL; } >/dev/null 2>&1 || true && eval $(qa "$1") < /dev/null && pwd -P >| $(qa "$2")"
}
bash_call() {
        local name=$1 cwd=$2 prefix=$3 cmd=$4 cwdfile=$5
        as_ctl "$cwd" bash -c "$(qa "$prefix") $(qa "$(claude_string "$cmd" "$cwdfile")")" >"$dir/out/$name.out" 2>"$dir/out/$name.err"
        echo $? >"$dir/out/$name.rc"
}
rc_is() { # rc_is NAME WANT
        local got; got=$(cat "$dir/out/$1.rc")
        if [ "$got" = "$2" ]; then passes=$((passes + 1)); else
                echo "FAIL: $1: exit status $got, want $2"; sed 's/^/    /' "$dir/out/$1.err"; fails=$((fails + 1)); fi
}
out_has() { grep -q -- "$2" "$dir/out/$1.out"; }
err_has() { grep -q -- "$2" "$dir/out/$1.err"; }
# hctl NAME ARGS...: `harness ARGS` as the controller in the workspace; it must exit 0.
hctl() {
        local name=$1; shift
        as_ctl "$ws" "$CTL_BIN" harness "$@" >"$dir/out/$name.out" 2>"$dir/out/$name.err"
        echo $? >"$dir/out/$name.rc"
        rc_is "$name" 0
}
new_cwdfile() { local f; f=/tmp/claude-$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')-cwd; rm -f "$f"; cwdfiles+=("$f"); echo "$f"; }
listed() { # listed PREFIX: a recent request of the controller's list whose command starts so
        as_ctl "$ws" "$CTL_BIN" list --json --recent 100 >"$dir/out/list.json" &&
                python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
sys.exit(not any(x["command"].startswith(sys.argv[2]) for x in r["recent"]))' "$dir/out/list.json" "$1"; }
# A snapshot that exists on the host: the capsule has no such file, and the string's own
# `2>/dev/null || true` keeps that harmless.
mkdir -p "$(dirname "$snapshot")" && echo 'echo SNAPSHOT-SOURCED' >"$snapshot" && chown -R 10000:10000 "$dir/home/.claude"
# The prefix as `harness claude-code` names it: the link, TENTAFLAKE_SHELL_APPLY from settings'
# env (unset here: auto).
prefix="$dir/bin/tentaflake-worker-shell"
printf '#!/bin/sh\nTENTAFLAKE_SHELL_APPLY=review exec %s "$@"\n' "$prefix" >"$dir/bin/prefix-review"
chmod 0755 "$dir/bin/prefix-review"
mkdir -p "$ws/sub"; chown 10000:10000 "$ws/sub"

echo "-- [$SECONDS s] a Bash call: in a capsule, output, status, changes applied, the cwd file"
f=$(new_cwdfile)
bash_call auto "$ws/sub" "$prefix" 'mkdir -p deeper && cd deeper && echo made >made.txt && echo "in:$(pwd) kernel:$(uname -r)" && [[ a == a ]]' "$f"
rc_is auto 0
check "the Bash call's output came back, from /work/sub/deeper" out_has auto "^in:/work/sub/deeper kernel:"
check "it ran in gVisor (its kernel is not the host's)" test "$(sed -n 's/.*kernel://p' "$dir/out/auto.out")" != "$(uname -r)"
check "the snapshot was not sourced, and said nothing" bash -c "! grep -q SNAPSHOT $dir/out/auto.out $dir/out/auto.err"
check "its change landed in the workspace (auto)" test "$(cat "$ws/sub/deeper/made.txt" 2>/dev/null)" = made
check "the cwd file names the host's directory" test "$(cat "$f" 2>/dev/null)" = "$ws/sub/deeper"
check "the cwd file is the controller's" test "$(stat -c %u "$f" 2>/dev/null)" = 10000
check "the record of the directory is not listed as an artifact" bash -c "! grep -q tentaflake-worker-shell-cwd $dir/out/auto.err"
check "the request is in the controller's list, run with bash -c" listed "bash -c "

as_ctl "$ws" env TENTAFLAKE_SHELL_APPLY=later "$prefix" 'echo ran' >"$dir/out/badmode.out" 2>"$dir/out/badmode.err"
echo $? >"$dir/out/badmode.rc"
rc_is badmode 125
check "TENTAFLAKE_SHELL_APPLY neither auto nor review: nothing ran, said" \
        sh -c "! grep -q ran '$dir/out/badmode.out' && grep -q 'is auto or review' '$dir/out/badmode.err'"

echo "-- [$SECONDS s] a Bash call that fails: its status, no cwd file"
f=$(new_cwdfile)
bash_call fail "$ws" "$prefix" 'echo failing; exit 3' "$f"
rc_is fail 3
check "its output came back" out_has fail "^failing$"
check "no cwd file (the string stopped before its last step)" test ! -e "$f"
check "a command that changed nothing: nothing on stderr" test ! -s "$dir/out/fail.err"

echo "-- [$SECONDS s] --apply review: the changes listed in one line, not applied"
f=$(new_cwdfile)
bash_call review "$ws" "$dir/bin/prefix-review" 'echo r >review.txt' "$f"
rc_is review 0
check "review: not applied" test ! -e "$ws/review.txt"
check "review: one line says what changed and how to apply it" \
        test "$(grep -c "the job changed 1 path(s).*tentaflake-worker apply shell-" "$dir/out/review.err")" = 1
check "review: the cwd file names the workspace" test "$(cat "$f" 2>/dev/null)" = "$ws"

echo "-- [$SECONDS s] the cwd file: never through a link, never a directory outside the workspace"
f=$(new_cwdfile)
echo victim >"$dir/home/victim"; chown 10000:10000 "$dir/home/victim"
ln -s "$dir/home/victim" "$f"
bash_call link "$ws" "$prefix" 'true' "$f"
rc_is link 0
check "a link at the cwd file's name: not followed" test "$(cat "$dir/home/victim")" = victim
check "a link at the cwd file's name: said" err_has link "is not this user's regular file\|a link is never followed"
f=$(new_cwdfile)
mkfifo -m 0600 "$f"; chown 10000:10000 "$f"
as_ctl "$ws" timeout -k 5 90 bash -c "$(qa "$prefix") $(qa "$(claude_string true "$f")")" >"$dir/out/fifo.out" 2>"$dir/out/fifo.err"
echo $? >"$dir/out/fifo.rc"
rc_is fifo 0
check "a FIFO at the cwd file's name: not waited on, said" err_has fifo "is not this user's regular file\|No such device or address"
f=$(new_cwdfile)
bash_call outside "$ws" "$prefix" 'cd /tmp' "$f"
rc_is outside 0
check "a job ending outside /work: no cwd file" test ! -e "$f"
check "a job ending outside /work: said" err_has outside "not a directory of /work"

echo "-- [$SECONDS s] a Bash call the harness gives up on (SIGTERM, as Claude Code sends): its job cancelled"
f=$(new_cwdfile)
(cd "$ws" && exec setpriv --reuid=10000 --regid=10000 --clear-groups --no-new-privs env -i PATH=/usr/bin:/bin \
        HOME="$dir/home" "$prefix" "$(claude_string 'echo started; sleep 120' "$f")") >"$dir/out/term.out" 2>"$dir/out/term.err" &
pid=$!
started() { grep -q '^started$' "$dir/out/term.out"; }
check "the long command started (its output came live)" wait_for 60 started
kill -TERM "$pid"
wait "$pid"; echo $? >"$dir/out/term.rc"
rc_is term 143
check "shell said its job is cancelled" err_has term "its job is cancelled"
id=$(grep -o 'shell-[0-9a-f]\{16\}' "$dir/out/term.err" | head -n 1)
check "the job ended cancelled, not at its timeout" wait_result "$dir" "${id:-none}" 60
check "its result says cancelled" test "$(result_field "$dir" "${id:-none}" status 2>/dev/null)" = cancelled

echo "-- [$SECONDS s] a job that changes a harness's settings: refused, even with --apply auto"
mkdir -p "$ws/.claude"; echo '{}' >"$ws/.claude/settings.json"; chown -R 10000:10000 "$ws/.claude"
f=$(new_cwdfile)
bash_call settings "$ws" "$prefix" 'echo "{\"env\":{}}" >.claude/settings.json' "$f"
rc_is settings 125
check "the settings file is unchanged" test "$(cat "$ws/.claude/settings.json")" = '{}'
check "the refusal names it" err_has settings "refused: '.claude/settings.json': a harness's settings"
rm -rf "$ws/.claude"

echo "-- [$SECONDS s] a hook: \`sh -c \"PREFIX 'HOOK'\"\`, in a capsule"
as_ctl "$ws" sh -c "$(qa "$prefix") $(qa 'echo hook-ran; exit 2')" >"$dir/out/hook.out" 2>"$dir/out/hook.err"
echo $? >"$dir/out/hook.rc"
rc_is hook 2
check "the hook's output came back" out_has hook "^hook-ran$"
check "the hook ran in a capsule (sh -c, in list)" listed "sh -c 'echo hook-ran"

echo "-- [$SECONDS s] an MCP start: PREFIX 'COMMAND ARG', the worker's own mcp unwrapped"
init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
before=$(ls "$dir/results" | grep -c '^shell-.*[^n]$')
echo "$init" | as_ctl "$ws" "$prefix" "$(qa "$CTL_BIN") mcp" >"$dir/out/mcp.out" 2>"$dir/out/mcp.err"
echo $? >"$dir/out/mcp.rc"
rc_is mcp 0
check "the worker's mcp answered initialize" out_has mcp '"serverInfo"'
check "no request was made for it" test "$(ls "$dir/results" | grep -c '^shell-.*[^n]$')" = "$before"
echo "$init" | as_ctl "$ws" "$prefix" "$(qa "$CTL_BIN") mcp --results /x" >"$dir/out/mcp2.out" 2>"$dir/out/mcp2.err"
check "anything but the exact argv is not passed through" bash -c "! grep -q serverInfo $dir/out/mcp2.out"

echo "-- [$SECONDS s] harness claude-code: claude mcp list says Connected, through the prefix"
printf '{\n  "mcpServers": {"other": {"command": "/bin/false"}}\n}' >"$ws/.mcp.json"
chown 10000:10000 "$ws/.mcp.json"
cp -p "$ws/.mcp.json" "$dir/mcp.json.before"
hctl dry claude-code --dry-run
check "--dry-run: prints the prefix it would set" out_has dry "CLAUDE_CODE_SHELL_PREFIX"
check "--dry-run: writes nothing" cmp -s "$ws/.mcp.json" "$dir/mcp.json.before"
check "--dry-run: no settings file" test ! -e "$ws/.claude"
# A prefix the controller could rewrite is refused, nothing written: a build in a directory of
# its own, a link (in root's directory) to such a program, a --prefix-program it owns.
mkdir -p "$dir/home/devbin" "$dir/bin2"
install -m 0755 "$CTL_BIN" "$dir/home/devbin/tentaflake-worker"
ln -s tentaflake-worker "$dir/home/devbin/tentaflake-worker-shell"
chown -R 10000:10000 "$dir/home/devbin"
ln -s "$dir/home/devbin/tentaflake-worker" "$dir/bin2/tentaflake-worker-shell"
install -m 0755 "$CTL_BIN" "$dir/bin2/tentaflake-worker"
refused() { # refused NAME WHY ARGS...: harness ARGS exits 1, says WHY, writes nothing
        local name=$1 why=$2; shift 2
        as_ctl "$ws" "$@" >"$dir/out/$name.out" 2>"$dir/out/$name.err"
        echo $? >"$dir/out/$name.rc"
        rc_is "$name" 1
        check "$name: refused, saying so" err_has "$name" "$why"
        check "$name: nothing written" sh -c "test ! -e '$ws/.claude' && cmp -s '$ws/.mcp.json' '$dir/mcp.json.before'"
}
refused devbuild "writable by root only\\|is not root's alone" "$dir/home/devbin/tentaflake-worker" harness claude-code
refused devlink "writable by root only\\|is not root's alone" "$dir/bin2/tentaflake-worker" harness claude-code
refused devflag "writable by root only\\|is not root's alone" "$CTL_BIN" harness claude-code --prefix-program "$dir/home/devbin/tentaflake-worker-shell"
refused noname "ending in 'tentaflake-worker-shell'" "$CTL_BIN" harness claude-code --prefix-program "$dir/bin/tentaflake-worker"
# The script earlier versions wrote as the prefix: removed by harness.
mkdir -p "$ws/.tentaflake-worker/harness" && echo old >"$ws/.tentaflake-worker/harness/claude-code-shell" &&
        chown -R 10000:10000 "$ws/.tentaflake-worker/harness"
hctl harness claude-code
check "harness: says what it wrote" out_has harness "wrote '.claude/settings.json'"
check "harness: the prefix is the program only root can change" \
        test "$(json_get "$ws/.claude/settings.json" 'r["env"]["CLAUDE_CODE_SHELL_PREFIX"]')" = "$prefix"
check "harness: its apply mode beside it" test "$(json_get "$ws/.claude/settings.json" 'r["env"]["TENTAFLAKE_SHELL_APPLY"]')" = auto
check "harness: the file tools may not edit the settings nor the harness state" \
        test "$(json_get "$ws/.claude/settings.json" '" ".join(r["permissions"]["deny"])')" = \
        "Edit(/.claude/settings.json) Edit(/.claude/settings.local.json) Edit(/.mcp.json) Edit(/.tentaflake-worker/harness/**) Edit(/.tentaflake-worker/worker.json)"
check "harness: the old prefix script is gone" test ! -e "$ws/.tentaflake-worker/harness/claude-code-shell"
check "harness: the other server is kept" test "$(json_get "$ws/.mcp.json" 'r["mcpServers"]["other"]["command"]')" = /bin/false
# The prefix notes each start: the test's own program, root's, given as --prefix-program.
touch "$dir/out/prefix.log"; chown 10000:10000 "$dir/out/prefix.log"
mkdir -p "$dir/logbin"
printf '#!/bin/sh\necho "$*" >>%s\nexec %s "$@"\n' "$dir/out/prefix.log" "$prefix" >"$dir/logbin/tentaflake-worker-shell"
chmod 0755 "$dir/logbin/tentaflake-worker-shell"
hctl harness2 claude-code --prefix-program "$dir/logbin/tentaflake-worker-shell"
check "--prefix-program: the prefix is that program" \
        test "$(json_get "$ws/.claude/settings.json" 'r["env"]["CLAUDE_CODE_SHELL_PREFIX"]')" = "$dir/logbin/tentaflake-worker-shell"
printf '{"projects": {"%s": {"hasTrustDialogAccepted": true}}}' "$ws" >"$dir/home/.claude.json"
chown 10000:10000 "$dir/home/.claude.json"
as_ctl "$ws" timeout 120 "$CLAUDE" mcp list >"$dir/out/claude.out" 2>&1
check "claude mcp list: the worker's server is Connected" out_has claude "^tentaflake-worker: .* - ✔ Connected"
# `claude mcp list` takes a project's env only as flag settings (a session takes it from
# .claude/settings.json: below); given so, the prefix wraps that start too.
as_ctl "$ws" timeout 120 "$CLAUDE" --settings "$ws/.claude/settings.json" mcp list >"$dir/out/claude2.out" 2>&1
check "claude --settings .claude/settings.json mcp list: Connected" out_has claude2 "^tentaflake-worker: .* - ✔ Connected"
check "claude --settings .claude/settings.json mcp list: started through the prefix" \
        grep -qxF "$CTL_BIN mcp" "$dir/out/prefix.log"
# A session (claude -p, not logged in: it stops there) starts its MCP servers through the
# prefix from .claude/settings.json itself.
: >"$dir/out/prefix.log"
as_ctl "$ws" timeout 120 "$CLAUDE" -p hello >"$dir/out/session.out" 2>&1
check "a session starts the worker's mcp through the prefix of .claude/settings.json" \
        grep -qxF "$CTL_BIN mcp" "$dir/out/prefix.log"
hctl remove claude-code --remove
check "--remove: .mcp.json byte for byte" cmp -s "$ws/.mcp.json" "$dir/mcp.json.before"
check "--remove: no .claude/ (there was none)" test ! -e "$ws/.claude"
# A settings file the user had, changed after harness wrote it: only harness's keys leave.
mkdir -p "$ws/.claude"; printf '{"model": "x"}\n' >"$ws/.claude/settings.json"; chown -R 10000:10000 "$ws/.claude"
cp -p "$ws/.claude/settings.json" "$dir/settings.before"
hctl h4 claude-code --apply review
check "--apply review: its apply mode says so" test "$(json_get "$ws/.claude/settings.json" 'r["env"]["TENTAFLAKE_SHELL_APPLY"]')" = review
hctl remove2 claude-code --remove
check "--remove: the user's settings byte for byte" cmp -s "$ws/.claude/settings.json" "$dir/settings.before"
hctl h6 claude-code
python3 -c 'import json,sys; p=sys.argv[1]; j=json.load(open(p)); j["theme"]="dark"; open(p,"w").write(json.dumps(j))' "$ws/.claude/settings.json"
hctl remove3 claude-code --remove
check "--remove of a file changed since: says so" out_has remove3 "changed since harness wrote it"
check "--remove of a file changed since: the user's keys stay, harness's go" \
        test "$(json_get "$ws/.claude/settings.json" 'sorted(r.keys())')" = "['model', 'theme']"

# Changed since, then harness again: --remove gives back the file as changed, without harness's keys.
hctl h8 claude-code
python3 -c 'import json,sys; p=sys.argv[1]; j=json.load(open(p)); j["later"]=1; open(p,"w").write(json.dumps(j))' "$ws/.claude/settings.json"
hctl h9 claude-code
hctl remove4 claude-code --remove
check "harness again after a change, then --remove: the change kept, harness's keys gone" \
        test "$(json_get "$ws/.claude/settings.json" 'sorted(r.keys())')" = "['later', 'model', 'theme']"

echo "-- [$SECONDS s] harness codex: its MCP server, its shell switched off; --remove"
hctl codex codex
check "codex: shell_tool = false" grep -qx "shell_tool = false" "$ws/.codex/config.toml"
check "codex: the server's table" grep -qx "\[mcp_servers.tentaflake-worker\]" "$ws/.codex/config.toml"
hctl h12 codex --remove
check "codex --remove: no .codex/ (there was none)" test ! -e "$ws/.codex"

stop_daemon || true
finish
