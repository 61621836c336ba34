#!/usr/bin/env bash
# make install and make uninstall (issue 22, item 4), on a copy of the build's objects:
#  - make install with the build's own PREFIX compiles nothing and installs the binary, the
#    capsule init, the eight units (no placeholder left), the templates, the three man pages,
#    the bash completion and the docs;
#  - make install PREFIX=/usr after it recompiles exactly the sources that name TFW_LIBEXECDIR
#    (the install-paths stamp), and the installed worker and man page name /usr/libexec, not
#    /usr/local; a second run compiles nothing;
#  - make uninstall with the same variables leaves no file, and none of the package's own
#    directories, behind.
set -uo pipefail
BUILD=${BUILD:-build}
cd "$(dirname "$0")/../.."

[ -x "$BUILD/tentaflake-worker" ] || { echo "FAIL: $BUILD/tentaflake-worker is not built"; exit 1; }
# The copy is built with the make variables $BUILD was made with (BUILD_CC, BUILD_OPT,
# BUILD_SANFLAGS, BUILD_HARDEN, BUILD_WERROR: `make asan` sets them; as test-demo-build.sh).
vars=()
for v in CC OPT SANFLAGS HARDEN WERROR; do
        n=BUILD_$v
        [ -n "${!n+set}" ] && vars+=("$v=${!n}")
done
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok; else bad "$what"; fi; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
b=$tmp/b
mkdir "$b"
(cd "$BUILD" && tar --exclude=./tests -cf - .) | (cd "$b" && tar -xpf -)
mk() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory BUILD="$b" "${vars[@]}" "$@"; }
compiled() { grep -o -- " -c [^ ]*\.c" "$1" | sed 's/^ -c //' | sort; }
# up to date first: $BUILD may hold only part of `all` (make asan builds no man pages), or
# predate a source edited since
if ! mk all >"$tmp/all.log" 2>&1; then echo "FAIL: the copy of $BUILD does not build:"; cat "$tmp/all.log"; exit 1; fi
# a sanitizer build has no static capsule init (it cannot link the sanitizer runtimes)
init=libexec/tentaflake-worker/tentaflake-capsule-init
[ -e "$b/tentaflake-capsule-init" ] || init=

# 1. the build's own PREFIX (the default): nothing to compile
if ! mk install DESTDIR="$tmp/r1" >"$tmp/i1.log" 2>&1; then bad "make install:"; cat "$tmp/i1.log"; fi
check "make install with the build's PREFIX compiles nothing ($(compiled "$tmp/i1.log" | tr '\n' ' '))" \
        test -z "$(compiled "$tmp/i1.log")"
p=$tmp/r1/usr/local
for f in bin/tentaflake-worker $init \
         lib/systemd/system/tentaflake-worker@.service lib/systemd/system/tentaflake-worker-gc@.timer \
         lib/systemd/system/tentaflake-worker-queue@.path lib/systemd/system/tentaflake-worker-serve-proxy@.socket \
         share/tentaflake-worker/controller-workspace.conf.in \
         share/man/man8/tentaflake-worker.8 share/man/man5/tentaflake-worker.json.5 \
         share/man/man5/tentaflake-worker-request.5 share/bash-completion/completions/tentaflake-worker \
         share/doc/tentaflake-worker/README.md share/doc/tentaflake-worker/LICENSE \
         share/doc/tentaflake-worker/install.md; do
        check "make install installs $f" test -f "$p/$f"
done
check "make install links bin/tentaflake-worker-shell, the shell prefix, to the binary" \
        test "$(readlink "$p/bin/tentaflake-worker-shell")" = tentaflake-worker
check "no placeholder is left in the units and man pages" \
        sh -c "! grep -l '@[A-Z]*@' '$p'/lib/systemd/system/* '$p'/share/man/man*/*"
check "the units' Documentation= names the installed docs" \
        grep -qx "Documentation=man:tentaflake-worker(8) file:/usr/local/share/doc/tentaflake-worker/install.md" \
        "$p/lib/systemd/system/tentaflake-worker@.service"

# 2. PREFIX=/usr after it: the sources naming TFW_LIBEXECDIR, and only those, are recompiled
want=$(grep -l TFW_LIBEXECDIR common/*.c parser/*.c snapshot/*.c capsule/*.c capsule-init/*.c artifacts/*.c \
        exec/*.c orchestrator/*.c approve/*.c validation/*.c controller/*.c cli/*.c 2>/dev/null | sort)
if ! mk install PREFIX=/usr DESTDIR="$tmp/r2" >"$tmp/i2.log" 2>&1; then bad "make install PREFIX=/usr:"; cat "$tmp/i2.log"; fi
check "make install PREFIX=/usr recompiles what names TFW_LIBEXECDIR (got: $(compiled "$tmp/i2.log" | tr '\n' ' '); want: $(echo $want))" \
        test "$(compiled "$tmp/i2.log")" = "$want" -a -n "$want"
check "the installed worker looks for its init in /usr/libexec" \
        sh -c "grep -qaF /usr/libexec/tentaflake-worker '$tmp/r2/usr/bin/tentaflake-worker' && ! grep -qaF /usr/local/libexec '$tmp/r2/usr/bin/tentaflake-worker'"
check "the installed man page names /usr/libexec" \
        grep -qF /usr/libexec/tentaflake-worker/tentaflake-capsule-init "$tmp/r2/usr/share/man/man8/tentaflake-worker.8"
if ! mk install PREFIX=/usr DESTDIR="$tmp/r2" >"$tmp/i3.log" 2>&1; then bad "make install PREFIX=/usr, again:"; cat "$tmp/i3.log"; fi
check "make install PREFIX=/usr again compiles nothing ($(compiled "$tmp/i3.log" | tr '\n' ' '))" \
        test -z "$(compiled "$tmp/i3.log")"

# 3. make uninstall, with the same variables
for r in "r1:" "r2:PREFIX=/usr"; do
        root=$tmp/${r%%:*} var=${r#*:}
        if ! mk uninstall $var DESTDIR="$root" >"$tmp/u.log" 2>&1; then bad "make uninstall $var:"; cat "$tmp/u.log"; fi
        left=$(find "$root" ! -type d; find "$root" -type d -name '*tentaflake*')
        check "make uninstall $var leaves nothing of it (left: $(echo $left))" test -z "$left"
done

echo "install: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
