#!/bin/bash
# The Python binding on the device machine (run-device.sh calls it from its
# build directory; ONLY=python there runs the build and this alone):
# 1. the stream-ordering tests first, under a watchdog (tests/gpu/hang-dump.sh
#    prints the Python and C stacks of a hang), with CuPy arrays and torch
#    CUDA tensors; 2. pytest with torch CUDA tensors and CuPy arrays (two
#    processes on one GPU) and on host memory; 3. the three examples with
#    GPU memory; 4. python -m uccl.bench (Python vs uccl_perf in the same
#    run; send/write: uccl_perf's loop built into the extension and the
#    Python loop alternating in the same processes, since session 9) on
#    host memory and on torch CUDA tensors. Logs, the benchmark
#    tables (pybench.txt) and JSON go to $OUT.
# Narrowing (default: everything): PY_BENCH (names of the comparisons below,
# space-separated), PY_BENCH_MIN / PY_BENCH_MAX (sizes of the GPU
# point-to-point ones, 4K-64M), PY_BENCH_COLL_MAX (largest GPU allgather,
# 16M), PY_BENCH_ROUNDS (3), PY_BENCH_OBJ_ROUNDS (the tensors-as-objects
# allgathers, 1), PY_EXAMPLES (kv_cache moe weight_bcast; "" none), PY_HOST_TESTS=0
# (the host-memory pytest run, which CI also runs), PY_STREAM_EXTRA (torch0:
# the stream tests once more with UCCL_PY_TORCH_FAST=0; "" skips it),
# PY_STREAM_KINDS and PY_PYTEST_KINDS (the memory kinds of the stream tests
# and of pytest on GPU memory: "cupy torch", "torch cupy"; "" none).
set -u
PY_BENCH=${PY_BENCH:-send write allgather send_cuda write_cuda allgather_cuda allgather_cuda_objects}
# (allgather_cuda_objects_dlpack: the same with UCCL_PY_TORCH_FAST=0, the
# torch tensors through DLPack's handshake; not in the default set)
PY_EXAMPLES=${PY_EXAMPLES-kv_cache moe weight_bcast}
rounds=${PY_BENCH_ROUNDS:-3}
want() { case " $2 " in *" $1 "*) return 0 ;; esac; return 1; }
OUT=${OUT:-/tmp/uccl-gpu-out}
step() { echo "=== $* ($(date +%T))"; }
src=..
if [ ! -f python/uccl/.libs/_uccl.so ]; then
    echo "SKIP: the Python binding is not built here (configure found no Python headers):"
    grep -i "python" configure.log | tail -3
    exit 0
fi
export top_srcdir=$src top_builddir=. uccl_python_built=yes PYTHON=${PYTHON:-python3}
export MPIEXEC="mpirun --allow-run-as-root --oversubscribe" PYTHONUNBUFFERED=1
run=$src/python/run-python.sh
dump=$src/tests/gpu/hang-dump.sh
"$PYTHON" -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), '| cupy', cupy.__version__)"

step "stream order first, under a watchdog (60 s a kind): test_coll_stream.py (torch0: torch with UCCL_PY_TORCH_FAST=0)"
export UCCL_PY_TORCH_FAST=1
for kind in ${PY_STREAM_KINDS-cupy torch} ${PY_STREAM_EXTRA-torch0}; do
    mod=${kind%0}
    UCCL_PY_TORCH_FAST=$([ "$kind" = torch0 ] && echo 0 || echo 1) UCCL_PY_TEST_MEM=$mod \
        "$dump" 60 "$run" 2 shm,gpu_ipc numpy,mpi4py,pytest,"$mod" \
        "$src/python/tests/run_pytest.py" test_coll_stream.py -rs -v >"$OUT/stream_$kind.log" 2>&1
    echo "stream tests $kind exit code: $?"
    grep -E "PASSED|FAILED|SKIPPED|HANG|passed|failed" "$OUT/stream_$kind.log" | sort | uniq -c | head -24
done

