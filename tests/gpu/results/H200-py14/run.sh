#!/bin/bash
# Session 14, helper py14: one device call, GPU 0 only (kind nvidia-h200), from
# the call's tree root: bash .dev/py14/tests/gpu/results/H200-py14/run.sh
# (.debs installed first). TREES: space-separated NAME=DIR source trees, each
# built in DIR/build-py14 (in parallel) and measured in turn, alternating by
# step (call 1: main=.dev/py14; call 2: main=.dev/py14main py14=.dev/py14),
# REPEAT passes of send and write (the trees' order reversed each pass).
# Per tree, python -m uccl.bench, GPU (torch CUDA tensors, gpu_ipc), 1-16 MiB,
# C's loop and Python's alternating in the same processes:
#   send  --post group,groupfn --mixed --split  (mixed: Python sender + C
#         receiver; mixedr: C sender + Python receiver)
#   write --post group,groupfn --split
#   CONTROL=1: send and write --post group with UCCL_GPU_IPC_BATCH_SM=0
#   PROBE=1: probe.py, C's loop and group alone, UCCL_GPU_IPC_PROF=1, send 2M
# NOLOCALGPU=1 (rehearsal, no GPU): a CPU build, host memory over shm; PY:
# the python3 with numpy, mpi4py (and torch on the device).
# shellcheck disable=SC2086 # $M, $R: command words, split on purpose
export OUT=${OUT:-/tmp/uccl-gpu-out} CUDA_VISIBLE_DEVICES=0 NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.txt") 2>&1
step() { echo "=== $* ($(date +%T))"; }
root=$(pwd)
here=$(cd "$(dirname "$0")" && pwd)
TREES=${TREES:-main=.dev/py14}
step "build: $TREES"
nvidia-smi --query-gpu=index,name,memory.total --format=csv 2>/dev/null | head -3
nproc
cuda=--with-cuda mem="--mem cuda" tp=shm,gpu_ipc probe_mem=cuda
[ "${NOLOCALGPU:-0}" = 1 ] && cuda=--without-cuda mem="" tp=shm probe_mem=host
build() { # dir
    cd "$root/$1" || return 1
    ./autogen.sh >/dev/null 2>&1 || { echo "$1: autogen failed"; return 1; }
    mkdir -p build-py14 && cd build-py14 || return 1
    ../configure $cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; return 1; }
    make -j${JOBS:-8} libuccl.la tools/uccl_perf python/uccl/_uccl.la >make.log 2>&1 ||
        { grep -E "error|Error" make.log | head -40; return 1; }
    cat ../COMMIT 2>/dev/null || true
}
pids=""
for t in $TREES; do
    build "${t#*=}" >"$OUT/build-${t%%=*}.txt" 2>&1 &
    pids="$pids $!"
done
for p in $pids; do wait "$p" || { step "build failed"; cat "$OUT"/build-*.txt; exit 1; }; done
cat "$OUT"/build-*.txt
M="mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE"
R="--min ${MIN:-1M} --max ${MAX:-16M} --iters ${ITERS:-300} --rounds ${ROUNDS:-9}"
bench() { # tree name dir, step name, then bench arguments
    local tree=$1 dir=$2 name=$3
    shift 3
    step "$tree: $name"
    (cd "$root/$dir/build-py14" && PYTHONPATH=$root/$dir/build-py14/stage \
        timeout ${BENCH_TIMEOUT:-60} ${PY:-python3} -m uccl.bench --perf tools/uccl_perf --mpirun "$M" \
        --json "$OUT/$tree-$name.json" "$@" 2>&1) | grep -v "^\[" | sed "s/^/$tree: /" |
        tee -a "$OUT/pybench.txt"
    echo "$tree $name exit code: ${PIPESTATUS[0]}"
}
for t in $TREES; do
    d="$root/${t#*=}/build-py14"
    mkdir -p "$d/stage/uccl"
    cp "$d"/../python/uccl/*.py "$d"/../python/uccl/*.pyi "$d/stage/uccl/"
    cp "$d"/python/uccl/.libs/_uccl.so "$d/stage/uccl/"
done
# REPEAT passes, the trees' order reversed on every other pass
rev=$(for t in $TREES; do echo "$t"; done | tac | tr '\n' ' ')
for pass in $(seq "${REPEAT:-1}"); do
    order=$TREES
    [ $((pass % 2)) = 0 ] && order=$rev
    for s in send write; do
        for t in $order; do
            if [ $s = send ]; then
                bench "${t%%=*}" "${t#*=}" send$pass --op send $mem --transport $tp $R --split \
                    --post group,groupfn --mixed
            else
                bench "${t%%=*}" "${t#*=}" write$pass --op write $mem --transport $tp $R --split \
                    --post group,groupfn
            fi
        done
    done
done
if [ "${CONTROL:-1}" = 1 ]; then
    for s in send write; do
        for t in $TREES; do
            UCCL_GPU_IPC_BATCH_SM=0 M="$M -x UCCL_GPU_IPC_BATCH_SM" bench "${t%%=*}" "${t#*=}" \
                "$s-nobatch" --op $s $mem --transport $tp --min 1M --max 16M --iters 200 \
                --rounds 5 --post group
        done
    done
fi
if [ "${PROBE:-1}" = 1 ]; then
    for t in $TREES; do
        for m in c group; do
            step "${t%%=*}: probe $m send 2M, UCCL_GPU_IPC_PROF=1"
            (cd "$root/${t#*=}/build-py14" && PYTHONPATH=$PWD/stage UCCL_GPU_IPC_PROF=1 \
                timeout 30 $M -x UCCL_GPU_IPC_PROF -np 2 ${PY:-python3} "$here/../H200-py13b/probe.py" $m send 2M 200 \
                $probe_mem 2>&1) | grep -v "^\[" | sed "s/^/${t%%=*}: /" | tee -a "$OUT/probe.txt"
        done
    done
fi
step "done"
(cd "$OUT" && tar czf py14-json.tgz ./*.json && rm -f ./*.json)
