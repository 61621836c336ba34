#!/usr/bin/env bash
# `serve --sandbox docker` and `--sandbox podman` (issue 8): the validation plane through the
# engine drivers, against the test-double forge, with a local busybox image pinned by digest
# (tests/integration/docker-image.sh; never pulled). For each engine:
#   - a passing and a failing check end as a signed pass and a signed fail that verify
#     independently; the tree, its inner symlink and the policy's env reach the check;
#   - output beyond --output-mb and CPU beyond the CPU seconds end the check (signed fails
#     naming the limit; the CPU time is read from the engine's container cgroup);
#   - a policy image that is not pinned, or not in the local store, is refused before anything
#     is downloaded (fail with retry, unsigned), and so is a worker whose --image is missing;
#   - stale from a heartbeat stops the check (the container is removed);
#   - the token and the key never reach the check; no container of the worker is left.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
require_root
command -v runsc >/dev/null || { echo "SKIP: runsc is not installed"; exit 77; }
command -v openssl >/dev/null || { echo "SKIP: openssl is not installed"; exit 77; }
command -v dockerd >/dev/null || { echo "SKIP: docker.io is not installed (scripts/install-deps)"; exit 77; }
SRC=$(cd "$(dirname "$0")/../.." && pwd)
"$SRC/scripts/start-dockerd" || { echo "FAIL: dockerd cannot be started with the runsc runtime"; exit 1; }
. "$(dirname "$0")/serve-lib.sh"

MISSING=sha256:00000000000000000000000000000000000000000000000000000000000000aa

engines=(docker)
if command -v podman >/dev/null; then
        engines+=(podman)
elif [ "${TENTAFLAKE_MUST_WORK:-0}" = 1 ]; then
        echo "FAIL: podman is not installed (scripts/install-deps)"; fails=$((fails + 1))
else
        echo "SKIP: podman is not installed (scripts/install-deps)"
fi

