#!/bin/bash
# py15, moved here by py16 (pgroup added to cg.py): callgrind of one rank of cg.py (host memory, shm): the loop's ITERS
# windows alone (a dump before each marker call), and the instructions a
# window without uccl_wait_all's (its spinning depends on the peer; the work
# it does for the window is the same in every mode) and in it.
# cg.sh BUILD_DIR RANK OP SIZE MODE... (from the tree root; /usr/bin/python3
# with numpy and mpi4py). Files in $CG_OUT (default /tmp/py16-cg).
build=$1 rank=$2 op=$3 size=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
out=${CG_OUT:-/tmp/py16-cg}
mkdir -p "$out/stage/uccl"
cp python/uccl/*.py python/uccl/*.pyi "$out/stage/uccl/"
cp "$build/python/uccl/.libs/_uccl.so" "$out/stage/uccl/"
n=${ITERS:-500}
for mode in "$@"; do
    f=$out/cg-$op-$mode-r$rank
    rm -f "$f".*
    PYTHONPATH=$out/stage UCCL_TRANSPORTS=shm timeout 600 mpirun --oversubscribe --allow-run-as-root -np 2 \
        bash -c "if [ \$OMPI_COMM_WORLD_RANK = $rank ]; then exec valgrind --tool=callgrind --dump-before=upy_fast_stats --callgrind-out-file=$f.out /usr/bin/python3 $here/cg.py $mode $op $size $n 2>$f.log; else exec /usr/bin/python3 $here/cg.py $mode $op $size $n; fi" || echo "FAIL $mode"
    callgrind_annotate --inclusive=yes "$f.out.2" 2>/dev/null | tr -d , |
        awk -v n="$n" -v what="$op $mode rank $rank" '/PROGRAM TOTALS/ && !t {t = $1}
            /req.c:uccl_wait_all \[/ && !w {w = $1}
            END {printf "%s: %d instructions a window without uccl_wait_all, %d in it\n",
                 what, (t - w) / n, w / n}'
done
