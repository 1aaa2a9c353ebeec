#!/bin/bash
# coll22's device call 1 (host cores only, GPU unused): build libuccl +
# uccl_perf from this tree, then uccl_perf coll on malloc'd buffers (--mem
# host) over shm at 64 KiB - 1 MiB per block, one table per setting of the
# existing knobs (shm transport and collectives), np 4 and np 2, allgather and
# alltoall. Every table has ob1 (Open MPI, pml ob1 + btl vader, same job);
# the "default" tables also Open MPI over UCX (pml ucx, its own mpirun). One
# uccl_mem_alloc table per op as a control. Steps stop being started once
# DEADLINE seconds have passed.
# Run from the tree's root: OUT=dir bash tests/perf/results/coll/coll22-H200host/run.sh
set -u
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
OUT=${OUT:-/tmp/coll22-out}; DEADLINE=${DEADLINE:-150}; MIN=${MIN:-64K}; MAX=${MAX:-1M}
ROUNDS=${ROUNDS:-5}; MAKEJ=${MAKEJ:-16}; MPIOPTS=${MPIOPTS:-"--bind-to core --map-by core"}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
date -u; lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"; nvidia-smi -L 2>/dev/null
t build
if [ ! -x build-host/tools/uccl_perf ]; then
    ./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
    mkdir -p build-host && (cd build-host && ../configure --without-cuda --enable-werror >configure.log 2>&1) ||
        { tail -30 build-host/configure.log; exit 1; }
fi
make -C build-host -j"$MAKEJ" libuccl.la tools/uccl_perf >"$OUT/make.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/make.log" | head -40; exit 1; }
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
run() { # run NAME NP OP MEM "VAR=val ..." [uccl_perf args]
    local name=$1 np=$2 op=$3 mem=$4 envs=$5 xs=() kv
    shift 5
    if [ $(( $(date +%s) - S )) -ge "$DEADLINE" ]; then echo "### skipped (deadline): $name np $np $op $mem"; return; fi
    for kv in $envs; do xs+=(-x "$kv"); done
    echo "### $name: np $np shm $op --mem $mem [$envs] $* (t=$(( $(date +%s) - S ))s)"
    (cd build-host && env $envs timeout 60 mpirun $root $MPIOPTS -np "$np" \
        "${xs[@]}" --mca pml ob1 --mca btl self,vader \
        tools/uccl_perf coll --op "$op" --transport shm --mem "$mem" --min "$MIN" --max "$MAX" \
        --rounds "$ROUNDS" "$@" --json "$OUT/coll_${op}_np${np}_${mem}_${name}.json" 2>&1 |
        grep -v '^\[uccl')
}
# name -> environment (the settings swept)
declare -A V=(
    [eager1M]="UCCL_SHM_EAGER_THRESHOLD=1M"
    [eager256K]="UCCL_SHM_EAGER_THRESHOLD=256K"
    [eager1M_ring16M]="UCCL_SHM_EAGER_THRESHOLD=1M UCCL_SHM_RING_SIZE=16M"
    [cmaoff]="UCCL_SHM_CMA=off"
    [cmaoff_chunk256K]="UCCL_SHM_CMA=off UCCL_SHM_CHUNK=256K"
    [helper64K]="UCCL_SHM_CMA_HELPER=on UCCL_SHM_CMA_HELPER_MIN=64K"
    [helper256K]="UCCL_SHM_CMA_HELPER=on UCCL_SHM_CMA_HELPER_MIN=256K"
    [split0]="UCCL_SHM_SPLIT_MIN=0"
    [split256K]="UCCL_SHM_SPLIT_MIN=256K"
    [direct]="UCCL_COLL_ALGO=direct"
    [mapped]="UCCL_COLL_ALGO=mapped"
    [copy0]="UCCL_COLL_COPY_THREAD=0"
)
NP4=${NP4:-"eager1M cmaoff cmaoff_chunk256K helper64K direct mapped copy0 eager256K eager1M_ring16M helper256K split0 split256K"}
NP2=${NP2:-"eager1M cmaoff eager256K mapped"}
pass() { # pass N: every np 4 setting once, a default table (both references) before
    for op in alltoall allgather; do
        t "np 4 $op, pass $1"
        run "default$1" 4 "$op" host ""
        for v in $NP4; do run "${v}_$1" 4 "$op" host "${V[$v]}" --ucx-ref off; done
    done
}
pass 1
for op in alltoall allgather; do
    t "np 2 $op"
    run default1 2 "$op" host ""
    for v in $NP2; do run "$v" 2 "$op" host "${V[$v]}" --ucx-ref off; done
done
t "control: uccl_mem_alloc buffers"
for op in alltoall allgather; do run default 4 "$op" uccl ""; done
pass 2
for op in alltoall allgather; do run default3 4 "$op" host ""; done
t done
cd "$OUT" && tar czf json.tgz *.json && rm -f *.json
