# shellcheck shell=bash
# gen_cmake DIR: a zlib-sized CMake C project in DIR/cmk, made here (the benches fetch nothing for
# it): a static library of 40 files of 40 functions each, 4 test programs linked against it,
# registered with ctest. Sourced by tests/bench/gvisor.sh and tests/bench/gvisor-levers.sh.
gen_cmake() { # gen_cmake DIR
        local d=$1/cmk i j
        mkdir -p "$d/src" "$d/tests"
        {
                echo 'cmake_minimum_required(VERSION 3.13)'
                echo 'project(benchlib C)'
                echo 'enable_testing()'
                printf 'add_library(benchlib STATIC'
                for i in $(seq 40); do printf ' src/m%d.c' "$i"; done
                echo ')'
                echo 'target_include_directories(benchlib PUBLIC src)'
                for i in 1 2 3 4; do
                        echo "add_executable(t$i tests/t$i.c)"
                        echo "target_link_libraries(t$i benchlib)"
                        echo "add_test(NAME t$i COMMAND t$i)"
                done
        } >"$d/CMakeLists.txt"
        : >"$d/src/benchlib.h"
        for i in $(seq 40); do
                {
                        echo '#include <string.h>'
                        echo '#include "benchlib.h"'
                        for j in $(seq 40); do
                                echo "unsigned m${i}_f$j(const unsigned char *p, unsigned long n) {"
                                echo "        unsigned h = $j; for (unsigned long k = 0; k < n; k++) h = h * 31 + p[k] + (h >> $((j % 13 + 1)));"
                                echo "        return h ^ (unsigned) strlen((const char *) p);"
                                echo '}'
                        done
                } >"$d/src/m$i.c"
                for j in $(seq 40); do echo "unsigned m${i}_f$j(const unsigned char *p, unsigned long n);" >>"$d/src/benchlib.h"; done
        done
        for i in 1 2 3 4; do
                {
                        echo '#include <stdio.h>'
                        echo '#include "benchlib.h"'
                        echo 'int main(void) { unsigned h = 0; const unsigned char s[] = "tentaflake";'
                        for j in $(seq 10 10 40); do echo "        h += m$((i * 10))_f$j(s, sizeof(s) - 1);"; done
                        echo '        printf("%u\n", h); return h == 0; }'
                } >"$d/tests/t$i.c"
        done
}
