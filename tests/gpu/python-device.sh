#!/bin/bash
# The Python binding on the device machine (run-device.sh calls it from its
# build directory; ONLY=python there runs the build and this alone):
# pytest with torch CUDA tensors and CuPy arrays (two processes on one GPU),
# the three examples with GPU memory (and on host memory for comparison),
# and python -m uccl.bench (Python vs uccl_perf in the same run) on this
# quiet machine. Logs and JSON go to $OUT.
set -u
OUT=${OUT:-/tmp/uccl-gpu-out}
step() { echo "=== $* ($(date +%T))"; }
src=..
if [ ! -f python/uccl/.libs/_uccl.so ]; then
    echo "SKIP: the Python binding is not built here (configure found no Python headers):"
    grep -i "python" configure.log | tail -3
    exit 0
fi
export top_srcdir=$src top_builddir=. uccl_python_built=yes PYTHON=${PYTHON:-python3}
export MPIEXEC="mpirun --allow-run-as-root --oversubscribe"
run=$src/python/run-python.sh
"$PYTHON" -c "import torch, cupy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), '| cupy', cupy.__version__)"

step "pytest: collectives and point-to-point on GPU memory (2 processes, one GPU)"
for kind in torch cupy; do
    UCCL_PY_TEST_MEM=$kind "$run" 2 shm,gpu_ipc numpy,mpi4py,pytest,$kind \
        "$src/python/tests/run_pytest.py" test_mem.py test_coll.py -rs >"$OUT/pytest_$kind.log" 2>&1
    echo "pytest $kind exit code: $?"
    grep -E "passed|failed|SKIPPED" "$OUT/pytest_$kind.log" | sort | uniq -c | head -8
done
step "pytest: the whole suite on host memory (2 ranks, shm)"
"$run" 2 shm numpy,mpi4py,pytest "$src/python/tests/run_pytest.py" >"$OUT/pytest_host.log" 2>&1
echo "pytest host exit code: $?"
grep -E "passed|failed" "$OUT/pytest_host.log" | head -2

step "examples: GPU memory, then host memory"
ex=$src/examples/python
for dev in cuda cpu; do
    for op in write read; do
        "$run" 2 shm,gpu_ipc numpy,mpi4py "$ex/kv_cache.py" --device $dev --op $op --iters 30 \
            2>&1 | grep -E "kv_cache|Error|error" | head -4
    done
    "$run" 2 shm,gpu_ipc numpy,mpi4py "$ex/moe.py" --device $dev --tokens 2048 --hidden 2048 \
        --iters 10 2>&1 | grep -E "moe|Error|error" | head -4
    "$run" 2 shm,gpu_ipc numpy,mpi4py "$ex/weight_bcast.py" --device $dev --mib 512 \
        --tensors 32 --iters 5 2>&1 | grep -E "weight_bcast|Error|error" | head -4
done

step "python -m uccl.bench: Python vs uccl_perf (C) in the same run, host memory, shm"
stage=$(mktemp -d)
mkdir "$stage/uccl"
cp "$src"/python/uccl/*.py "$stage/uccl/" && cp python/uccl/.libs/_uccl.so "$stage/uccl/"
for op in send write; do
    PYTHONPATH=$stage timeout 150 "$PYTHON" -m uccl.bench --perf tools/uccl_perf --op $op \
        --transport shm --min 4K --max 16M --rounds 3 --json "$OUT/pybench_$op.json" \
        --mpirun "mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH" 2>&1 |
        grep -v "^\["
done
PYTHONPATH=$stage timeout 120 "$PYTHON" -m uccl.bench --perf tools/uccl_perf --op allgather \
    --np 2 --transport shm --min 4K --max 16M --rounds 3 --json "$OUT/pybench_allgather.json" \
    --mpirun "mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH" 2>&1 |
    grep -v "^\["
rm -rf "$stage"
