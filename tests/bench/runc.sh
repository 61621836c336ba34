#!/usr/bin/env bash
# The two capsule engines side by side with native (issue 48; docs/capsule-engines.md, "Choosing
# an engine"), in one run:
#   1-4. tests/bench/gvisor.sh's rows (BENCH_RUNC_ROWS, default "1 2 3 4": the CMake loop, make
#        after one change, make with nothing to do, qs's tests), once with BENCH_DRIVER=runsc and
#        once with runc, each a ratio to the same command natively; runc's targets <= 1.3, 1.3,
#        1.5, 1.2;
#   5.   `/bin/true` from request to result with a capsule started ahead (the median of
#        BENCH_RUNS, default 11, back to back), each engine; runc's target <= 60 ms; with the
#        median of each step of the daemon's timing lines (docs/performance.md);
#   6a-d. tests/bench/generations.sh's steady rows (the 80k-entry tree: /bin/true with nothing
#        changed, an import-heavy python, /bin/true after 1 file and after 1,000 files changed),
#        each engine against its own bare run (`runsc run`, or `runc run` with the tree bound
#        read-only at /work behind the walls lib.sh's bench_bare_runc_spec names); runc's
#        target <= 1.5 each;
#   7.   tests/bench/egress.sh's row 1: 100 MB through the egress proxy (forward and CONNECT)
#        against the same curl natively, each engine; runc's target <= 1.5.
# Knobs: BENCH_RUNS (gvisor.sh's, generations.sh's and egress.sh's runs per row, default 3
# here), BENCH_RUNC_ROWS (gvisor.sh's rows), BENCH_RUNC_PARTS (default "gvisor true
# generations egress": which of rows 1-4, 5, 6 and 7 run).
# Never fails because a target is missed (benchmarks report).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN=$BUILD/tentaflake-worker
RUNS=${BENCH_RUNS:-11}
# shellcheck source=tests/bench/lib.sh
. tests/bench/lib.sh
bench_need_worker
command -v runc >/dev/null || { echo "$ME: SKIP: runc is not installed"; exit 0; }
bench_platform
PARTS=" ${BENCH_RUNC_PARTS:-gvisor true generations egress} "
SUB_RUNS=${BENCH_RUNS:-3}

declare -A got
part_gvisor() {
        local drv line
        for drv in runsc runc; do
                while read -r line; do
                        echo "$drv: $line"
                        case $line in
                        row\ [1-4]:*) got[$drv-${line:4:1}]=$(sed -n 's|.*/ measured \([0-9.]*\) (request), \([0-9.]*\) (inside).*|\1 \2|p' <<<"$line") ;;
                        esac
                done < <(BENCH_DRIVER=$drv BENCH_RUNS=$SUB_RUNS BENCH_ROWS=${BENCH_RUNC_ROWS:-1 2 3 4} tests/bench/gvisor.sh 2>&1)
        done
}
# Rows 6a-d: generations.sh's steady rows, in the order it prints them (their labels are its).
part_generations() {
        local drv line k
        for drv in runsc runc; do
                k=0
                while read -r line; do
                        echo "$drv: generations: $line"
                        case $line in
                        *": worker "*" bare "*": ratio "*)
                                k=$((k + 1))
                                got[$drv-6-$k]=$(sed -n 's|.*: ratio \([0-9.]*\) (target \([0-9.]*\)).*|\1 \2|p' <<<"$line")
                                got[label-6-$k]=${line%%: worker *} ;;
                        esac
                done < <(BENCH_DRIVER=$drv BENCH_RUNS=$SUB_RUNS tests/bench/generations.sh 2>&1)
        done
}
# Row 7: egress.sh's row 1.
part_egress() {
        local drv line
        for drv in runsc runc; do
                while read -r line; do
                        echo "$drv: egress: $line"
                        case $line in
                        *"through the proxy in a capsule, forward:"*) got[$drv-7f]=$(sed -n 's|.*: ratio \([0-9.]*\) (target.*|\1|p' <<<"$line") ;;
                        *"through the proxy in a capsule, CONNECT:"*) got[$drv-7c]=$(sed -n 's|.*: ratio \([0-9.]*\) (target.*|\1|p' <<<"$line") ;;
                        *"floor ("*) got[$drv-7i]=$(sed -n 's|.*: ratio \([0-9.]*\)$|\1|p' <<<"$line") ;;
                        esac
                done < <(BENCH_DRIVER=$drv BENCH_RUNS=$SUB_RUNS BENCH_EGRESS_ROWS=1 tests/bench/egress.sh 2>&1)
        done
}
[[ $PARTS != *" gvisor "* ]] || part_gvisor
[[ $PARTS != *" generations "* ]] || part_generations
[[ $PARTS != *" egress "* ]] || part_egress

