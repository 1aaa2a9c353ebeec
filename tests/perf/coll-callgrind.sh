#!/bin/bash
# callgrind of one rank (RANK, default 0) of `uccl_perf coll` (np 2, shm, host memory, SIZE bytes (default 8),
# ITERS calls; rank 1 runs natively), collecting only inside uccl_coll:
#   coll-callgrind.sh BUILD_DIR OUT_DIR [OPS]     (OPS: "bcast scatter gather")
# RANK=1: callgrind on rank 1 instead (the root, rank 0, runs natively).
# EXCL=uccl_coll_mapped_run: a second toggle that stops collecting inside
# that function (the flag polls: how often they go round depends on the
# other rank's pace on this loaded 2-core machine), so that the count is
# the path around the mapped run alone, the same at every run.
# OUT_DIR/OP.out (callgrind), OP.self.txt (instructions per function,
# exclusive), OP.incl.txt (inclusive); the per-call figures: coll-callgrind.py.
set -u
b=$(cd "$1" && pwd); o=$2; mkdir -p "$o"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
for op in ${3:-bcast scatter gather}; do
    f=$o/$op
    mpirun $root --oversubscribe -np 2 --mca pml ob1 --mca btl self,vader bash -c \
        "if [ \$OMPI_COMM_WORLD_RANK = ${RANK:-0} ]; then exec valgrind --tool=callgrind \
         --toggle-collect=uccl_coll ${EXCL:+--toggle-collect=$EXCL} --dump-before=PMPI_Barrier --callgrind-out-file=$f.out $b/tools/uccl_perf coll \
         --op $op --transport shm --min ${SIZE:-8} --max ${SIZE:-8} --iters ${ITERS:-2000} --warmup 3 \
         --no-ref --ucx-ref off 2>$f.log; else exec $b/tools/uccl_perf coll --op $op \
         --transport shm --min ${SIZE:-8} --max ${SIZE:-8} --iters ${ITERS:-2000} --warmup 3 --no-ref \
         --ucx-ref off >/dev/null; fi" >"$f.perf.txt" 2>&1 || echo "FAIL $op"
    callgrind_annotate --threshold=100 --inclusive=no "$f.out" >"$f.self.txt" 2>/dev/null
    callgrind_annotate --threshold=100 --inclusive=yes "$f.out" >"$f.incl.txt" 2>/dev/null
done
