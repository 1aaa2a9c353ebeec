#!/bin/bash
# coll13 device call: host-memory allgather and alltoall over tcp, np 4 and 2,
# 1-4 MiB per block, tcp rendezvous on (the default, UCCL_TCP_RNDV_MIN=1M)
# and off (UCCL_TCP_RNDV_MIN=0: every message eager, main's behaviour)
# alternating, Open MPI ob1 (btl self,tcp) in every job and Open MPI over
# UCX (UCX_TLS=tcp,self) before each "on" table; on np 4 also a third
# variant, r256 (UCCL_TCP_RNDV_MIN=256K), and sizes from 256 KiB. Run from
# the source root:
#   OUT=dir bash tests/perf/results/coll/coll13-host/run.sh
# (PERF_MIN, PERF_MAX, PERF_ITERS, PERF_ROUNDS, PERF_NPS narrow it.)
set -u
OUT=${OUT:-/tmp/coll13-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"
mpirun --version | head -1
if [ ! -x build-host/tools/uccl_perf ]; then
    ./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
    mkdir -p build-host && (cd build-host && ../configure --without-cuda --enable-werror >configure.log 2>&1 &&
        make -j16 libuccl.la tools/uccl_perf >make.log 2>&1) || { grep -E "error" build-host/*.log | head; exit 1; }
fi
perf=build-host/tools/uccl_perf
for np in ${PERF_NPS:-4 2}; do
    bind="--bind-to core --map-by core"
    [ "$(nproc)" -lt $((2 * np)) ] && bind="--oversubscribe --bind-to none"
    for op in allgather alltoall; do
        vs="on off" min=${PERF_MIN:-1M}
        [ $np = 4 ] && vs="on off r256" min=${PERF_MIN:-256K}
        for v in $vs; do
            ucx=(--ucx-tls tcp,self) rmin=1M
            [ $v = off ] && ucx=(--ucx-ref off) rmin=0
            [ $v = r256 ] && ucx=(--ucx-ref off) rmin=256K
            echo "### np $np tcp $op rndv $v (UCCL_TCP_RNDV_MIN=$rmin) $(date +%T)"
            UCCL_TCP_RNDV_MIN=$rmin timeout 120 mpirun $root $bind -np $np -x UCCL_TCP_RNDV_MIN \
                --mca pml ob1 --mca btl self,tcp $perf coll --op $op --transport tcp \
                --min "$min" --max "${PERF_MAX:-4M}" --iters "${PERF_ITERS:-20}" \
                --rounds "${PERF_ROUNDS:-3}" "${ucx[@]}" --json "$OUT/coll_${op}_tcp_np${np}_rndv_$v.json" 2>&1 |
                grep -v '^\[uccl'
        done
    done
done
echo "### done $(date +%T)"
