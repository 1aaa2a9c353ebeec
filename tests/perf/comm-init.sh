#!/bin/sh
# How communicator init cost grows: tests/perf/b_comm_init (built here with
# mpicc against BUILD's libuccl) at 8, 32 and 64 ranks, over shm and tcp,
# eager (UCCL_LAZY_CONNECT=0) and lazy (=1). Oversubscribed on a small
# machine the times are inflated; compare the columns of one run.
#   tests/perf/comm-init.sh [BUILD_DIR] [RANKS...]
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
[ $# -gt 0 ] && shift
ranks=${*:-8 32 64}
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
mpicc -O2 -I"$src/include" "$src/tests/perf/b_comm_init.c" -L"$build/.libs" -luccl \
    -Wl,-rpath,"$build/.libs" -o "$bin" || exit 1
for n in $ranks; do
    for tp in shm tcp; do
        for lazy in 0 1; do
            printf '%-4s ' "$tp"
            UCCL_TRANSPORTS=$tp UCCL_LAZY_CONNECT=$lazy UCCL_TIMEOUT_MS=120000 timeout 300 \
                mpirun --allow-run-as-root --oversubscribe -np "$n" -x UCCL_TRANSPORTS \
                -x UCCL_LAZY_CONNECT -x UCCL_TIMEOUT_MS "$bin" 2>&1 | grep "^ranks" ||
                echo "ranks $n lazy $lazy: failed"
        done
    done
done
