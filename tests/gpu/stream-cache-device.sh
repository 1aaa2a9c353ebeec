#!/bin/bash
# The stream form's plan cache (coll/stream_cache.c) on the device machine,
# run from the source root: a lean build (library, uccl_perf, t_coll_gpu,
# the Python binding), t_coll_gpu's stream cases (sequence numbers wrapping
# past 2^32: the 48 back-to-back rounds check 6 exchanges / 42 plan hits,
# the plan-cache case, a rank gone; then the hold path), the Python
# first-kernel case once with CuPy and torch, and uccl_perf coll --mem cuda
# --stream with the cache off (UCCL_COLL_STREAM_CACHE=0: every call
# exchanges a token with every peer, the session-8 path) and on, in turns,
# one process per GPU when NP GPUs exist (NP default: GPU count, at least 2
# processes). CACHE_OPS (default allgather alltoall bcast), CACHE_MIN /
# CACHE_MAX (default 4K / 64M), CACHE_DEADLINE_S (no new perf run after it,
# default 400), CACHE_PY=0: no Python. CACHE_RUNS (default "0 1"): the
# perf runs per op, 0 / 1 = this tree with the cache off / on, base = the
# tree at CACHE_BASE (absolute path, e.g. the machine's copy of main: the
# code before), built first. Logs and JSON to $OUT.
set -u
OUT=${OUT:-/tmp/uccl-gpu-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S=$(date +%s)
step() { echo "=== $* ($(date +%T), t=$(( $(date +%s) - S ))s)"; }
step "packages"
for d in ../.debs .debs ../../.debs; do [ -d "$d" ] && dpkg -i "$d"/*.deb >/dev/null && echo "installed $d"; done
nvidia-smi --query-gpu=index,name,memory.total --format=csv
ngpu=$(nvidia-smi -L | grep -c ^GPU)
step "build"
./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
mkdir -p build-dev && cd build-dev || exit 1
../configure --with-cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
make -j16 >make.log 2>&1 || { grep -E "error|Error" make.log | head -40; exit 1; }
make -j16 tests/mpi/t_coll_gpu >>make.log 2>&1 || { grep -E "error|Error" make.log | head -40; exit 1; }
if [ -n "${CACHE_BASE:-}" ]; then
    step "build the base tree $CACHE_BASE ($(cd "$CACHE_BASE" && git log --oneline -1 2>/dev/null))"
    (cd "$CACHE_BASE" && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-base && cd build-base &&
     ../configure --with-cuda >configure.log 2>&1 && make -j16 libuccl.la tools/uccl_perf >make.log 2>&1) ||
        { echo "base build failed"; exit 1; }
fi
NCCL_DIR=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null)
[ -n "$NCCL_DIR" ] && export LD_LIBRARY_PATH="$NCCL_DIR/lib:${LD_LIBRARY_PATH:-}"
echo "nccl: ${NCCL_DIR:-not found}; GPUs: $ngpu"
M="mpirun --allow-run-as-root --bind-to none --map-by slot -np 2 --mca btl self,vader,tcp -x LD_LIBRARY_PATH
   -x NCCL_NVLS_ENABLE -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000"

for v in "UCCL_COLL_STREAM_SEQ0=4294967270" "UCCL_COLL_STREAM=hold"; do
    step "t_coll_gpu stream cases, $v"
    timeout 90 env "$v" $M -x "${v%%=*}" -x T_COLL_MEM=gpu -x T_COLL_STREAM_ONLY=1 tests/mpi/t_coll_gpu \
        >"$OUT/t_coll_gpu_stream_${v%%=*}.log" 2>&1
    echo "exit code $? ($(grep -c '^ok' "$OUT/t_coll_gpu_stream_${v%%=*}.log") ok, $(grep -c '^FAIL' "$OUT/t_coll_gpu_stream_${v%%=*}.log") FAIL)"
    grep -E "^ok|^FAIL|SKIP|^# stream plan" "$OUT/t_coll_gpu_stream_${v%%=*}.log" | sort | uniq -c | head -12
done

if [ "${CACHE_PY:-1}" = 1 ] && [ -f python/uccl/.libs/_uccl.so ]; then
    src=..
    export top_srcdir=$src top_builddir=. uccl_python_built=yes PYTHON=${PYTHON:-python3}
    export MPIEXEC="mpirun --allow-run-as-root --oversubscribe" PYTHONUNBUFFERED=1
    for kind in cupy torch; do
        step "python first_kernel, $kind"
        UCCL_PY_TEST_MEM=$kind timeout 100 "$src/tests/gpu/hang-dump.sh" 45 "$src/python/run-python.sh" 2 \
            shm,gpu_ipc numpy,mpi4py,pytest,$kind "$src/python/tests/run_pytest.py" test_coll_stream.py \
            -k "host_waits_first" -rs -v >"$OUT/py_first_kernel_${kind}.log" 2>&1
        echo "exit $? $(grep -cE ' passed' "$OUT/py_first_kernel_${kind}.log") passed $(grep -cE 'FAILED|HANG' "$OUT/py_first_kernel_${kind}.log") failed/hung"
    done
fi

for op in ${CACHE_OPS-allgather alltoall bcast}; do
    for run in ${CACHE_RUNS:-0 1}; do
        [ $(( $(date +%s) - S )) -gt "${CACHE_DEADLINE_S:-400}" ] && { echo "deadline: no more perf"; break 2; }
        perf=tools/uccl_perf cache=$run
        [ "$run" = base ] && perf=$CACHE_BASE/build-base/tools/uccl_perf cache=1
        step "uccl_perf coll --stream --op $op, run $run ($perf, UCCL_COLL_STREAM_CACHE=$cache)"
        timeout 90 env UCCL_COLL_STREAM_CACHE=$cache $M -x UCCL_COLL_STREAM_CACHE $perf coll --mem cuda \
            --stream --op "$op" --min "${CACHE_MIN:-4K}" --max "${CACHE_MAX:-64M}" --rounds 3 \
            --json "$OUT/stream_${op}_$run.json" 2>&1 | grep -v "^\[" | tee "$OUT/stream_${op}_$run.txt"
    done
done
step "done"
