#!/usr/bin/env bash
# Issue 5: the daemon's idle RSS is mostly the shared libraries it maps. libarchive, libcurl and
# libcrypto (with their 40 dependencies: 8 of 11.5 MiB) are loaded with dlopen by the paths that
# use them (common/dlopen-util.h); the worker binary must not link them again.
set -uo pipefail
BIN=${BUILD:-build}/tentaflake-worker
[ -x "$BIN" ] || { echo "test-worker-links: $BIN missing (make all)"; exit 1; }
needed=$(readelf -d "$BIN" | awk '/\(NEEDED\)/ {gsub(/[][]/, "", $5); print $5}')
[ -n "$needed" ] || { echo "FAIL: no NEEDED entries read from $BIN"; exit 1; }
fails=0
for lib in libarchive libcurl libcrypto libssl; do
        if grep -q "^$lib\.so" <<<"$needed"; then
                echo "FAIL: $BIN links $lib (load it with dlopen where it is used)"
                fails=$((fails + 1))
        fi
done
echo "worker links: $(tr '\n' ' ' <<<"$needed")"
exit $((fails > 0))
