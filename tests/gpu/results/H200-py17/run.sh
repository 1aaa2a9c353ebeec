#!/bin/bash
# Session 17, helper py17: one device call, one H200 (kind nvidia-h200), GPU 0,
# from the copied tree's root (.debs carried):
#   cd .dev/py17 && dpkg -i ../../.debs/*.deb >/dev/null && bash tests/gpu/results/H200-py17/run.sh
# Builds this tree (CUDA), then python -m uccl.bench --variant: an engine per
# gpu_ipc setting in the same two processes, torch CUDA tensors, window 16,
# --post pgroup, C's loop and Python's alternating per round on each engine,
# the variants interleaved per round:
#   q64   UCCL_GPU_IPC_QUIET_POLLS=64   (main's behaviour)
#   q4k   UCCL_GPU_IPC_QUIET_POLLS=4096
#   lazy0 UCCL_GPU_IPC_LAZY_EVENT=0     (an event per fence at once)
# PASSES passes (separate jobs) x send, write; 1-16 MiB, ROUNDS rounds each.
# Then the profile (UCCL_GPU_IPC_PROF=1), 4 MiB, q64 and q4k, C and Python on
# engines of their own (--engine-per-loop): launches, stream queries, records.
# AB=0 / PROF=0 leave those out; PP=1 adds --post pgroup,pgroupp jobs
# (PersistentGroup(progress=True), not measured yet):
#   AB=0 PROF=0 PP=1 bash tests/gpu/results/H200-py17/run.sh
# NOLOCALGPU=1 (a rehearsal without torch or a GPU): host memory over shm;
# BUILD=DIR uses an existing build instead.
# shellcheck disable=SC2086 # $M, $mem: command words, split on purpose
export OUT=${OUT:-/tmp/py17-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.txt") 2>&1
step() { echo "=== $* ($(date +%T))"; }
root=$(pwd)
nvidia-smi --query-gpu=index,name,memory.total,clocks.sm,clocks.max.sm --format=csv 2>/dev/null | head -3
nproc
mem="--mem cuda" tp=shm,gpu_ipc cuda=--with-cuda
[ "${NOLOCALGPU:-0}" = 1 ] && mem="--mem host" tp=shm cuda="--without-cuda --without-rocm --enable-fake-gpu"
if [ -z "${BUILD:-}" ]; then
    step build
    (./autogen.sh >/dev/null 2>&1 && mkdir -p build-py17 && cd build-py17 &&
        ../configure $cuda --enable-werror >configure.log 2>&1 &&
        make -j${JOBS:-16} libuccl.la tools/uccl_perf python/uccl/_uccl.la >make.log 2>&1) ||
        { echo "build failed"; tail -30 build-py17/configure.log; grep -E "error" build-py17/make.log | head -30; exit 1; }
    BUILD=$root/build-py17
fi
b=$(cd "$BUILD" && pwd)
mkdir -p "$b/stage/uccl"
cp "$root"/python/uccl/*.py "$root"/python/uccl/*.pyi "$b/stage/uccl/"
cp "$b"/python/uccl/.libs/_uccl.so "$b/stage/uccl/"
step "built"
M="mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE"
V="--variant q64:UCCL_GPU_IPC_QUIET_POLLS=64 --variant q4k:UCCL_GPU_IPC_QUIET_POLLS=4096"
bench() { # name, then bench arguments
    local name=$1
    shift
    step "$name"
    (cd "$b" && PYTHONPATH=$b/stage timeout ${BENCH_TIMEOUT:-100} python3 -m uccl.bench \
        --perf tools/uccl_perf --json "$OUT/$name.json" "$@" 2>&1) >"$OUT/$name.log"
    echo "$name exit code: $?"
    grep -v "^\[\|gpu_ipc prof\|# uccl.bench engine" "$OUT/$name.log" | tee -a "$OUT/pybench.txt"
}
for pass in $(seq "${PASSES:-2}"); do
    for op in send write; do
        [ "${AB:-1}" = 1 ] || break
        bench ab-$op$pass --mpirun "$M" --op $op $mem --transport $tp --min ${MIN:-1M} --max ${MAX:-16M} \
            --iters ${ITERS:-300} --rounds ${ROUNDS:-10} --post pgroup $V --variant lazy0:UCCL_GPU_IPC_LAZY_EVENT=0
    done
done
# PP=1 (not run yet: call 2 of py17 failed, see README): PersistentGroup(progress=True)
# (--post pgroupp) against pgroup and C in the same processes, the default engine
for pass in $(seq "${PASSES:-2}"); do
    for op in send write; do
        [ "${PP:-0}" = 1 ] || break
        bench pp-$op$pass --mpirun "$M" --op $op $mem --transport $tp --min ${MIN:-1M} --max ${MAX:-16M} \
            --iters ${ITERS:-300} --rounds ${ROUNDS:-10} --post pgroup,pgroupp
    done
done
for op in send write; do
    [ "${PROF:-1}" = 1 ] || break
    UCCL_GPU_IPC_PROF=1 bench prof-$op --mpirun "$M -x UCCL_GPU_IPC_PROF" --op $op $mem --transport $tp \
        --min 4M --max 4M --iters ${ITERS:-300} --rounds ${PROF_ROUNDS:-4} --post pgroup $V --engine-per-loop
done
step done
(cd "$OUT" && tar czf py17-logs.tgz ./*.log ./*.json && rm -f ./*.log ./*.json)
