#!/usr/bin/env bash
# `make demo` builds quietly (issue 14 item 6): the build part (`make demo-build`) prints one
# summary line, whatever it compiles, and the whole log, compiler command lines included, only
# when the build fails. Runs on a copy of the build directory, so that a real compile happens
# (one object removed) without touching the tree's own build.
#
# The copy is rebuilt with the make variables $BUILD was made with, which the caller names in
# BUILD_CC, BUILD_OPT, BUILD_SANFLAGS, BUILD_HARDEN and BUILD_WERROR (`make asan` sets them for
# build-asan; unset means the Makefile's default): an object recompiled with other flags would
# not link with the others (ASan-instrumented objects need the sanitizer runtime at link time).
set -uo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

if [ ! -x "$BUILD/tentaflake-worker" ] || [ ! -e "$BUILD/common/size.o" ]; then
        echo "FAIL: $BUILD is not built (make all)"; exit 1
fi
vars=()
for v in CC OPT SANFLAGS HARDEN WERROR; do
        n=BUILD_$v
        [ -n "${!n+set}" ] && vars+=("$v=${!n}")
done
if [ -z "${BUILD_SANFLAGS:-}" ] && nm "$BUILD/common/size.o" 2>/dev/null | grep -Eq ' U __(asan|ubsan)_'; then
        echo "FAIL: $BUILD was built with sanitizers, and BUILD_SANFLAGS does not say which (make asan sets it)"
        exit 1
fi
tmp=$(mktemp -d /tmp/i14-demo-build.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cp -a "$BUILD" "$tmp/build"
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make demo-build BUILD="$tmp/build" "${vars[@]}" "$@" >"$tmp/out" 2>&1; }

# The copy brought up to date first: $BUILD may hold only some of `all` (make asan builds the
# worker and the tests), or predate a source edited since; then exactly one object is missing.
if ! mk; then echo "FAIL: the copy of $BUILD does not build:"; cat "$tmp/out"; exit 1; fi

# A build that compiles something: one line, naming what it built and how much.
rm -f "$tmp/build/common/size.o"
if mk; then ok; else bad "make demo-build failed:"; cat "$tmp/out"; fi
[ "$(wc -l <"$tmp/out")" -eq 1 ] && ok || { bad "more than one line:"; sed 's/^/    /' "$tmp/out"; }
grep -qx "build: $tmp/build/tentaflake-worker.* up to date, 1 file(s) compiled (log: $tmp/build/demo-build.log)" "$tmp/out" &&
        ok || bad "not the summary line: $(cat "$tmp/out")"
grep -q -- '-c common/size.c' "$tmp/build/demo-build.log" && ok || bad "the log does not hold the compile command"
if [ -n "${BUILD_SANFLAGS:-}" ]; then
        grep -- '-c common/size.c' "$tmp/build/demo-build.log" | grep -qF -- "$BUILD_SANFLAGS" && ok ||
                bad "common/size.c was not compiled with BUILD_SANFLAGS ($BUILD_SANFLAGS)"
fi

# Up to date: still the one line.
if mk && [ "$(wc -l <"$tmp/out")" -eq 1 ] && grep -q ' 0 file(s) compiled' "$tmp/out"; then ok; else bad "up to date: $(cat "$tmp/out")"; fi

# A failing build: the whole log (the failing command) and a last line that says so.
rm -f "$tmp/build/common/size.o"
if mk CC=false; then bad "a failing compile was reported as a success"; else ok; fi
grep -q -- '^false .*-c common/size.c' "$tmp/out" && ok || { bad "the failing command is not shown:"; sed 's/^/    /' "$tmp/out"; }
grep -qx "build: failed (the log above is also in $tmp/build/demo-build.log)" "$tmp/out" && ok ||
        bad "no failure line: $(tail -n 2 "$tmp/out")"

echo "demo build: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
