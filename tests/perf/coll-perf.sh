#!/bin/bash
# coll-perf.sh BUILD_DIR [OUT_DIR]: uccl_perf coll for allgather, alltoall,
# alltoallv and bcast on np 2 and 4, over shm and over tcp, 8 B .. 16 MiB per
# rank block, each run with both Open MPI references in it: ob1 in the same
# job (btl self,vader for shm, self,tcp for tcp) and Open MPI over UCX (pml
# ucx, osc ucx, any UCX transport/device; UCX_TLS=tcp,self for tcp) from
# its own mpirun before the table. Tables to stdout, JSON to OUT_DIR.
# COLL_PERF_NP, COLL_PERF_OPS, COLL_PERF_TPS, COLL_PERF_MAX, COLL_PERF_MIN,
# COLL_PERF_ROUNDS narrow it; COLL_PERF_MEMS="host uccl" adds runs on host
# buffers of uccl_mem_alloc (--mem uccl; JSON coll_OP_TP_npN_uccl.json);
# COLL_PERF_ALGOS="direct linear" adds forced-algorithm runs
# (shm, no UCX reference) to compare the table's choices.
set -u
build=${1:?usage: coll-perf.sh BUILD_DIR [OUT_DIR]}
out=${2:-.}
mkdir -p "$out"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
perf=$build/tools/uccl_perf
max=${COLL_PERF_MAX:-16M} min=${COLL_PERF_MIN:-8} rounds=${COLL_PERF_ROUNDS:-3}
run() { # run NP TRANSPORT OP [uccl_perf args...]
    local np=$1 tp=$2 op=$3 btl=self,vader ucx=() bind="--bind-to core --map-by core"
    shift 3
    [ "$tp" = tcp ] && btl=self,tcp && ucx=(--ucx-tls tcp,self)
    [ "$(nproc)" -lt $((2 * np)) ] && bind="--oversubscribe --bind-to none"
    echo "### np $np $tp $op $*"
    timeout 300 mpirun $root $bind -np "$np" --mca pml ob1 --mca btl "$btl" "$perf" coll \
        --op "$op" --transport "$tp" --min "$min" --max "$max" --rounds "$rounds" "${ucx[@]}" "$@" 2>&1 |
        grep -v '^\[uccl'
}
for np in ${COLL_PERF_NP:-2 4}; do
    for tp in ${COLL_PERF_TPS:-shm tcp}; do
        for op in ${COLL_PERF_OPS:-allgather alltoall alltoallv bcast}; do
            for mem in ${COLL_PERF_MEMS:-host}; do
                sfx=$([ "$mem" = host ] || echo "_$mem")
                run "$np" "$tp" "$op" --mem "$mem" --json "$out/coll_${op}_${tp}_np$np$sfx.json"
            done
        done
    done
    for algo in ${COLL_PERF_ALGOS:-}; do
        for op in allgather alltoall; do
            run "$np" shm "$op" --algo "$algo" --ucx-ref off --rounds 1 --min 1K
        done
    done
done
