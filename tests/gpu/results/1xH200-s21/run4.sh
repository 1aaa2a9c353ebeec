#!/bin/bash
# Session 21's last one-GPU call: the final tree (every review merged, revsetup's
# connect/accept that sleep without the engine lock and revpy2's binding checks
# included) on a real GPU: run-device.sh ONLY=stream (the full build with the test
# programs; t_coll_gpu, its stream cases, t_gpu_stream_kill, the Python
# first-kernel case once per kind; no perf), t_gpu_ipc and t_gpu_staging (shm,
# tcp), then run-device.sh ONLY=python without the benchmarks (the stream tests,
# pytest on CuPy and torch GPU memory, the three examples on GPU memory).
# From the tree's root (carry .debs): bash tests/gpu/results/1xH200-s21/run4.sh
set -u
OUT=${OUT:-/tmp/s21-out4}
mkdir -p "$OUT/stream" "$OUT/py"
START=$SECONDS
step() { echo "=== $* (+$((SECONDS - START)) s)"; }
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
step "run-device.sh ONLY=stream"
OUT=$OUT/stream ONLY=stream STREAM_OPS= STREAM_PY_RUNS=1 timeout 240 bash tests/gpu/run-device.sh >"$OUT/stream.log" 2>&1
echo "exit $?"; grep -E "exit code|run 1|FAIL|HANG|error" "$OUT/stream.log" | head -20
M="mpirun --allow-run-as-root --bind-to core --map-by core -np 2 --mca btl self,vader,tcp -x NCCL_NVLS_ENABLE -x CUDA_VISIBLE_DEVICES"
for t in "t_gpu_ipc" "t_gpu_staging shm" "t_gpu_staging tcp"; do
    step "$t"
    (cd build-dev && timeout 120 $M tests/gpu/$t) >"$OUT/${t// /_}.log" 2>&1
    echo "exit $? ($(grep -c PASS "$OUT/${t// /_}.log") PASS, $(grep -c '^ok' "$OUT/${t// /_}.log") ok, $(grep -c FAIL "$OUT/${t// /_}.log") FAIL)"
done
step "run-device.sh ONLY=python (no benchmarks)"
OUT=$OUT/py ONLY=python PY_BENCH= PY_HOST_TESTS=0 PY_STREAM_EXTRA= timeout 300 bash tests/gpu/run-device.sh >"$OUT/py.log" 2>&1
echo "exit $?"; grep -E "passed|failed|FAILED|exit|HANG|example" "$OUT/py.log" | head -30
step done
(cd "$OUT" && tar czf logs.tgz stream py ./*.log && rm -rf stream py ./*.log)
