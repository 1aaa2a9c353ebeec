#!/bin/bash
# mgpu17, device call 1 (2x H200, one process a GPU, np 2): where a blocking GPU allgather /
# alltoall's fixed cost goes. (1) the baseline table next to NCCL and the ceilings (1-8 MiB per
# peer); (2) the step timeline: UCCL_GPU_IPC_PROF=1 (gpu_ipc's host steps) + UCCL_COLL_TRACE=1
# (coll's steps) at 1 MiB and 8 MiB per peer; (3) candidate fixes through settings, alternating
# with the default: UCCL_GPU_IPC_PUSH_MIN=0 (pull only), UCCL_COLL_GPU_COPY_LATE=N, --algo direct;
# (4) the ceiling with the own block copied too (PERF_PEER_MODE=self).
# Run from the tree's root; FAKE=1 rehearses on the fake GPU backend (build/fakegpu, no NCCL).
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=${OUT:?}; mkdir -p $R/logs
if [ -z "$FAKE" ]; then
    nvidia-smi -L; nproc; nvidia-smi topo -m | head -4
    t build
    ./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev &&
        ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
        make -j32 libuccl.la tools/uccl_perf >make.log 2>&1 || { tail -30 configure.log make.log; exit 1; }
    NCCL_DIR=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null)
    [ -n "$NCCL_DIR" ] && export LD_LIBRARY_PATH="$NCCL_DIR/lib:${LD_LIBRARY_PATH:-}"
    echo "nccl: ${NCCL_DIR:-not found}"
    export CUDA_VISIBLE_DEVICES=0,1
    MAX=8M; NOREF=
else
    cd build/fakegpu || exit 1
    MAX=2M; NOREF=--no-ref
fi
M="mpirun --allow-run-as-root --oversubscribe --bind-to none --map-by slot -np 2 --mca btl self,vader,tcp
   -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS"
[ -z "$FAKE" ] && M="$M -x CUDA_VISIBLE_DEVICES"
rows() { grep -E "^ +[0-9]|MISMATCH|rror|failed" | grep -v "^\[" ; }
# job NAME OP MIN MAX EXTRA-uccl_perf-args -- ENV...
job() {
    local name=$1 op=$2 min=$3 max=$4 extra=$5; shift 5
    local xs=""; for kv in "$@"; do xs="$xs -x $kv"; done
    echo "# $name: $op $min..$max $extra $*"
    timeout 60 $M $xs tools/uccl_perf coll --mem cuda --op $op --min $min --max $max $extra \
        --json $R/logs/$name.json > $R/logs/$name.log 2>&1
    echo "rc $?"; rows < $R/logs/$name.log
}
t "1. baseline with the references"
for op in allgather alltoall; do
    job base-$op $op 1M $MAX "--rounds 3 $NOREF"
    grep -E "^# |^#   count" $R/logs/base-$op.log | head -8
done
t "2. timeline: gpu_ipc prof + coll trace, 1 MiB and 8 MiB per peer (no reference)"
for op in allgather alltoall; do for sz in 1M $MAX; do
    job prof-$op-$sz $op $sz $sz "--rounds 1 --no-ref" UCCL_GPU_IPC_PROF=1 UCCL_COLL_TRACE=1
    grep -E "gpu_ipc prof|coll trace" $R/logs/prof-$op-$sz.log
done; done
t "3. variants (no reference), two rounds, alternating with the default"
for r in 1 2; do for op in allgather alltoall; do
    job r$r-$op-default $op 1M $MAX "--rounds 3 --no-ref"
    job r$r-$op-pull $op 1M $MAX "--rounds 3 --no-ref" UCCL_GPU_IPC_PUSH_MIN=0
    job r$r-$op-late1 $op 1M $MAX "--rounds 3 --no-ref" UCCL_COLL_GPU_COPY_LATE=1
    job r$r-$op-late4 $op 1M $MAX "--rounds 3 --no-ref" UCCL_COLL_GPU_COPY_LATE=4
    job r$r-$op-pull-late1 $op 1M $MAX "--rounds 3 --no-ref" UCCL_GPU_IPC_PUSH_MIN=0 UCCL_COLL_GPU_COPY_LATE=1
    job r$r-$op-direct $op 1M $MAX "--rounds 3 --no-ref --algo direct"
    job r$r-$op-direct-late1 $op 1M $MAX "--rounds 3 --no-ref --algo direct" UCCL_COLL_GPU_COPY_LATE=1
done; done
t "3b. timeline of the best-looking variants at 1 MiB per peer"
job prof-allgather-pull-late1 allgather 1M 1M "--rounds 1 --no-ref" UCCL_GPU_IPC_PROF=1 UCCL_COLL_TRACE=1 UCCL_GPU_IPC_PUSH_MIN=0 UCCL_COLL_GPU_COPY_LATE=1
grep -E "gpu_ipc prof|coll trace" $R/logs/prof-allgather-pull-late1.log
job prof-allgather-direct-late1 allgather 1M 1M "--rounds 1 --no-ref --algo direct" UCCL_GPU_IPC_PROF=1 UCCL_COLL_TRACE=1 UCCL_COLL_GPU_COPY_LATE=1
grep -E "gpu_ipc prof|coll trace" $R/logs/prof-allgather-direct-late1.log
if [ -z "$FAKE" ]; then
    t "4. ceiling with the own block (PERF_PEER_MODE=self), allgather"
    PERF_PEER_MODE=self job self-allgather allgather 1M $MAX "--rounds 3" PERF_PEER_MODE=self
fi
t end
cd $R && tar czf logs.tgz logs && rm -rf logs
