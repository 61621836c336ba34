#!/usr/bin/env bash
# Network for the validation plane (issue 21 item 4; contract section 8; threat 16): real
# `serve` workers and runsc against the test-double forge, with an upstream of the test's own on
# the host's loopback:
#   - --allow-network --allow-host HOST:PORT: a policy with network: true reaches the allowed
#     port through the proxy and is refused an unlisted one (whose server never sees a
#     connection); RESULT lists both connections;
#   - a policy without network gets none on the same worker: no proxy variable, no listener,
#     RESULT's network null, and another environment digest (the allowlist is in it);
#   - a capsule started ahead after a network job has network, and one after a job without has
#     none: each job runs in the capsule its policy asks for;
#   - a policy env naming a proxy variable fails permanently, unsigned;
#   - --allow-network alone: serve says so at start, and a network policy fails with retry as
#     this worker's fault, naming --allow-host;
#   - --allow-host without --allow-network, with an engine, or malformed: usage errors.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v curl >/dev/null || { echo "SKIP: curl is needed in the capsule (scripts/install-deps)"; exit 77; }
. "$(dirname "$0")/serve-lib.sh"
SERVE_FLAGS=(--system-mounts-identity debian-12 --warm-secs 60)

A=$(free_port)
B=$(free_port)
while [ "$B" = "$A" ]; do B=$(free_port); done
for s in a:$A b:$B; do
        egress_upstream "$tmp/up-${s%%:*}" 127.0.0.1 "${s#*:}" || { echo "FAIL: upstream ${s%%:*} did not start"; exit 1; }
        pids+=("$UPSTREAM_PID")
done
up_conns() { local n; n=$(grep -c . "$tmp/up-$1/connections" 2>/dev/null); echo "${n:-0}"; }
res() { q "jobs['$1']['history'][-1]['result']$2"; } # res ID PYTHON_SUFFIX: of its RESULT

# ---- usage ---------------------------------------------------------------------------------
usage() { # usage WANT_TEXT FLAGS...: serve exits 2 with WANT_TEXT on stderr
        local want=$1 out rc; shift
        out=$(TENTAFLAKE_TOKEN=$TOKEN "$BIN" serve --server "$URL" --key "$tmp/ci.key" "$@" 2>&1); rc=$?
        [ $rc -eq 2 ] && grep -q -- "$want" <<<"$out" || { echo "rc $rc: $out"; return 1; }
}
check "--allow-host without --allow-network: usage error" usage "needs --allow-network" --allow-host 127.0.0.1:$A
check "--allow-host with an engine: usage error" usage "is for --sandbox runsc" --allow-network \
        --allow-host 127.0.0.1:$A --sandbox docker --image "sha256:$(printf '0%.0s' $(seq 64))"
check "a malformed --allow-host: usage error naming it" usage "--allow-host 'example.org': " --allow-network --allow-host example.org

# ---- a worker with an allowlist --------------------------------------------------------------
start_worker net --allow-network --allow-host "127.0.0.1:$A"
wait_ready net
check "serve says at start what a network policy gets" grep -q "a policy asking for network gets 1 allowlist entry" net.log

enqueue n1 "$TREE" "{\"argv\":[\"sh\",\"-c\",\"curl -sS http://127.0.0.1:$A/hello; echo code=\$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$B/hello)\"],\"network\":true,\"timeout_secs\":60}"
final n1
check "n1 (network) passed" [ "$(q "jobs['n1']['history'][-1].get('status')")" = pass ]
check "n1 reached the allowed port through the proxy" [ "$(res n1 "['log']['tail'].startswith('hello from 127.0.0.1:$A')")" = True ]
check "n1 was refused the unlisted port (403)" [ "$(res n1 "['log']['tail'].rstrip().endswith('code=403')")" = True ]
check "the unlisted port's server never saw a connection" [ "$(up_conns b)" = 0 ]
check "RESULT lists both connections: one allowed, one refused not_allowed" \
        [ "$(q "(lambda n: (n['allowed'], n['refused'], [c['reason'] for c in n['connections']]))(jobs['n1']['history'][-1]['result']['network'])")" = "(1, 1, [None, 'not_allowed'])" ]
check "RESULT names the allowlist" [ "$(res n1 "['network']['allow']")" = "['127.0.0.1:$A']" ]

