#!/bin/bash
# coll10a's device call (host only, GPU unused): build libuccl + uccl_perf, then
# uccl_perf coll with the copy helper off (UCCL_COLL_COPY_THREAD=0: as before)
# and on (=1), shm on buffers of uccl_mem_alloc (--mem uccl) and malloc'd ones
# (--mem host), then tcp from 1 MiB. Both Open MPI references (ob1 in the same
# job, pml ucx from its own mpirun) in every "on" table; the "off" tables of
# the same pair carry ob1 only (same machine, run just before).
# Run from the tree's root: OUT=dir bash tests/perf/results/coll/coll10a-H200host/run.sh
set -u
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
OUT=${OUT:-/tmp/coll10a-out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
for d in ../.debs ../../.debs .debs; do [ -d "$d" ] && dpkg -i "$d"/*.deb >/dev/null && echo "installed $d"; done
lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"
t build
./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
mkdir -p build-host && cd build-host || exit 1
../configure --without-cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
make -j16 libuccl.la tools/uccl_perf >make.log 2>&1 || { grep -E "error|Error" make.log | head -40; exit 1; }
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
run() { # run NP TP OP MEM HELPER MIN MAX [uccl_perf args]
    local np=$1 tp=$2 op=$3 mem=$4 h=$5 min=$6 max=$7 btl=self,vader ucx=()
    shift 7
    [ "$tp" = tcp ] && btl=self,tcp && ucx=(--ucx-tls tcp,self)
    echo "### np $np $tp $op --mem $mem UCCL_COLL_COPY_THREAD=$h $*"
    UCCL_COLL_COPY_THREAD=$h timeout 90 mpirun $root --bind-to core --map-by core -np "$np" \
        -x UCCL_COLL_COPY_THREAD -x UCCL_COLL_COPY_MIN ${XENV:-} --mca pml ob1 --mca btl "$btl" \
        tools/uccl_perf coll --op "$op" --transport "$tp" --mem "$mem" --min "$min" --max "$max" \
        --rounds 3 "${ucx[@]}" "$@" --json "$OUT/coll_${op}_${tp}_np${np}_${mem}_h$h${SFX:-}.json" 2>&1 |
        grep -v '^\[uccl'
}
export UCCL_COLL_COPY_MIN=${COPY_MIN:-64K}
t "shm np 2"
for op in alltoall allgather; do
    run 2 shm $op uccl 0 64K 16M --ucx-ref off
    run 2 shm $op uccl 1 64K 16M
done
run 2 shm alltoall host 0 64K 16M --ucx-ref off
run 2 shm alltoall host 1 64K 16M
t "shm np 4"
for op in alltoall allgather; do
    run 4 shm $op uccl 0 64K 16M --ucx-ref off
    run 4 shm $op uccl 1 64K 16M
done
t "tcp np 2 and 4 from 1 MiB"
for np in 2 4; do for op in alltoall allgather; do
    run $np tcp $op host 0 1M 4M --ucx-ref off
    run $np tcp $op host 1 1M 4M
done; done
t "tcp np 4 alltoall: UCCL_TCP_SOCKBUF=16M, UCCL_TCP_CHUNK=1M, UCCL_TCP_NUM_STREAMS=8"
for v in UCCL_TCP_SOCKBUF=16M UCCL_TCP_CHUNK=1M UCCL_TCP_NUM_STREAMS=8; do
    echo "## $v"
    export "$v"
    XENV="-x ${v%%=*}" SFX="_$(echo ${v#UCCL_TCP_} | tr = -)" run 4 tcp alltoall host 1 1M 4M --ucx-ref off
    unset "${v%%=*}"
done
t done
cd "$OUT" && tar czf json.tgz *.json && rm -f *.json
