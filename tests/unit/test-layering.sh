#!/usr/bin/env bash
# The layering rules of docs/architecture.md, checked on the sources (issue 11):
#   - the library logs nothing above debug: its events travel up (a report function, an
#     error) to cli/, which logs them;
#   - nothing but capsule/ and exec/ starts a capsule: both planes go through exec_run();
#   - no driver is named outside the drivers and the config parser: the rest asks the
#     driver's table (capsule/driver.h);
#   - the programs in capsule-init/ and egress-proxy/ (issue 38) sit on the library: no folder of
#     the worker includes them, and they include nothing above capsule/ (no exec/, artifacts/,
#     orchestrator/, approve/, validation/, controller/ or cli/). Like the library, they log
#     nothing above debug (init and the proxy report on their channels and records).
# Each rule prints what breaks it.
set -uo pipefail
cd "$(dirname "$0")/../.."
passed=0 failed=0
rule() { # rule DESCRIPTION OFFENDERS
        if [ -z "$2" ]; then
                passed=$((passed + 1))
        else
                echo "FAIL: $1:"
                sed 's/^/    /' <<<"$2"
                failed=$((failed + 1))
        fi
}
lib_dirs="common parser snapshot capsule artifacts exec orchestrator approve validation controller"
prog_dirs="capsule-init egress-proxy"
for d in $lib_dirs cli $prog_dirs; do
        [ -d "$d" ] || { echo "FAIL: $d/ is missing (run from the project's root)"; exit 1; }
done

rule "the library logs above debug" \
        "$(grep -rnE '\blog_(info|notice|warning|error|error_errno)\(' --include='*.c' $lib_dirs $prog_dirs)"
rule "a capsule is started outside capsule/ and exec/" \
        "$(grep -rnE '\bcapsule_(run_job|warm_start)\(' --include='*.c' $lib_dirs cli | grep -vE '^(capsule|exec)/')"
rule "a driver is named outside the drivers and the config parser" \
        "$(grep -rnE '\bDRIVER_(RUNSC|DOCKER|PODMAN)\b' --include='*.c' $lib_dirs cli |
                grep -vE '^(capsule/driver[a-z-]*\.c|capsule/docker\.c|parser/config\.c):')"
prog_include='#include "(capsule-init|egress-proxy)/'
above_capsule='#include "(artifacts|exec|orchestrator|approve|validation|controller|cli)/'
rule "a folder of the worker includes a program's own header" \
        "$(grep -rnE "$prog_include" --include='*.[ch]' $lib_dirs cli)"
rule "a program includes a folder above capsule/" \
        "$(grep -rnE "$above_capsule" --include='*.[ch]' $prog_dirs)"
# The rules find what they look for (a rule that cannot fail checks nothing).
rule "the log rule finds a log call" \
        "$(printf 'void f(void) { log_warning("x"); }\n' | grep -qE '\blog_(info|notice|warning|error|error_errno)\(' || echo 'not found')"
rule "the driver rule sees the drivers" \
        "$(grep -rlE '\bDRIVER_RUNSC\b' capsule/driver*.c >/dev/null || echo 'DRIVER_RUNSC not found in capsule/driver*.c')"

rule "the include rules see the programs' includes" \
        "$(grep -rqE "$prog_include" --include='*.c' $prog_dirs || echo "no $prog_include in $prog_dirs")"
rule "the include rule sees an include from above capsule/" \
        "$(grep -rqE "$above_capsule" --include='*.c' exec cli || echo "no $above_capsule in exec/ or cli/")"

echo "test-layering.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