step "pytest: collectives and point-to-point on GPU memory (2 processes, one GPU)"
for kind in ${PY_PYTEST_KINDS-torch cupy}; do
    UCCL_PY_TEST_MEM=$kind "$dump" 120 "$run" 2 shm,gpu_ipc numpy,mpi4py,pytest,$kind \
        "$src/python/tests/run_pytest.py" test_mem.py test_coll.py -k "not stream" -rs \
        >"$OUT/pytest_$kind.log" 2>&1
    echo "pytest $kind exit code: $?"
    grep -E "passed|failed|SKIPPED|HANG" "$OUT/pytest_$kind.log" | sort | uniq -c | head -8
done
if [ "${PY_HOST_TESTS:-1}" = 1 ]; then
    step "pytest: the whole suite on host memory (2 ranks, shm)"
    "$dump" 90 "$run" 2 shm numpy,mpi4py,pytest "$src/python/tests/run_pytest.py" >"$OUT/pytest_host.log" 2>&1
    echo "pytest host exit code: $?"
    grep -E "passed|failed" "$OUT/pytest_host.log" | head -2
fi

step "examples on GPU memory (host memory runs in CI)"
ex=$src/examples/python
for op in $(want kv_cache "$PY_EXAMPLES" && echo write read); do
    timeout 60 "$run" 2 shm,gpu_ipc numpy,mpi4py "$ex/kv_cache.py" --device cuda --op $op --iters 20 \
        2>&1 | grep -E "kv_cache|Error|error" | head -4
done
if want moe "$PY_EXAMPLES"; then
    timeout 60 "$run" 2 shm,gpu_ipc numpy,mpi4py "$ex/moe.py" --device cuda --tokens 2048 --hidden 2048 \
        --iters 5 2>&1 | grep -E "moe|Error|error" | head -4
fi
if want weight_bcast "$PY_EXAMPLES"; then
    timeout 60 "$run" 2 shm,gpu_ipc numpy,mpi4py "$ex/weight_bcast.py" --device cuda --mib 512 \
        --tensors 32 --iters 3 2>&1 | grep -E "weight_bcast|Error|error" | head -4
fi

step "python -m uccl.bench: Python vs C in the same run (tables: pybench.txt)"
stage=$(mktemp -d)
mkdir "$stage/uccl"
cp "$src"/python/uccl/*.py "$stage/uccl/" && cp python/uccl/.libs/_uccl.so "$stage/uccl/"
bench() { # NAME ARGS...: one comparison, its table to pybench.txt and the log
    local name=$1
    shift
    want "$name" "$PY_BENCH" || return 0
    PYTHONPATH=$stage timeout 170 "$PYTHON" -m uccl.bench --perf tools/uccl_perf \
        --json "$OUT/pybench_$name.json" \
        --mpirun "mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE -x UCCL_PY_TORCH_FAST" \
        "$@" 2>&1 | grep -v "^\[" | tee -a "$OUT/pybench.txt"
}
for op in send write; do
    bench $op --op $op --transport shm --min 4K --max 16M --rounds $rounds
done
bench allgather --op allgather --np 2 --transport shm --min 4K --max 16M --rounds $rounds
for op in send write; do
    bench ${op}_cuda --op $op --mem cuda --transport shm,gpu_ipc --min ${PY_BENCH_MIN:-4K} \
        --max ${PY_BENCH_MAX:-64M} --rounds $rounds
done
bench allgather_cuda --op allgather --np 2 --mem cuda --transport shm,gpu_ipc --min 4K \
    --max ${PY_BENCH_COLL_MAX:-16M} --rounds $rounds
bench allgather_cuda_objects --op allgather --np 2 --mem cuda --objects --transport shm,gpu_ipc \
    --min 4K --max ${PY_BENCH_COLL_MAX:-16M} --rounds ${PY_BENCH_OBJ_ROUNDS:-1} --profile
UCCL_PY_TORCH_FAST=0 bench allgather_cuda_objects_dlpack --op allgather --np 2 --mem cuda --objects \
    --transport shm,gpu_ipc --min 4K --max ${PY_BENCH_COLL_MAX:-16M} --rounds ${PY_BENCH_OBJ_ROUNDS:-1} --profile
rm -rf "$stage"
