#!/usr/bin/env bash
# The command line of contract section 1: exit codes (0 ok, 1 failed, 2 usage), one-line
# errors naming the object and the reason, --help for the program and every verb, and
# config validation before any verb runs.
set -uo pipefail
BIN=${BUILD:-build}/tentaflake-worker
# As root, not below /tmp: the worker refuses a state_dir whose ancestors anyone but root can
# write (common/root-dir.h), and run and drain must get past that to the workspace check below.
if [ "$(id -u)" -eq 0 ]; then
        mkdir -p -m 0755 /run/tentaflake-tests && tmp=$(mktemp -d /run/tentaflake-tests/cli.XXXXXX)
else
        tmp=$(mktemp -d)
fi
# run and drain make the worker's runsc root below /run before they look at the workspace
# (orchestrator/dirs.h): removed again when empty. The worker's name is this run's own (8 hex
# digits of its directory), never a real worker's or another run's.
name=cli-$(printf %s "$tmp" | sha256sum | cut -c1-8)
trap 'rm -rf "$tmp"; rmdir "/run/tentaflake-worker-$name/runsc" "/run/tentaflake-worker-$name" 2>/dev/null' EXIT
fails=0 passes=0

# expect CODE PATTERN -- ARGS...: exit status CODE and stdout+stderr matching PATTERN.
expect() {
        local code=$1 pattern=$2; shift 3
        local out rc
        out=$(timeout 60 "$BIN" "$@" 2>&1); rc=$? # bounded: a check that is not refused would serve forever
        if [ "$rc" != "$code" ] || ! grep -qE -- "$pattern" <<<"$out"; then
                echo "FAIL: tentaflake-worker $* -> exit $rc (want $code), output:"
                sed 's/^/    /' <<<"$out"
                echo "    (wanted /$pattern/)"
                fails=$((fails + 1))
        else
                passes=$((passes + 1))
        fi
}

cat >"$tmp/good.json" <<JSON
{"version": 1, "name": "$name", "workspace": "$tmp/ws", "container_uid": 10000, "container_gid": 10000,
 "state_dir": "$tmp/state", "results_dir": "$tmp/results"}
JSON
cat >"$tmp/badkey.json" <<JSON
{"version": 1, "name": "$name", "workspace": "$tmp/ws", "container_uid": 10000, "container_gid": 10000,
 "limits": {"memroy": "2g"}}
JSON
cat >"$tmp/badsize.json" <<JSON
{"version": 1, "name": "$name", "workspace": "$tmp/ws", "container_uid": 10000, "container_gid": 10000,
 "limits": {"memory": "2x"}}
JSON
mkfifo "$tmp/fifo"

expect 0 '^tentaflake-worker [0-9]+\.[0-9]+\.[0-9]+$' -- --version
expect 0 'Usage: tentaflake-worker \[--config FILE \| --name NAME\] COMMAND' -- --help
expect 0 'Usage: tentaflake-worker \[--config FILE \| --name NAME\] COMMAND' -- -h
expect 0 'Usage: tentaflake-worker \[--config FILE \| --name NAME\] COMMAND' -- help
expect 0 'Usage: tentaflake-worker .*approve ID' -- help approve
expect 0 '^tentaflake-worker [0-9]+\.[0-9]+\.[0-9]+$' -- version
expect 0 'Usage: tentaflake-worker \[--config FILE \| --name NAME\] COMMAND' -- help --help
expect 0 'Usage: tentaflake-worker version' -- version --help
# A mistyped verb gets the one it most likely meant (issue 23 item 4).
expect 2 "unknown command 'lsit'; did you mean 'list'\?" -- lsit
expect 2 "unknown command 'aprove'; did you mean 'approve'\?" -- aprove
expect 2 "unknown command 'chec'; did you mean 'check-config'\?" -- chec
expect 2 "help: unknown command 'shwo'; did you mean 'show'\?" -- help shwo
for v in run drain approve deny list show doctor gc audit cache check-config keygen serve submit mcp; do
        expect 0 "Usage: tentaflake-worker .*$v" -- "$v" --help
