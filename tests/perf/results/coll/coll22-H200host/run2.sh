#!/bin/bash
# coll22's device call 2 (host cores only, GPU unused):
# 1. cma_bench.c: what one process's copy of its peers' blocks costs by
#    process_vm_readv (CMA), from a shared mapping, and staged (two copies),
#    2 and 4 processes at once.
# 2. The uccl_mem_alloc control of call 1 again (np 4 alltoall took 23 us at
#    64 KiB there, 14.4 us in coll10a): this tree against coll10a's tree
#    (e9932fc, in OLD), alternating, same machine.
# 3. The malloc'd default tables (np 4) with both references once more.
# Run from the tree's root: OUT=dir OLD=dir bash tests/perf/results/coll/coll22-H200host/run2.sh
set -u
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
OUT=${OUT:-/tmp/coll22-out2}; OLD=${OLD:-old}; DEADLINE=${DEADLINE:-70}; MAKEJ=${MAKEJ:-8}
MPIOPTS=${MPIOPTS:-"--bind-to core --map-by core"}; ROUNDS=${ROUNDS:-5}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
date -u; lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"; nvidia-smi -L 2>/dev/null
ROOT=$PWD
build() { # build DIR
    (cd "$1" && { [ -x build-host/tools/uccl_perf ] || { ./autogen.sh >/dev/null 2>&1 && mkdir -p build-host &&
        (cd build-host && ../configure --without-cuda --enable-werror >configure.log 2>&1); }; } &&
     make -C build-host -j"$MAKEJ" libuccl.la tools/uccl_perf >make.log 2>&1) || { echo "build of $1 failed"; return 1; }
}
t build
build "$ROOT" & p1=$!
build "$ROOT/$OLD" & p2=$!
cc -O2 -Wall -o "$OUT/cma_bench" tests/perf/results/coll/coll22-H200host/cma_bench.c || exit 1
t cma_bench
"$OUT/cma_bench" 64 4096 65536 262144 1048576
rm -f "$OUT/cma_bench"
wait $p1 || exit 1
wait $p2 || exit 1
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
run() { # run TREE(main|old) NAME NP OP MEM [uccl_perf args]
    local tree=$1 name=$2 np=$3 op=$4 mem=$5 dir=$ROOT
    shift 5
    [ "$tree" = old ] && dir=$ROOT/$OLD
    if [ $(( $(date +%s) - S )) -ge "$DEADLINE" ]; then echo "### skipped (deadline): $tree $name"; return; fi
    echo "### $tree $name: np $np shm $op --mem $mem $* (t=$(( $(date +%s) - S ))s)"
    (cd "$dir/build-host" && timeout 60 mpirun $root $MPIOPTS -np "$np" --mca pml ob1 --mca btl self,vader \
        tools/uccl_perf coll --op "$op" --transport shm --mem "$mem" --min 64K --max 1M \
        --rounds "$ROUNDS" "$@" --json "$OUT/coll_${op}_np${np}_${mem}_${tree}${name}.json" 2>&1 |
        grep -v '^\[uccl')
}
t "uccl_mem_alloc: this tree vs e9932fc"
run main 1 4 alltoall uccl
run old 1 4 alltoall uccl --ucx-ref off
run main 2 4 alltoall uccl --ucx-ref off
run old 2 4 alltoall uccl --ucx-ref off
run main 1 4 allgather uccl --ucx-ref off
run old 1 4 allgather uccl --ucx-ref off
t "malloc'd buffers, defaults"
run main 4 4 alltoall host
run main 4 4 allgather host
t done
cd "$OUT" && tar czf json.tgz *.json && rm -f *.json
