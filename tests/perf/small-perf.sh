#!/bin/sh
# Small-message cost breakdown: tests/perf/b_small (built here with mpicc
# against BUILD's libuccl) at np 2, 4, 8 for 8 B and 1 KiB over shm: the
# library's allgather, the per-message public path (post / wait / free),
# persistent requests, and Open MPI (ob1/vader) in the same job.
# Oversubscribed on a small machine the times are inflated; compare the
# columns of one line.
#   tests/perf/small-perf.sh [BUILD_DIR] [NP...]
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
[ $# -gt 0 ] && shift
nps=${*:-2 4 8}
bin=$(mktemp)
trap 'rm -f "$bin"' EXIT
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
mpicc -O2 -I"$src/include" "$src/tests/perf/b_small.c" -L"$build/.libs" -luccl \
    -Wl,-rpath,"$build/.libs" -o "$bin" || exit 1
for np in $nps; do
    for bytes in 8 1024; do
        UCCL_TRANSPORTS=shm timeout 300 mpirun $root --oversubscribe --bind-to none -np "$np" \
            --mca pml ob1 --mca btl self,vader -x UCCL_TRANSPORTS "$bin" "$bytes" \
            "${SMALL_PERF_ITERS:-20000}" 2>&1 | grep -v '^\[uccl' ||
            echo "np $np bytes $bytes: failed"
    done
done