done
expect 2 'Usage:' --
# cache clear (issue 20): its subcommand checked before anything else; no cache configured refused.
expect 2 "cache: missing the subcommand \(clear\)" -- --config "$tmp/good.json" cache
expect 2 "cache: unknown subcommand 'flush' \(only clear\)" -- --config "$tmp/good.json" cache flush
# The controller's verbs (issue 15): no --config, usage errors 2, their own failures 125.
expect 0 'Exit status: the job.s exit code; 124 timed out; 128\+N' -- submit --help
expect 0 'tools:|Tools:' -- mcp --help
expect 2 "submit: this command does not take --config" -- --config "$tmp/good.json" submit -- true
expect 2 "mcp: this command does not take --config" -- --config "$tmp/good.json" mcp
expect 2 "submit: missing the command to run" -- submit
expect 2 "submit: missing the command to run" -- submit --class irreversible --
expect 2 "submit: unknown option '--bogus'" -- submit --bogus -- true
expect 2 "submit: option '--timeout' needs a value" -- submit --timeout
expect 2 "submit: --json prints the result" -- submit --json --no-wait -- true
expect 2 "mcp: unexpected argument 'x'" -- mcp x
expect 125 "submit: workspace '$tmp/nowhere': No such file" -- submit --workspace "$tmp/nowhere" -- true
expect 125 "submit: cannot open '$tmp/.tentaflake-worker'" -- submit --workspace "$tmp" -- true
expect 2 "unknown command 'frobnicate'" -- frobnicate
expect 2 "unknown option '--bogus'" -- --bogus list
expect 2 "option '--config' needs a value" -- --config
expect 2 'list: no configuration: give --config FILE or --name NAME, or set TENTAFLAKE_WORKER_CONFIG' -- list
expect 2 "give one of --config and --name, once" -- --config "$tmp/good.json" --name demo list
expect 2 "give one of --config and --name, once" -- --config "$tmp/good.json" list --config "$tmp/good.json"
expect 2 "list: --name 'Bad' is not a worker name" -- list --name Bad
expect 1 "config '/etc/tentaflake/workers/nosuchworker.json': .*No such file" -- --name nosuchworker list
expect 1 "config '/etc/tentaflake/workers/nosuchworker.json': .*No such file" -- list --name=nosuchworker
# --config after the verb, and from the environment (issue 23 item 4).
expect 1 "config '$tmp/missing.json': .*No such file" -- list --config "$tmp/missing.json"
expect 1 "config '$tmp/missing.json': .*No such file" -- list --config="$tmp/missing.json"
TENTAFLAKE_WORKER_CONFIG=$tmp/missing.json expect 1 "config '$tmp/missing.json': .*No such file" -- list
# check-config validates and creates nothing.
expect 1 "check-config: workspace '$tmp/ws' does not exist" -- check-config --config "$tmp/good.json"
if [ -e "$tmp/state" ] || [ -e "$tmp/results" ]; then
        echo "FAIL: check-config created a directory"; fails=$((fails + 1))
else
        passes=$((passes + 1))
fi
mkdir "$tmp/ws2"
sed "s|$tmp/ws\"|$tmp/ws2\"|" "$tmp/good.json" >"$tmp/good2.json"
expect 0 "check-config: '$tmp/good2.json' is valid: worker '$name', workspace '$tmp/ws2'" -- check-config --config "$tmp/good2.json"
if [ -e "$tmp/state" ] || [ -e "$tmp/results" ]; then
        echo "FAIL: check-config created a directory"; fails=$((fails + 1))
else
        passes=$((passes + 1))
fi
expect 1 "config '$tmp/badkey.json': .*limits.memroy" -- check-config --config "$tmp/badkey.json"
# Not root: said plainly before anything else, whatever the config.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
        out=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN" --config /nonexistent.json list 2>&1); rc=$?
        if [ "$rc" = 1 ] && grep -q "list: must be run as root" <<<"$out"; then passes=$((passes + 1)); else
                echo "FAIL: a non-root list -> exit $rc: $out"; fails=$((fails + 1)); fi
        # Without a configuration named, a non-root list is the controller's own (issue 35 item 2):
        # here, outside any workspace, it says it finds none.
        abs_bin=$(realpath "$BIN")
        out=$(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups env -u TENTAFLAKE_WORKER_CONFIG "$abs_bin" list 2>&1); rc=$?
        if [ "$rc" = 1 ] && grep -q "no '.tentaflake-worker/' in the current directory or any parent" <<<"$out"; then
                passes=$((passes + 1)); else echo "FAIL: a non-root list without config -> exit $rc: $out"; fails=$((fails + 1)); fi
        out=$(cd / && setpriv --reuid=65534 --regid=65534 --clear-groups "$abs_bin" list --all 2>&1); rc=$?
        if [ "$rc" = 2 ] && grep -q "list: unknown option '--all' (as the controller" <<<"$out"; then
                passes=$((passes + 1)); else echo "FAIL: a non-root list --all -> exit $rc: $out"; fails=$((fails + 1)); fi