enqueue n2 "$TREE" '{"argv":["sh","-c","echo vars=$(env | grep -ci _proxy=); curl -s -o /dev/null -w \"relay=%{http_code}\" --noproxy \"*\" http://127.0.0.1:3128/ || echo relay=none"],"network":false,"timeout_secs":60}'
final n2
check "n2 (no network) passed" [ "$(q "jobs['n2']['history'][-1].get('status')")" = pass ]
check "n2 had no proxy variable" [ "$(res n2 "['log']['tail'].count('vars=0')")" = 1 ]
check "n2 had nothing on 127.0.0.1:3128" [ "$(res n2 "['log']['tail'].count('relay=000')")" = 1 ]
check "n2's RESULT network is null" [ "$(res n2 "['network']")" = None ]
check "the allowlist is in the environment digest: n1's and n2's differ" \
        [ "$(res n1 "['environment_digest']")" != "$(res n2 "['environment_digest']")" ]
check "n2 did not run in n1's capsule (started ahead with network)" bash -c "! grep -q \"job 'n2' runs in a capsule started ahead\" net.log"

enqueue n3 "$TREE" '{"argv":["sh","-c","echo vars=$(env | grep -ci _proxy=)"],"network":false,"timeout_secs":60}'
final n3
check "n3 ran in the capsule started ahead after n2, without network" grep -q "job 'n3' runs in a capsule started ahead" net.log
check "n3 had no proxy variable" [ "$(res n3 "['log']['tail'].count('vars=0')")" = 1 ]
enqueue n4 "$TREE" "{\"argv\":[\"sh\",\"-c\",\"echo hi; curl -sS http://127.0.0.1:$A/hello\"],\"network\":true,\"timeout_secs\":60}"
final n4
check "n4 (network after a job without) passed in a capsule of its own" \
        [ "$(q "jobs['n4']['history'][-1].get('status')")" = pass ]
check "n4 reached the allowed port" [ "$(res n4 "['log']['tail'].count('hello from 127.0.0.1:$A')")" = 1 ]
enqueue n5 "$TREE" "{\"argv\":[\"sh\",\"-c\",\"curl -sS http://127.0.0.1:$A/hello\"],\"network\":true,\"timeout_secs\":60}"
final n5
check "n5 ran in the capsule started ahead after n4, with network" grep -q "job 'n5' runs in a capsule started ahead" net.log
check "n5 reached the allowed port" [ "$(res n5 "['log']['tail'].count('hello from 127.0.0.1:$A')")" = 1 ]

enqueue proxyenv "$TREE" '{"argv":["true"],"network":true,"env":{"https_proxy":"http://evil.example:8080"}}'
final proxyenv
check "a policy env naming https_proxy fails permanently, unsigned" \
        [ "$(q "(jobs['proxyenv']['state'], jobs['proxyenv']['history'][-1]['permanent'], 'https_proxy' in jobs['proxyenv']['history'][-1]['reason'])")" = "('failed', True, True)" ]
no_attestation proxyenv || { echo "FAIL: proxyenv was signed"; fails=$((fails + 1)); }
kill -TERM "$wpid"; wait "$wpid"

# ---- --allow-network alone -----------------------------------------------------------------
start_worker bare --allow-network
wait_ready bare
check "serve says --allow-network alone gives no network" grep -q -- "--allow-network without --allow-host" bare.log
enqueue n6 "$TREE" '{"argv":["true"],"network":true}'
final n6
check "a network policy there fails with retry, naming --allow-host" \
        [ "$(q "(jobs['n6']['state'], 'no --allow-host' in jobs['n6']['history'][1]['reason'], jobs['n6']['history'][1]['permanent'])")" = "('failed', True, False)" ]
no_attestation n6 || { echo "FAIL: n6 was signed"; fails=$((fails + 1)); }
kill -TERM "$wpid"; wait "$wpid"
# The proxies of this test's workers (comm is cut to 15 bytes): a real worker's on the same
# host, or another test's, are not this test's to count.
no_proxy_left() { no_own_procs comm=tentaflake-egre >/dev/null; }
wait_for 10 no_proxy_left
check "no proxy process of the test's workers is left $(own_procs comm=tentaflake-egre)" no_proxy_left
finish