# Row 5: /bin/true with a capsule started ahead, per engine.
NAME=bench-runc
bench_base runc
daemon=
trap 'bench_cleanup "$NAME"' EXIT
mkdir -p "$base/ws" && chown 12345:12345 "$base/ws"
true_ms() { # true_ms DRIVER: the median request-to-result time of /bin/true, warm
        local i all=()
        bench_umount_store # the last engine's generation store, mounted on its state_dir
        rm -rf "$base/state" "$base/results"
        cat >"$base/config.json" <<JSON
{"version": 1, "name": "$NAME", "workspace": "$base/ws", "container_uid": 12345, "container_gid": 12345,
 "state_dir": "$base/state", "results_dir": "$base/results", "runtime": {"driver": "$1", "warm_seconds": 600}}
JSON
        bench_start_daemon "$BIN" "$base/config.json" "$base/daemon.log"
        for i in $(seq $((RUNS + 2))); do
                bench_next_n
                bench_write_request "$base/ws/.tentaflake-worker/inbox" "t$n" '["/bin/true"]'
                sleep 1 # not timed: the capsule started ahead boots as the last result is published
                bench_request "$base/ws/.tentaflake-worker/inbox" "$base/results" "t$n"
                [ "$i" -le 2 ] || all+=("$REQ_MS")
        done
        bench_stop_daemon
        bench_kill_capsules "/run/tentaflake-worker-$NAME/runsc"
        bench_timing "$base/daemon.log" t >"$base/timing-$1"
        echo "${all[*]}" >"$base/true-$1"
        printf '%s\n' "${all[@]}" | median
}
if [[ $PARTS == *" true "* ]]; then
        for drv in runsc runc; do
                got[$drv-5]=$(true_ms "$drv")
                echo "$drv: row 5: /bin/true request to result, warm: median ${got[$drv-5]} ms ($(cat "$base/true-$drv"))"
                echo "$drv: $(cat "$base/timing-$drv")"
        done
fi

echo
echo "engines ÷ native (request; inside the capsule in brackets); runc's target first (load $(load))"
targets=([1]=1.3 [2]=1.3 [3]=1.5 [4]=1.2)
for r in 1 2 3 4; do
        read -r a b <<<"${got[runc-$r]:-- -}"
        read -r c d <<<"${got[runsc-$r]:-- -}"
        echo "row $r: runc target ${targets[$r]} / measured $a ($b); runsc $c ($d)"
done
echo "row 5: runc target 60 ms / measured ${got[runc-5]:--} ms; runsc ${got[runsc-5]:--} ms"
echo "rows 6a-d: generations.sh's steady rows, worker ÷ the engine's own bare run"
letters=([1]=a b c d)
for k in 1 2 3 4; do
        read -r a _ <<<"${got[runc-6-$k]:--}"
        read -r c t <<<"${got[runsc-6-$k]:-- -}"
        echo "row 6${letters[$k]}: ${got[label-6-$k]:-(not run)}: runc target 1.5 / measured $a; runsc $c (÷ bare runsc; its target $t)"
done
echo "row 7: 100 MB through the egress proxy ÷ native: runc target 1.5 / measured ${got[runc-7f]:--} (forward), ${got[runc-7c]:--} (CONNECT), floor ${got[runc-7i]:--}; runsc ${got[runsc-7f]:--}, ${got[runsc-7c]:--}, floor ${got[runsc-7i]:--}"
