#!/bin/bash
# host-perf.sh BUILD_DIR [OUT_DIR]: the [A] benchmarks, each in one uccl_perf
# run next to Open MPI in the same job: shm send/write/read against btl
# self,vader (CMA single copy), tcp send against btl self,tcp. Open MPI 4.1.6
# found no one-sided path for MPI_Win_create on the device machine with btl
# self,vader nor self,vader,tcp (osc rdma), so write/read references use osc
# pt2pt (one-sided emulated over the send path): over self,vader for shm and
# over self,tcp for tcp. Tables to stdout, JSON to OUT_DIR.
set -u
build=${1:?usage: host-perf.sh BUILD_DIR [OUT_DIR]}
out=${2:-.}
mkdir -p "$out"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
perf=$build/tools/uccl_perf
min=${PERF_MIN:-4K} max=${PERF_MAX:-64M}
# one core per rank when there are enough, so the two ranks do not share one
bind=--bind-to\ core
[ "$(nproc)" -lt 4 ] && bind="--oversubscribe --bind-to none"
run() { # run TRANSPORT OP BTL [MPIRUN_ARGS...]
    local tp=$1 op=$2 btl=$3
    shift 3
    echo "### $tp $op (reference btl $btl $*)"
    timeout 300 mpirun $root $bind -np 2 --mca btl "$btl" "$@" "$perf" p2p --transport "$tp" --op "$op" \
        --min "$min" --max "$max" --json "$out/perf_host_${tp}_$op.json" 2>&1 | grep -v '^\[uccl'
}
run shm send self,vader
for op in write read; do run shm $op self,vader --mca osc pt2pt; done
run tcp send self,tcp
for op in write read; do run tcp $op self,tcp --mca osc pt2pt; done
