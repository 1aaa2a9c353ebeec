#!/bin/bash
# coll13b device call: which UCCL_TCP_RNDV_MIN. Host-memory allgather and
# alltoall over tcp, np 4 and 2 on one host, and np 4 split into two emulated
# hosts (UCCL_HOST_ID by rank parity: shm inside a host, tcp between), each
# job with Open MPI's tcp path (pml ob1, btl self,tcp) as reference. Variants:
# 1M (coll13's default) and 256K on 64 KiB-4 MiB, 128K on 64-256 KiB (above
# that it equals 256K). A message below the threshold is sent eagerly, so the
# variants differ only where some message is below 1M; the rows from 1 MiB
# (2 MiB for two hosts) run the same code and show the call-to-call noise.
# The variant order alternates between ops. From the source root:
#   OUT=dir bash tests/perf/results/coll/coll13-host/run-rndv.sh
# (PERF_ITERS, PERF_ROUNDS, PERF_MAX narrow it; PERF_BUILD=1 forces a build.)
set -u
OUT=${OUT:-/tmp/coll13b-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
S=$(date +%s)
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"
mpirun --version | head -1
perf=build-host/tools/uccl_perf
# a carried build (static libuccl) is used when it runs here, else one is made
"$perf" coll --help >/dev/null 2>&1; rc=$? # 126/127: not found or cannot run here
ldd "$perf" 2>&1 | grep "not found"
if [ "${PERF_BUILD:-0}" = 1 ] || [ $rc -ge 126 ]; then
    echo "### building ($(date +%T))"
    rm -rf build-host
    ./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
    mkdir -p build-host && (cd build-host && ../configure --without-cuda --enable-werror >configure.log 2>&1 &&
        make -j16 libuccl.la tools/uccl_perf >make.log 2>&1) || { grep -E "error" build-host/*.log | head; exit 1; }
fi
echo "### uccl_perf ready (t=$(( $(date +%s) - S ))s)"
job() { # np hosts op variant min max
    local np=$1 hosts=$2 op=$3 v=$4 min=$5 max=$6 tp=tcp wrap=() bind="--bind-to core --map-by core"
    [ "$(nproc)" -lt $((2 * np)) ] && bind="--oversubscribe --bind-to none"
    [ "$hosts" = 2 ] && tp=shm,tcp wrap=(tests/mpi/host-by-parity.sh)
    echo "### np $np hosts $hosts $op UCCL_TCP_RNDV_MIN=$v ($(date +%T), t=$(( $(date +%s) - S ))s)"
    UCCL_TCP_RNDV_MIN=$v timeout 60 mpirun $root $bind -np "$np" -x UCCL_TCP_RNDV_MIN \
        --mca pml ob1 --mca btl self,tcp "${wrap[@]}" "$perf" coll --op "$op" --transport "$tp" \
        --min "$min" --max "$max" --iters "${PERF_ITERS:-10}" --rounds "${PERF_ROUNDS:-3}" \
        --ucx-ref off --json "$OUT/r_${op}_np${np}_h${hosts}_$v.json" 2>&1 | grep -v '^\[uccl'
}
for cfg in "4 1" "2 1" "4 2"; do
    set -- $cfg
    job "$1" "$2" allgather 1M 64K "${PERF_MAX:-4M}"
    job "$1" "$2" allgather 256K 64K "${PERF_MAX:-4M}"
    job "$1" "$2" allgather 128K 64K 256K
    job "$1" "$2" alltoall 128K 64K 256K
    job "$1" "$2" alltoall 256K 64K "${PERF_MAX:-4M}"
    job "$1" "$2" alltoall 1M 64K "${PERF_MAX:-4M}"
done
echo "### done $(date +%T) (t=$(( $(date +%s) - S ))s)"
