#!/usr/bin/env bash
# The inbox plane's signature (contract section 7): with signing_key set, every final result
# carries attestation.json, and an implementation that is not ours (Python + OpenSSL,
# tests/server/verify_attestation.py) verifies it and finds the request's sha256, the status
# and the environment digest of the result in it. Covers a job that ran (with an artifact),
# a forbidden request, an invalid one that owns its id, and a denial. Real runsc.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
require_runsc_worker

dir=$(test_dir tfw-it-attest)
trap 'worker_cleanup "$dir"' EXIT
"$BIN" keygen --out "$dir/signing.key" --identity test:inbox >"$dir/keygen.json" || exit 1
pub=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["trusted_issuers"][0]["public_key"])' "$dir/keygen.json")
new_worker "$dir" ", \"signing_key\": \"$dir/signing.key\", \"signing_identity\": \"test:inbox\",
 \"limits\": {\"memory\": \"256m\", \"memory_swap\": \"256m\", \"pids\": 64}"
"$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log" # the first run makes the inbox
submit "$dir" ran1 local-reversible '["sh","-c","mkdir -p artifacts; echo signed > artifacts/out.txt"]'
submit "$dir" forb1 forbidden '["true"]'
submit "$dir" pend1 irreversible '["true"]'
inbox="$dir/ws/.tentaflake-worker/inbox"
printf '{"version":1,"id":"bad1","action_class":"local-reversible","argv":[]}' >"$inbox/bad1.json"
"$BIN" --config "$dir/config.json" drain 2>>"$dir/daemon.log"
quiet tfw "$dir" deny pend1 --reason "not now"

for id in ran1 forb1 bad1 pend1; do
        r="$dir/results/$id"
        check "$id: attestation.json published" test -s "$r/attestation.json"
        check "$id: result.json names it" test "$(result_field "$dir" "$id" attestation)" = attestation.json
        sha=$(result_field "$dir" "$id" request_sha256)
        status=$(result_field "$dir" "$id" status)
        if ! python3 tests/server/verify_attestation.py "$pub" "$r/attestation.json" >"$dir/$id.statement" 2>"$dir/$id.err"; then
                echo "FAIL: $id: the independent verifier refused the attestation: $(cat "$dir/$id.err")"
                fails=$((fails + 1))
                continue
        fi
        passes=$((passes + 1))
        check "$id: the statement names the request sha256" grep -q "$sha" "$dir/$id.statement"
        check "$id: the statement names the status ($status)" grep -q "\"$status\"" "$dir/$id.statement"
done
digest=$(result_field "$dir" ran1 environment_digest)
check "ran1: an environment digest is recorded" grep -qE '^sha256:[0-9a-f]{64}$' <<<"$digest"
check "ran1: the statement carries the same digest" grep -q "$digest" "$dir/ran1.statement"
art=$(sha256sum "$dir/results/ran1/artifacts/out.txt" | cut -d' ' -f1)
check "ran1: the statement carries the artifact's sha256" grep -q "$art" "$dir/ran1.statement"
# A signature over other bytes must not verify: flip one byte of the payload.
python3 - "$dir/results/ran1/attestation.json" "$dir/tampered.json" <<'PY'
import base64, json, sys
env = json.load(open(sys.argv[1]))
body = bytearray(base64.b64decode(env["payload"]))
body[10] ^= 1
env["payload"] = base64.b64encode(bytes(body)).decode()
json.dump(env, open(sys.argv[2], "w"))
PY
check "a tampered attestation does not verify" \
        bash -c "! python3 tests/server/verify_attestation.py '$pub' '$dir/tampered.json' >/dev/null 2>&1"
check "the signing key never reached a result" bash -c "! grep -rq signing.key '$dir/results'"
finish