for en in "${engines[@]}"; do
        echo "-- $en"
        IMG=$("$SRC/tests/integration/docker-image.sh" "$en")
        case $IMG in sha256:*) ;; *) echo "FAIL: cannot build the $en test image: $IMG"; fails=$((fails + 1)); continue ;; esac

        # Refusals at start-up: no --image, an image not in the store, runsc-only flags.
        TENTAFLAKE_TOKEN=$TOKEN "$BIN" serve --server "$URL" --key "$tmp/ci.key" --sandbox "$en" >"$en-noimg.log" 2>&1
        check "$en: --sandbox without --image is a usage error naming --image (exit 2)" \
                bash -c "[ $? = 2 ] && grep -q -- '--image' '$en-noimg.log'"
        TENTAFLAKE_TOKEN=$TOKEN "$BIN" serve --server "$URL" --key "$tmp/ci.key" --sandbox "$en" --image "$MISSING" \
                --label "$en-missing-$RUN" --state-dir "$tmp/state-$en-missing" >"$en-missing.log" 2>&1
        check "$en: an --image that is not in the local store stops the worker, naming it (exit 1)" \
                bash -c "[ $? = 1 ] && grep -q '$MISSING' '$en-missing.log'"
        TENTAFLAKE_TOKEN=$TOKEN "$BIN" serve --server "$URL" --key "$tmp/ci.key" --sandbox "$en" --image "$IMG" \
                --mount /opt >"$en-mount.log" 2>&1
        check "$en: --mount is refused (the image is the root)" \
                bash -c "[ $? = 2 ] && grep -q 'the image is the root' '$en-mount.log'"

        SERVE_FLAGS=(--sandbox "$en" --image "$IMG" --output-mb 1 --default-cpu-secs 2)
        start_worker "$en"
        W=$wpid
        wait_ready "$en"

        enqueue "$en-pass" "$TREE" '{"argv":["sh","-c","cat ok.txt inlink && ./run.sh && echo \"G=$GREETING\""],"timeout_secs":60,"env":{"GREETING":"hi there"}}'
        enqueue "$en-fail" "$TREE" '{"argv":["sh","-c","echo failing; exit 3"],"timeout_secs":60,"env":{"GREETING":"hi there"}}'
        final "$en-pass"; final "$en-fail"
        attestation "$en-pass" "$en-pass.att"
        attestation "$en-fail" "$en-fail.att"
        D=$(q "jobs['$en-pass']['history'][-1]['result']['environment_digest']")
        check "$en: pass is a signed pass naming the tree and the digest" \
                verify "$en-pass.att" --expect "subject.gitTree=$TREE" --expect predicate.result=pass \
                --expect "predicate.environment_digest=$D" --expect "predicate.worker=$en-$RUN"
        check "$en: the tree, its inner symlink, the script and the policy's env reached the check" \
                [ "$(q "'hello\nsub\nscript-ran\nG=hi there' in jobs['$en-pass']['history'][-1]['result']['log']['tail']")" = True ]
        check "$en: fail is a signed fail with exit 3 and the same digest (same walls, same env)" \
                verify "$en-fail.att" --expect predicate.result=fail --expect predicate.exit_code=3 \
                --expect "predicate.environment_digest=$D"

        enqueue "$en-flood" "$TREE" '{"argv":["sh","-c","yes flooding | head -c 200000000; echo never-here"],"timeout_secs":120}'
        enqueue "$en-spin" "$TREE" '{"argv":["sh","-c","while :; do :; done & while :; do :; done"],"timeout_secs":120}'
        final "$en-flood" 150; final "$en-spin" 150
        for j in flood spin; do
                attestation "$en-$j" "$en-$j.att"
                check "$en-$j: a signed fail, status killed" \
                        verify "$en-$j.att" --expect predicate.result=fail --expect predicate.status=killed
        done
        check "$en: output beyond --output-mb ended the check" \
                [ "$(q "(jobs['$en-flood']['history'][-1]['result']['reason'], jobs['$en-flood']['history'][-1]['result']['log']['bytes'] < 50000000)")" = "('output_limit', True)" ]
        check "$en: 2 CPU seconds ended the check long before its 120 s" \
                [ "$(q "(jobs['$en-spin']['history'][-1]['result']['reason'], jobs['$en-spin']['history'][-1]['result']['duration_ms'] < 60000)")" = "('cpu_limit', True)" ]

        enqueue "$en-unpinned" "$TREE" '{"argv":["true"],"image":"busybox:latest"}'
        enqueue "$en-absent" "$TREE" "{\"argv\":[\"true\"],\"image\":\"$MISSING\"}"
        final "$en-unpinned"; final "$en-absent"
        check "$en: a policy image not pinned by digest: fail with retry, unsigned, before any download" \
                [ "$(q "(jobs['$en-unpinned']['state'], 'not pinned' in jobs['$en-unpinned']['history'][1]['reason'], jobs['$en-unpinned']['history'][1]['permanent'], jobs['$en-unpinned'].get('downloads', 0))")" = "('failed', True, False, 0)" ]
        check "$en: a policy image not in the local store: fail with retry naming it, unsigned" \
                [ "$(q "(jobs['$en-absent']['state'], '$MISSING' in jobs['$en-absent']['history'][1]['reason'], jobs['$en-absent']['history'][1]['permanent'])")" = "('failed', True, False)" ]
        no_attestation "$en-unpinned" && no_attestation "$en-absent" || { echo "FAIL: $en: a refusal was signed"; fails=$((fails + 1)); }
        if [ "$en" = docker ]; then
                # An image with a VOLUME line: docker would give the capsule a writable volume on
                # the host's disk (podman is told to ignore such lines: --image-volume ignore).
                docker create --name "tfw-volimg-$RUN" "$IMG" /bin/true >/dev/null
                VOLIMG=$(docker commit --change 'VOLUME /data' "tfw-volimg-$RUN")
                docker rm "tfw-volimg-$RUN" >/dev/null
                enqueue "$en-volume" "$TREE" "{\"argv\":[\"true\"],\"image\":\"$VOLIMG\"}"
                final "$en-volume"
                check "$en: a policy image declaring a VOLUME is refused before download, unsigned" \
                        [ "$(q "(jobs['$en-volume']['state'], 'declares volumes' in jobs['$en-volume']['history'][1]['reason'], jobs['$en-volume'].get('downloads', 0))")" = "('failed', True, 0)" ]
        fi
        enqueue "$en-own" "$TREE" "{\"argv\":[\"true\"],\"image\":\"$IMG\"}"
        final "$en-own"
        check "$en: the policy naming the worker's own pinned image runs" \
                [ "$(q "jobs['$en-own']['history'][-1].get('status')")" = pass ]

        enqueue "$en-secrets" "$TREE" '{"argv":["sh","-c","env; cat /proc/self/mountinfo; ls / /.tentaflake"],"timeout_secs":60}'
        final "$en-secrets"
        TAIL=$(q "jobs['$en-secrets']['history'][-1]['result']['log']['tail']")
        check "$en: the check listed its environment" grep -q "HOME=/work" <<<"$TAIL"
        check "$en: the token and the key are not visible in the check" \
                bash -c "! grep -q -e '$TOKEN' -e 'ci.key' <<<\"\$0\"" "$TAIL"

        enqueue "$en-stale" "$TREE" '{"argv":["sleep","60"],"timeout_secs":120}' '["stale"]'
        final "$en-stale" 60
        check "$en: stale stops the check and completes as stale without attestation" \
                [ "$(q "(jobs['$en-stale']['history'][-1]['status'], jobs['$en-stale']['history'][-1]['attestation'])")" = "('stale', None)" ]

        kill -TERM "$W"; wait "$W"
        # (removing the committed image also removes its untagged parent, the test image)
        [ "$en" = docker ] && docker rmi "$VOLIMG" >/dev/null
        check "$en: no container of the worker is left" \
                [ -z "$("$en" ps -aq --filter "label=org.tentaflake.worker=serve-$en-$RUN")" ]
done

finish
