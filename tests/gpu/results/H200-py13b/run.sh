#!/bin/bash
# Session 13, helper py13b: one device call, GPU 0 only (kind nvidia-h200),
# from the branch's source root (.dev/py13b of the call's tree; .debs two
# levels up).
# 1. build libuccl, uccl_perf and the binding (CUDA; main now has gpu13's
#    batch copy kernel, which py13's calls did not);
# 2. python -m uccl.bench, GPU (torch CUDA tensors, gpu_ipc), 1-16 MiB,
#    C's loop and Python's alternating in the same processes: send with
#    --post group,groupfn --mixed --split (group = loop_group, groupfn =
#    session 13's window_group; mixed = Python sender + C receiver, mixedr
#    = C sender + Python receiver), write with --post group,groupfn --split;
# 3. probe.py, each loop alone in a job with UCCL_GPU_IPC_PROF=1 (gpu_ipc's
#    copies, batch launches, fences and control messages of that loop): send
#    at 2 MiB, C and group.
# NOLOCALGPU=1 (rehearsal, no GPU): a CPU build, host memory over shm
# (with MAX=1M ITERS=5 ROUNDS=3 it fits the bench's 40 s).
# shellcheck disable=SC2086 # $M: command words, split on purpose
export OUT=${OUT:-/tmp/uccl-gpu-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.txt") 2>&1
step() { echo "=== $* ($(date +%T))"; }
here=$(cd "$(dirname "$0")" && pwd)
step "build"
nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>/dev/null | head -3
nproc
cuda=--with-cuda mem="--mem cuda" tp=shm,gpu_ipc probe_mem=cuda
[ "${NOLOCALGPU:-0}" = 1 ] && cuda=--without-cuda mem="" tp=shm probe_mem=host
./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
mkdir -p build-py13b && cd build-py13b || exit 1
../configure $cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
make -j16 libuccl.la tools/uccl_perf python/uccl/_uccl.la >make.log 2>&1 ||
    { grep -E "error|Error" make.log | head -40; exit 1; }
stage=$(mktemp -d)
mkdir "$stage/uccl"
cp ../python/uccl/*.py ../python/uccl/*.pyi "$stage/uccl/"
cp python/uccl/.libs/_uccl.so "$stage/uccl/"
export PYTHONPATH=$stage
M="mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE"
B="python3 -m uccl.bench --perf tools/uccl_perf --split --mpirun"
bench() { # name, then bench arguments
    local name=$1
    shift
    step "$name"
    timeout 40 $B "$M" --json "$OUT/$name.json" "$@" 2>&1 | grep -v "^\[" | tee -a "$OUT/pybench.txt"
    echo "$name exit code: ${PIPESTATUS[0]}"
}
R="--min 1M --max ${MAX:-16M} --iters ${ITERS:-100} --rounds ${ROUNDS:-7}"
bench send_1m16m --op send $mem --transport $tp $R --post group,groupfn --mixed
bench write_1m16m --op write $mem --transport $tp $R --post group,groupfn
for m in c group; do
    step "probe $m send 2M, UCCL_GPU_IPC_PROF=1"
    UCCL_GPU_IPC_PROF=1 timeout 25 $M -x UCCL_GPU_IPC_PROF -np 2 python3 "$here/probe.py" $m send 2M 100 \
        $probe_mem 2>&1 | grep -v "^\[" | tee -a "$OUT/probe.txt"
done
step "done"
rm -rf "$stage"
(cd "$OUT" && tar czf py13b-json.tgz ./*.json && rm -f ./*.json)
