#!/bin/bash
# Session 13, helper py13: one device call, GPU 0 only, from the branch's
# source root (.dev/py13 of the call's tree; .debs two levels up).
# 1. build libuccl, uccl_perf and the binding (CUDA); pytest test_many.py
#    (the batch forms, host memory) as a check of this build;
# 2. python -m uccl.bench --post $POST (default group,many,one): per size,
#    C's loop (uccl_perf's, in the extension) and Python's loops alternating
#    in the same processes on the same connection and buffer: group = one
#    Conn.*_many(group=True) call and one Request per window (the table's
#    Py), many = one Conn.*_many call, a Request per transfer, one = one call
#    per transfer; --split adds the posting/waiting split of C and of the
#    first Python loop. PARTS (default "gpu host") picks the parts:
#    GPU (torch CUDA tensors registered once, gpu_ipc) send and write at
#    4 KiB and 1-16 MiB; host memory (shm) send and write at 4 KiB and
#    1-4 MiB.
# NOLOCALGPU=1 (rehearsal here, no GPU): a CPU build, the host part only.
# The first device call ran this script at 3d72209 (--post both: many and
# one), the second at this version with PARTS=gpu.
# shellcheck disable=SC2086 # $M: command words, split on purpose
export OUT=${OUT:-/tmp/uccl-gpu-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.txt") 2>&1
step() { echo "=== $* ($(date +%T))"; }
step "build"
nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>/dev/null | head -3
nproc
cuda=--with-cuda
[ "${NOLOCALGPU:-0}" = 1 ] && cuda=--without-cuda
./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
mkdir -p build-py13 && cd build-py13 || exit 1
../configure $cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
make -j16 libuccl.la tools/uccl_perf python/uccl/_uccl.la >make.log 2>&1 ||
    { grep -E "error|Error" make.log | head -40; exit 1; }
stage=$(mktemp -d)
mkdir "$stage/uccl"
cp ../python/uccl/*.py ../python/uccl/*.pyi "$stage/uccl/"
cp python/uccl/.libs/_uccl.so "$stage/uccl/"
export PYTHONPATH=$stage
M="mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE"
step "pytest test_many.py, host memory, 2 ranks over shm"
UCCL_TRANSPORTS=shm timeout 60 $M -x UCCL_TRANSPORTS -np 2 python3 ../python/tests/run_pytest.py \
    test_many.py 2>&1 | grep -E "passed|failed|Error" | head -6
B="python3 -m uccl.bench --perf tools/uccl_perf --post ${POST:-group,many,one} --split --mpirun"
PARTS=${PARTS:-gpu host}
bench() { # name, then bench arguments
    local name=$1
    shift
    step "$name"
    timeout 90 $B "$M" --json "$OUT/$name.json" "$@" 2>&1 | grep -v "^\[" | tee -a "$OUT/pybench.txt"
    echo "$name exit code: ${PIPESTATUS[0]}"
}
if [ "${NOLOCALGPU:-0}" != 1 ] && [[ " $PARTS " == *" gpu "* ]]; then
    for op in send write; do
        bench "gpu_${op}_4k" --op $op --mem cuda --transport shm,gpu_ipc --min 4K --max 4K \
            --iters 500 --rounds 7
        bench "gpu_${op}_1m16m" --op $op --mem cuda --transport shm,gpu_ipc --min 1M --max 16M \
            --iters 200 --rounds 9
    done
fi
for op in send write; do
    [[ " $PARTS " == *" host "* ]] || break
    bench "host_${op}_4k" --op $op --transport shm --min 4K --max 4K --iters 500 --rounds 9
    bench "host_${op}_1m4m" --op $op --transport shm --min 1M --max 4M \
        --iters ${HOST_ITERS:-30} --rounds 7
done
step "done"
rm -rf "$stage"
(cd "$OUT" && tar czf py13-json.tgz ./*.json && rm -f ./*.json)