fi
expect 2 "keygen: this command does not take --config" -- --config "$tmp/good.json" keygen --out x --identity y
expect 2 "keygen: --out FILE and --identity ID are required" -- keygen --out x
expect 0 '"identity": "service:ci-1"' -- keygen --out "$tmp/ci.key" --identity service:ci-1
expect 1 "keygen: '$tmp/ci.key' already exists; a key is never overwritten" -- keygen --out "$tmp/ci.key" --identity service:ci-1
expect 1 "keygen: identity must be" -- keygen --out "$tmp/bad.key" --identity 'a b'
expect 1 "config '$tmp/missing.json': .*No such file" -- --config "$tmp/missing.json" list
expect 1 "config '$tmp/badkey.json': .*limits.memroy" -- --config "$tmp/badkey.json" list
expect 1 "config '$tmp/badsize.json': .*limits.memory" -- --config "$tmp/badsize.json" run
expect 1 "config '$tmp/fifo': .*regular file" -- --config "$tmp/fifo" list
expect 1 "config '$tmp': .*regular file" -- --config "$tmp" list
expect 2 "approve: missing the request ID" -- --config "$tmp/good.json" approve
expect 2 "approve: 'Bad ID' is not a request id" -- --config "$tmp/good.json" approve 'Bad ID'
expect 2 "approve: --expect-sha256 'abc' is not 64 lowercase hex digits" -- --config "$tmp/good.json" approve x1 --expect-sha256 abc
expect 2 "deny: unexpected argument 'b'" -- --config "$tmp/good.json" deny a b
expect 2 "list: unknown option '--yaml'" -- --config "$tmp/good.json" list --yaml
expect 2 "audit: unknown subcommand 'fix'" -- --config "$tmp/good.json" audit fix
# serve: the token never comes from argv; without one the worker refuses to start.
expect 2 "serve: the token is never taken from the command line" -- serve --server http://127.0.0.1:1 --key k --token t
expect 2 "serve: --server URL and --key FILE are required" -- serve --key k
expect 2 "serve: --server 'ftp://x' must be an http:// or https:// URL" -- serve --server ftp://x --key k
expect 2 "serve: --log-level must be error, warning, notice, info or debug, not 'loud'" -- serve --server http://127.0.0.1:1 --key k --log-level loud
expect 2 "serve: --server-socket 'rel.sock' must be an absolute path" -- serve --server http://127.0.0.1:1 --key k --server-socket rel.sock
expect 2 "--json goes with --check" -- serve --server http://127.0.0.1:1 --key k --json
expect 1 "serve: no token: set TENTAFLAKE_TOKEN or --token-file" -- serve --server http://127.0.0.1:1 --key k
# serve's engine drivers: the image is required; runsc
# flags are refused with an engine and engine flags with runsc.
expect 2 "serve: --sandbox docker needs --image NAME@sha256:<digest> \\(already in the engine.s local store; never pulled\\)" -- serve --server http://127.0.0.1:1 --key k --sandbox docker
expect 2 "serve: --mount, --system-mounts-identity, --runsc and --platform are for --sandbox runsc; with podman the image is the root" -- serve --server http://127.0.0.1:1 --key k --sandbox podman --image sha256:1111111111111111111111111111111111111111111111111111111111111111 --platform ptrace
expect 2 "serve: --image and --engine-runtime are for --sandbox docker or podman" -- serve --server http://127.0.0.1:1 --key k --image sha256:1111111111111111111111111111111111111111111111111111111111111111
# A daemon whose workspace is missing names it (needs root: it creates the state directories).
if [ "$(id -u)" -eq 0 ]; then
        expect 1 "drain: workspace '$tmp/ws' does not exist" -- --config "$tmp/good.json" drain
fi
# serve (issue 13, item 5): a --mount over the --token-file directory is refused as one over the
# key's is, and so is a mount above it or reaching it through a symlink; refused before any state
# is made (the walls are checked after the root check, hence the guard).
if [ "$(id -u)" -eq 0 ]; then
        mkdir -p "$tmp/i13-up/tok"
        echo tok-i13 >"$tmp/i13-up/tok/token"
        ln -s "$tmp/i13-up/tok" "$tmp/i13-toklink"
        tok=$tmp/i13-up/tok/token
        i13=(serve --server http://127.0.0.1:1 --key "$tmp/ci.key" --token-file "$tok" --state-dir "$tmp/i13-state")
        expect 2 "serve flags: mount host path '$tmp/i13-up/tok' contains --token-file '$tok'; the check would see it" -- \
                "${i13[@]}" --mount "$tmp/i13-up/tok:/opt/tok=secrets"
        expect 2 "serve flags: mount host path '$tmp/i13-up' contains --token-file '$tok'" -- \
                "${i13[@]}" --mount "$tmp/i13-up:/opt/up"
        expect 2 "serve flags: mount host path '$tmp/i13-toklink' contains --token-file '$tok'" -- \
                "${i13[@]}" --mount "$tmp/i13-toklink:/opt/link"
        if [ -e "$tmp/i13-state" ]; then
                echo "FAIL: a refused serve made its state directory"; fails=$((fails + 1))
        else
                passes=$((passes + 1))
        fi
fi

echo "cli: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
