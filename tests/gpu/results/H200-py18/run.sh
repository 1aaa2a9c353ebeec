#!/bin/bash
# Session 18, helper py18: one device call, GPU 0 only (kind nvidia-h200),
# from the call's tree root (.debs installed first; the lead's checkout):
#   dpkg -i .debs/*.deb >/dev/null && bash .dev/py18/tests/gpu/results/H200-py18/run.sh
# with carry [".debs", ".dev/py18", ".dev/py18main"].
# Builds two trees side by side ON THE DEVICE (its python3 is the torch venv's
# 3.12: an extension built elsewhere does not import): MAIN (.dev/py18main,
# main's commit, git archive) and TREE (.dev/py18, this branch), each in
# DIR/build-py18 (BUILD_MAIN / BUILD_MINE: existing builds, for a rehearsal).
# Then REPEAT passes (default 2) of python -m uccl.bench in process, torch
# CUDA tensors over gpu_ipc, 1-16 MiB, window 16, --post pgroup: C's loop and
# Python's alternating per round in the same two processes, ROUNDS rounds of
# ITERS windows, send then write, main first in odd passes and this branch
# first in even ones. summary.txt: per op and size the median of the
# per-round Python/C ratios of each tree over all passes, and what Python adds
# per window (tables.py). NOLOCALGPU=1 (a rehearsal, no GPU): host memory
# over shm. Wall on a warm H200: about 25 s of builds and 8 bench jobs.
# shellcheck disable=SC2086 # $M, $R, $mem, $cuda: command words, split on purpose
export OUT=${OUT:-/tmp/py18-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.txt") 2>&1
step() { echo "=== $* ($(date +%T))"; }
root=$(pwd)
MAIN=${MAIN:-.dev/py18main} TREE=${TREE:-.dev/py18}
here=$root/$TREE/tests/gpu/results/H200-py18
nvidia-smi --query-gpu=index,name,memory.total,clocks.sm,clocks.max.sm --format=csv 2>/dev/null | head -3
nproc
${PY:-python3} --version
cuda=--with-cuda mem="--mem cuda" tp=shm,gpu_ipc
[ "${NOLOCALGPU:-0}" = 1 ] && cuda="--without-cuda --without-rocm" mem="--mem host" tp=shm
build() { # tree: DIR/build-py18, the library, uccl_perf and the extension
    (cd "$root/$1" && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-py18 && cd build-py18 &&
        ../configure $cuda --enable-werror >configure.log 2>&1 &&
        make -j${JOBS:-8} libuccl.la tools/uccl_perf python/uccl/_uccl.la >make.log 2>&1) ||
        { echo "build of $1 failed"; tail -30 "$root/$1/build-py18/configure.log" 2>/dev/null;
          grep -E "error|Error" "$root/$1/build-py18/make.log" 2>/dev/null | head -30; return 1; }
}
stage() { # tree build: the package from the tree's .py and the build's extension
    mkdir -p "$2/stage/uccl"
    cp "$root/$1"/python/uccl/*.py "$root/$1"/python/uccl/*.pyi "$2/stage/uccl/"
    cp "$2"/python/uccl/.libs/_uccl.so "$2/stage/uccl/"
}
step "build: $MAIN and $TREE"
bmain=${BUILD_MAIN:-$root/$MAIN/build-py18} bmine=${BUILD_MINE:-$root/$TREE/build-py18}
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
R="--iters ${ITERS:-300} --rounds ${ROUNDS:-8}"
bench() { # name build, then bench arguments
    local name=$1 b=$2
    shift 2
    step "$name"
    (cd "$b" && PYTHONPATH=$b/stage timeout ${BENCH_TIMEOUT:-60} ${PY:-python3} -m uccl.bench \
        --perf tools/uccl_perf --mpirun "$M" --json "$OUT/$name.json" "$@" 2>&1) >"$OUT/$name.log"
    echo "$name exit code: $?"
    grep -v "^\[" "$OUT/$name.log" | sed "s/^/$name: /" >>"$OUT/pybench.txt"
}
for pass in $(seq "${REPEAT:-2}"); do
    for op in send write; do
        a="--op $op $mem --transport $tp --min ${MIN:-1M} --max ${MAX:-16M} $R --post pgroup"
        if [ $((pass % 2)) = 1 ]; then
            bench main-$op$pass "$bmain" $a
            bench mine-$op$pass "$bmine" $a
        else
            bench mine-$op$pass "$bmine" $a
            bench main-$op$pass "$bmain" $a
        fi
    done
done
step "done"
${PY:-python3} "$here/tables.py" "$OUT" | tee "$OUT/summary.txt"
(cd "$OUT" && tar czf py18-logs.tgz ./*.json ./*.log && rm -f ./*.json ./*.log)
