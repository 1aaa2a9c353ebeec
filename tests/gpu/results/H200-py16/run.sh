#!/bin/bash
# Session 16, helper py16: one device call, GPU 0 only (kind nvidia-h200),
# from the call's tree root (.debs installed first):
#   bash .dev/py16/tests/gpu/results/H200-py16/run.sh
# Builds two trees side by side: MAIN (default .dev/py16main, main's commit,
# git archive) and TREE (default .dev/py16, this branch), each in
# DIR/build-py16 (BUILD_MAIN / BUILD_MINE: existing builds instead, for a
# rehearsal). Then per pass (REPEAT, default 2) python -m uccl.bench in
# process, torch CUDA tensors over gpu_ipc, 1-16 MiB, window 16, C's loop
# (uccl_perf's, in each tree's extension) and Python's alternating in the
# same processes, ROUNDS rounds of ITERS windows, send then write:
#   main: --post persist          (session 15's loop, main's binding)
#   mine: --post pgroup,persist   (pgroup: uccl.PersistentGroup, session 16)
# main first in odd passes, mine first in even ones. Then 4 KiB (what Python
# adds per operation) the same way, and the GPU pytest of this branch
# (tests/gpu/python-device.sh: torch CUDA tensors, test_mem.py and
# test_coll.py). NOLOCALGPU=1 (rehearsal, no GPU): host memory over shm, no
# GPU pytest; PY: the python3 with numpy, mpi4py (and torch on the device).
# shellcheck disable=SC2086 # $M, $R, $mem: command words, split on purpose
export OUT=${OUT:-/tmp/uccl-gpu-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.txt") 2>&1
step() { echo "=== $* ($(date +%T))"; }
root=$(pwd)
MAIN=${MAIN:-.dev/py16main} TREE=${TREE:-.dev/py16}
nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>/dev/null | head -3
nproc
cuda=--with-cuda mem="--mem cuda" tp=shm,gpu_ipc
[ "${NOLOCALGPU:-0}" = 1 ] && cuda=--without-cuda mem="" tp=shm
build() { # tree: DIR/build-py16, the library, uccl_perf and the extension
    (cd "$root/$1" && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-py16 && cd build-py16 &&
        ../configure $cuda --enable-werror >configure.log 2>&1 &&
        make -j${JOBS:-8} libuccl.la tools/uccl_perf python/uccl/_uccl.la >make.log 2>&1) ||
        { echo "build of $1 failed"; tail -30 "$root/$1/build-py16/configure.log" 2>/dev/null;
          grep -E "error|Error" "$root/$1/build-py16/make.log" 2>/dev/null | head -30; return 1; }
}
stage() { # tree build: the package from the tree's .py and the build's extension
    mkdir -p "$2/stage/uccl"
    cp "$root/$1"/python/uccl/*.py "$root/$1"/python/uccl/*.pyi "$2/stage/uccl/"
    cp "$2"/python/uccl/.libs/_uccl.so "$2/stage/uccl/"
}
step "build: $MAIN and $TREE"
bmain=${BUILD_MAIN:-$root/$MAIN/build-py16} bmine=${BUILD_MINE:-$root/$TREE/build-py16}
pids=""
[ -n "${BUILD_MAIN:-}" ] || { build "$MAIN" & pids="$pids $!"; }
[ -n "${BUILD_MINE:-}" ] || { build "$TREE" & pids="$pids $!"; }
for p in $pids; do wait "$p" || exit 1; done
bmain=$(cd "$bmain" && pwd) bmine=$(cd "$bmine" && pwd)
stage "$MAIN" "$bmain"
stage "$TREE" "$bmine"
cat "$root/$MAIN/COMMIT" "$root/$TREE/COMMIT" 2>/dev/null
step "builds done"
M="mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE"
R="--iters ${ITERS:-300} --rounds ${ROUNDS:-9}"
bench() { # name build, then bench arguments
    local name=$1 b=$2
    shift 2
    step "$name"
    (cd "$b" && PYTHONPATH=$b/stage timeout ${BENCH_TIMEOUT:-90} ${PY:-python3} -m uccl.bench \
        --perf tools/uccl_perf --mpirun "$M" --json "$OUT/$name.json" "$@" 2>&1) |
        grep -v "^\[" | sed "s/^/$name: /" | tee -a "$OUT/pybench.txt"
    echo "$name exit code: ${PIPESTATUS[0]}"
}
both() { # name pass, then bench arguments: main and mine, in the pass's order
    local name=$1 pass=$2
    shift 2
    if [ $((pass % 2)) = 1 ]; then
        bench main-$name "$bmain" "$@" --post persist
        bench mine-$name "$bmine" "$@" --post pgroup,persist
    else
        bench mine-$name "$bmine" "$@" --post pgroup,persist
        bench main-$name "$bmain" "$@" --post persist
    fi
}
for pass in $(seq "${REPEAT:-2}"); do
    for op in send write; do
        both $op$pass $pass --op $op $mem --transport $tp --min ${MIN:-1M} --max ${MAX:-16M} $R
    done
done
for op in send write; do
    [ "${FOURK:-1}" = 1 ] || break
    both ${op}4k 1 --op $op $mem --transport $tp --min 4K --max 4K \
        --iters ${ITERS_4K:-2000} --rounds ${ROUNDS:-9}
done
if [ "${NOLOCALGPU:-0}" != 1 ] && [ "${GPUTESTS:-1}" = 1 ]; then
    step "GPU pytest of $TREE (torch CUDA tensors: test_mem.py, test_coll.py)"
    (cd "$bmine" && OUT=$OUT PY_STREAM_KINDS="" PY_STREAM_EXTRA="" PY_PYTEST_KINDS=torch \
        PY_HOST_TESTS=0 PY_EXAMPLES="" PY_BENCH=none timeout 200 bash ../tests/gpu/python-device.sh)
fi
step "done"
(cd "$OUT" && tar czf py16-json.tgz ./*.json && rm -f ./*.json &&
    tar czf py16-logs.tgz ./*.log 2>/dev/null && rm -f ./*.log)
