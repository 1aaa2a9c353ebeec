#!/bin/bash
# coll10a's device call (host only, GPU unused): build libuccl + uccl_perf, then
# uccl_perf coll with the copy helper off (UCCL_COLL_COPY_THREAD=0: as before)
# and as by default (auto: on, 16 CPUs for at most 8 ranks), shm on buffers
# of uccl_mem_alloc (--mem uccl) and malloc'd ones (--mem host), then tcp from
# 1 MiB. Both Open MPI references (ob1 in the same
# job, pml ucx from its own mpirun) in every "auto" table and in the np 2
# uccl_mem_alloc "off" tables; other "off" tables carry ob1 only.
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
    echo "### np $np $tp $op --mem $mem UCCL_COLL_COPY_THREAD=$h $* ${XENV:+($XENV=${UCCL_TCP_SOCKBUF:-})}"
    UCCL_COLL_COPY_THREAD=$h timeout 90 mpirun $root --bind-to core --map-by core -np "$np" \
        -x UCCL_COLL_COPY_THREAD ${UCCL_COLL_COPY_MIN:+-x UCCL_COLL_COPY_MIN} ${XENV:-} --mca pml ob1 --mca btl "$btl" \
        tools/uccl_perf coll --op "$op" --transport "$tp" --mem "$mem" --min "$min" --max "$max" \
        --rounds 3 "${ucx[@]}" "$@" --json "$OUT/coll_${op}_${tp}_np${np}_${mem}_h$h${SFX:-}.json" 2>&1 |
        grep -v '^\[uccl'
}
t "shm np 2, 64 KiB - 16 MiB"
for op in alltoall allgather; do
    run 2 shm $op uccl 0 64K 16M
    run 2 shm $op uccl auto 64K 16M
done
for op in alltoall allgather; do
    run 2 shm $op host 0 64K 16M --ucx-ref off
    run 2 shm $op host auto 64K 16M
done
t "shm np 4, 64 KiB - 16 MiB"
for op in alltoall allgather; do
    run 4 shm $op uccl 0 64K 16M --ucx-ref off
    run 4 shm $op uccl auto 64K 16M
done
run 4 shm alltoall host auto 64K 16M
t "shm np 2, 8-32 KiB: helper from 8 KiB vs off"
run 2 shm alltoall uccl 0 8K 32K --ucx-ref off
UCCL_COLL_COPY_MIN=8K run 2 shm alltoall uccl 1 8K 32K --ucx-ref off
t "tcp from 1 MiB: UCCL_TCP_SOCKBUF 4M (default) vs 16M"
for np in 2 4; do for op in alltoall allgather; do
    run $np tcp $op host 0 1M 4M --ucx-ref off
    run $np tcp $op host auto 1M 4M
    export UCCL_TCP_SOCKBUF=16M
    XENV="-x UCCL_TCP_SOCKBUF" SFX=_SOCKBUF-16M run $np tcp $op host auto 1M 4M --ucx-ref off
    unset UCCL_TCP_SOCKBUF
done; done
t done
cd "$OUT" && tar czf json.tgz *.json && rm -f *.json
