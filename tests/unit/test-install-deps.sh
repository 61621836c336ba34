#!/usr/bin/env bash
# scripts/install-deps (issue 22, item 4: the README says a non-root user is given the exact
# apt-get line and nothing is installed):
#  - as a non-root user (nobody, when this runs as root) with a package missing: it names the
#    package, prints `sudo apt-get install --no-install-recommends PKG` on stdout, exits 1 and
#    calls neither apt-get nor sudo;
#  - with runsc missing too: it also prints the bookworm-backports line;
#  - as root with everything present (what make check sees after its own install-deps): it exits
#    0 at once, silent, without apt-get.
# The missing packages are made up by a dpkg-query put first on PATH, which answers for them as
# dpkg does for a package that is not installed and hands everything else to the real one.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

mkdir "$tmp/bin" "$tmp/log"
chmod 0777 "$tmp/log"
real_dpkg_query=$(command -v dpkg-query)
cat >"$tmp/bin/dpkg-query" <<EOF
#!/bin/sh
# the last argument is the package
for p; do :; done
case " \${FAKE_MISSING:-} " in *" \$p "*) echo "dpkg-query: no packages found matching \$p" >&2; exit 1 ;; esac
exec $real_dpkg_query "\$@"
EOF
for t in apt-get sudo; do
        printf '#!/bin/sh\necho "%s $*" >>%s/log/called\nexit 1\n' "$t" "$tmp" >"$tmp/bin/$t"
done
chmod 0755 "$tmp/bin"/*
cp scripts/install-deps "$tmp/install-deps"
chmod 0755 "$tmp/install-deps"

as_user() { # run as a non-root user: nobody when we are root, else ourselves
        if [ "$(id -u)" -eq 0 ]; then
                setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
        else
                "$@"
        fi
}

# A non-root user with jq missing.
rm -f "$tmp/log/called"
as_user env PATH="$tmp/bin:$PATH" FAKE_MISSING="jq" "$tmp/install-deps" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && ok || bad "non-root, jq missing: exit $rc, wanted 1"
grep -qx 'sudo apt-get install --no-install-recommends jq' "$tmp/out" && ok ||
        bad "non-root: no apt-get line on stdout: $(cat "$tmp/out" "$tmp/err")"
grep -q 'missing packages: jq' "$tmp/err" && ok || bad "non-root: the missing package is not named: $(cat "$tmp/err")"
[ ! -e "$tmp/log/called" ] && ok || bad "non-root: something was run: $(cat "$tmp/log/called")"

# ... and with runsc missing too: both lines, still nothing run.
rm -f "$tmp/log/called"
as_user env PATH="$tmp/bin:$PATH" FAKE_MISSING="jq mandoc runsc" "$tmp/install-deps" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && ok || bad "non-root, runsc missing: exit $rc"
grep -qx 'sudo apt-get install --no-install-recommends jq mandoc' "$tmp/out" && ok ||
        bad "non-root, runsc missing: wrong apt-get line: $(cat "$tmp/out")"
grep -qx 'sudo apt-get install --no-install-recommends -t bookworm-backports runsc' "$tmp/out" && ok ||
        bad "non-root, runsc missing: no backports line: $(cat "$tmp/out")"
[ ! -e "$tmp/log/called" ] && ok || bad "non-root, runsc missing: something was run: $(cat "$tmp/log/called")"

# Root, nothing missing: silent, immediate, no apt-get (what make check sees after its own
# install-deps). Not where runsc is missing: there the script would write apt's sources first.
runsc_ok=0
v=$(dpkg-query -W -f='${Version}' runsc 2>/dev/null) && dpkg --compare-versions "$v" ge 0.0~20240729 && runsc_ok=1
if [ "$(id -u)" -eq 0 ] && [ $runsc_ok = 1 ]; then
        rm -f "$tmp/log/called"
        start=$(date +%s%N)
        PATH="$tmp/bin:$PATH" "$tmp/install-deps" >"$tmp/out" 2>&1 </dev/null
        rc=$? ms=$((($(date +%s%N) - start) / 1000000))
        if [ -e "$tmp/log/called" ]; then
                echo "note: packages are missing here ($(cat "$tmp/out" | head -1)): the root case was not checked"
        else
                [ $rc -eq 0 ] && [ ! -s "$tmp/out" ] && ok || bad "root, nothing missing: exit $rc, output '$(cat "$tmp/out")'"
                echo "root, nothing missing: exit $rc, ${ms} ms"
        fi
fi

echo "install-deps: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
