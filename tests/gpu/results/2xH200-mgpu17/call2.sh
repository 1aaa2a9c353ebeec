#!/bin/bash
# mgpu17, device call 2 (2x H200, one process a GPU, np 2): main (the checkout's root) against
# branch mgpu17 (.dev/mgpu17: UCCL_GPU_IPC_DUPLEX_PULL_MAX=4G, UCCL_COLL_GPU_COPY_LATE=1 by
# default), alternating jobs: round 1 with the references (NCCL, ceilings), 1-256 MiB received;
# round 2 without, 8 KiB-256 MiB, the other order; the branch with each change off (which one
# helps); the timeline (UCCL_COLL_TRACE + UCCL_GPU_IPC_PROF) at 1 MiB a peer with both changes
# off and on; then t_coll_gpu np 2 (gpu, mixed) and t_gpu_ipc on the branch.
# Run from the main tree's root; FAKE=1 rehearses on the fake GPU backend (no NCCL, small sizes).
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=${OUT:?}; mkdir -p $R/logs; ROOT=$PWD
B=$ROOT/.dev/mgpu17
if [ -z "$FAKE" ]; then
    nvidia-smi -L; nproc
    t "build main and mgpu17 side by side"
    for tree in $ROOT $B; do
        ( cd $tree && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-ab && cd build-ab &&
          ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
          make -j16 libuccl.la tools/uccl_perf >make.log 2>&1 &&
          { [ $tree = $ROOT ] || make -j16 tests/gpu/t_gpu_ipc tests/mpi/t_coll_gpu >>make.log 2>&1; } ||
          { echo "BUILD FAILED in $tree"; tail -20 configure.log make.log; } ) &
    done
    wait
    A_DIR=$ROOT/build-ab; B_DIR=$B/build-ab
    NCCL_DIR=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null)
    [ -n "$NCCL_DIR" ] && export LD_LIBRARY_PATH="$NCCL_DIR/lib:${LD_LIBRARY_PATH:-}"
    export CUDA_VISIBLE_DEVICES=0,1
    LO=512K; HI=128M; SLO=4K; NOREF=; ATTR_HI=8M
else
    A_DIR=${A_DIR:?}; B_DIR=${B_DIR:?}
    LO=512K; HI=1M; SLO=4K; NOREF=--no-ref; ATTR_HI=1M
fi
M="mpirun --allow-run-as-root --oversubscribe --bind-to none --map-by slot -np 2 --mca btl self,vader,tcp
   -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS"
[ -z "$FAKE" ] && M="$M -x CUDA_VISIBLE_DEVICES"
rows() { grep -E "^ +[0-9]|MISMATCH|rror|failed" | grep -v "^\[" ; }
# job NAME DIR OP MIN MAX EXTRA-uccl_perf-args ENV...
job() {
    local name=$1 dir=$2 op=$3 min=$4 max=$5 extra=$6; shift 6
    local xs=""; for kv in "$@"; do xs="$xs -x $kv"; done
    echo "# $name: $op $min..$max $extra $*"
    (cd $dir && timeout 60 $M $xs tools/uccl_perf coll --mem cuda --op $op --min $min --max $max $extra \
        --json $R/logs/$name.json > $R/logs/$name.log 2>&1; echo "rc $?")
    rows < $R/logs/$name.log
}
t "round 1: with the references, main then mgpu17"
for op in allgather alltoall; do
    job r1-$op-main $A_DIR $op $LO $HI "--rounds 3 $NOREF"
    job r1-$op-mgpu17 $B_DIR $op $LO $HI "--rounds 3 $NOREF"
done
grep -E "^#   " $R/logs/r1-allgather-main.log | head -8
t "round 2: no references, mgpu17 then main, from $SLO"
for op in allgather alltoall; do
    job r2-$op-mgpu17 $B_DIR $op $SLO $HI "--rounds 3 --no-ref"
    job r2-$op-main $A_DIR $op $SLO $HI "--rounds 3 --no-ref"
done
t "attribution: mgpu17 with one change off"
for op in allgather alltoall; do
    job ab-$op-noduplex $B_DIR $op $LO $ATTR_HI "--rounds 3 --no-ref" UCCL_GPU_IPC_DUPLEX_PULL_MAX=0
    job ab-$op-nolate $B_DIR $op $LO $ATTR_HI "--rounds 3 --no-ref" UCCL_COLL_GPU_COPY_LATE=0
done
t "timeline at 1 MiB a peer: both changes off (main's path), then on"
for op in allgather alltoall; do
    job tl-$op-off $B_DIR $op 1M 1M "--rounds 1 --no-ref" UCCL_GPU_IPC_PROF=1 UCCL_COLL_TRACE=1 \
        UCCL_GPU_IPC_DUPLEX_PULL_MAX=0 UCCL_COLL_GPU_COPY_LATE=0
    grep -E "gpu_ipc prof|coll trace" $R/logs/tl-$op-off.log
    job tl-$op-on $B_DIR $op 1M 1M "--rounds 1 --no-ref" UCCL_GPU_IPC_PROF=1 UCCL_COLL_TRACE=1
    grep -E "gpu_ipc prof|coll trace" $R/logs/tl-$op-on.log
done
t "tests on mgpu17: t_coll_gpu np 2 gpu / mixed, t_gpu_ipc"
cd $B_DIR
for m in gpu mixed; do
    timeout 90 $M -x T_COLL_MEM=$m -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000 \
        tests/mpi/t_coll_gpu > $R/logs/t_coll_gpu_$m.log 2>&1
    echo "t_coll_gpu $m np 2 exit $? ($(grep -c '^ok' $R/logs/t_coll_gpu_$m.log) ok, $(grep -c '^FAIL' $R/logs/t_coll_gpu_$m.log) FAIL, $(grep -c '^SKIP' $R/logs/t_coll_gpu_$m.log) SKIP)"
    grep -E "^FAIL" $R/logs/t_coll_gpu_$m.log | head -5
done
timeout 120 $M tests/gpu/t_gpu_ipc > $R/logs/t_gpu_ipc.log 2>&1
echo "t_gpu_ipc exit $? ($(grep -c '^ok' $R/logs/t_gpu_ipc.log) ok)"; grep -E "PASS|FAIL|skipped" $R/logs/t_gpu_ipc.log | sort | uniq -c | head
t end
cd $R && tar czf logs.tgz logs && rm -rf logs
