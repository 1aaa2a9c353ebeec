#!/bin/bash
# Session 15, helper py15: one device call, GPU 0 only (kind nvidia-h200),
# from the call's tree root: bash .dev/py15/tests/gpu/results/H100-py15/run.sh
# (.debs installed first). Builds TREE (default .dev/py15) in TREE/build-py15
# (BUILD=DIR: an existing build instead, for a rehearsal), then per pass
# (REPEAT, default 2) python -m uccl.bench in process, torch CUDA tensors
# over gpu_ipc, 1-16 MiB, window 16, C's loop (uccl_perf's) and Python's
# alternating in the same processes, ROUNDS rounds of ITERS windows:
#   send  --post persist,group --mixed  (persist: PersistentRequests,
#         session 15; group: Conn.*_many(group=True); mixed/mixedr: Python
#         on one rank only, persist's loop)
#   write --post persist,group
#   (pass 1 also --split: the persist loop timed posting / waiting)
# then 4 KiB, send and write, --post persist,group,one (one: one call per
# transfer): what Python adds per operation. Call 2: SPLIT=0 (no --split),
# MIXED= (no --mixed), FOURK=0 (no 4 KiB runs), MAX=4M, REPEAT=3.
# NOLOCALGPU=1 (rehearsal, no GPU): host memory over shm; PY: the python3
# with numpy, mpi4py (and torch on the device).
# shellcheck disable=SC2086 # $M, $R: command words, split on purpose
export OUT=${OUT:-/tmp/uccl-gpu-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.txt") 2>&1
step() { echo "=== $* ($(date +%T))"; }
root=$(pwd)
TREE=${TREE:-.dev/py15}
step "build: $TREE"
nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>/dev/null | head -3
nproc
cuda=--with-cuda mem="--mem cuda" tp=shm,gpu_ipc
[ "${NOLOCALGPU:-0}" = 1 ] && cuda=--without-cuda mem="" tp=shm
if [ -n "${BUILD:-}" ]; then
    bdir=$(cd "$BUILD" && pwd)
else
    bdir=$root/$TREE/build-py15
    (cd "$root/$TREE" && ./autogen.sh >/dev/null 2>&1) || { step "autogen failed"; exit 1; }
    mkdir -p "$bdir" && cd "$bdir" || exit 1
    ../configure $cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
    make -j${JOBS:-14} libuccl.la tools/uccl_perf python/uccl/_uccl.la >make.log 2>&1 ||
        { grep -E "error|Error" make.log | head -40; exit 1; }
    cat ../COMMIT 2>/dev/null || true
fi
mkdir -p "$bdir/stage/uccl"
cp "$root/$TREE"/python/uccl/*.py "$root/$TREE"/python/uccl/*.pyi "$bdir/stage/uccl/"
cp "$bdir"/python/uccl/.libs/_uccl.so "$bdir/stage/uccl/"
M="mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE"
R="--iters ${ITERS:-300} --rounds ${ROUNDS:-9}"
bench() { # step name, then bench arguments
    local name=$1
    shift
    step "$name"
    (cd "$bdir" && PYTHONPATH=$bdir/stage timeout ${BENCH_TIMEOUT:-90} ${PY:-python3} -m uccl.bench \
        --perf tools/uccl_perf --mpirun "$M" --json "$OUT/$name.json" "$@" 2>&1) |
        grep -v "^\[" | sed "s/^/$name: /" | tee -a "$OUT/pybench.txt"
    echo "$name exit code: ${PIPESTATUS[0]}"
}
for pass in $(seq "${REPEAT:-2}"); do
    split=""
    [ "$pass" = 1 ] && [ "${SPLIT:-1}" = 1 ] && split=--split
    bench send$pass --op send $mem --transport $tp --min ${MIN:-1M} --max ${MAX:-16M} $R $split \
        --post persist,group ${MIXED---mixed}
    bench write$pass --op write $mem --transport $tp --min ${MIN:-1M} --max ${MAX:-16M} $R $split \
        --post persist,group
done
for op in send write; do
    [ "${FOURK:-1}" = 1 ] || break
    bench ${op}4k --op $op $mem --transport $tp --min 4K --max 4K --iters ${ITERS_4K:-2000} \
        --rounds ${ROUNDS:-9} --post persist,group,one
done
step "done"
(cd "$OUT" && tar czf py15-json.tgz ./*.json && rm -f ./*.json)
