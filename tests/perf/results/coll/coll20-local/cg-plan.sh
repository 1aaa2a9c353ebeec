#!/bin/bash
# callgrind of one rank (RANK, default 0) of `uccl_perf coll` (np 2, shm, host memory, 8 B,
# ITERS calls; the other rank runs natively), collecting only inside the persistent form's
# calls: uccl_coll_start, uccl_wait and uccl_req_free (coll19's cg.sh, other toggles):
#   cg-plan.sh BUILD_DIR OUT_DIR [OPS]      (OPS: "bcast scatter gather allgather alltoall")
# uccl_perf times the plain calls first, then the plan's (each after an MPI_Barrier): the
# last dump (OP.out, at the program's end) holds the plan's ITERS timed start + wait + free alone.
# EXCL=FN: a further toggle that stops collecting inside FN (e.g. uccl_coll_mapped_advance).
set -u
b=$(cd "$1" && pwd); o=$2; mkdir -p "$o"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
for op in ${3:-bcast scatter gather allgather alltoall}; do
    f=$o/$op
    rm -f "$f".out*
    mpirun $root --oversubscribe -np 2 --mca pml ob1 --mca btl self,vader bash -c \
        "if [ \$OMPI_COMM_WORLD_RANK = ${RANK:-0} ]; then exec valgrind --tool=callgrind \
         --toggle-collect=uccl_coll_start --toggle-collect=uccl_wait --toggle-collect=uccl_req_free \
         ${EXCL:+--toggle-collect=$EXCL} --dump-before=PMPI_Barrier --callgrind-out-file=$f.out $b/tools/uccl_perf coll \
         --op $op --transport shm --min 8 --max 8 --iters ${ITERS:-2000} --warmup 3 \
         --no-ref --ucx-ref off 2>$f.log; else exec $b/tools/uccl_perf coll --op $op \
         --transport shm --min 8 --max 8 --iters ${ITERS:-2000} --warmup 3 --no-ref \
         --ucx-ref off >/dev/null; fi" >"$f.perf.txt" 2>&1 || echo "FAIL $op"
done
