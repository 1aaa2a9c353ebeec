#!/bin/bash
# The stream-ordered collectives on the device machine (run-device.sh
# ONLY=stream runs it from its build directory after the build): t_coll_gpu
# on GPU memory (the direct stream path, coll/stream.c), its stream cases
# with wrapping sequence numbers and with the hold path; the Python case
# test_stream_form_host_waits_first (first_kernel: a module load while the
# call is in flight) STREAM_PY_RUNS times (default 5) with CuPy and torch,
# under a watchdog; uccl_perf coll --mem cuda --stream, direct vs hold in
# the same run (STREAM_OPS, default allgather alltoall bcast); and
# t_gpu_stream_kill (3 processes on GPU 0, a stream-ordered allgather, the
# last rank SIGKILLed with its call queued behind a gate; survivors tear
# down without waiting for each other), also with T_STREAM_KILL_MEET=1
# (survivors meet before teardown). STREAM_PY_RUNS=0 and STREAM_OPS= skip the Python and perf parts.
# Logs, tables and JSON go to $OUT.
set -u
OUT=${OUT:-/tmp/uccl-gpu-out}
step() { echo "=== $* ($(date +%T))"; }
src=..
M="$MPIRUN -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000"

step "t_coll_gpu, GPU memory, 2 processes on GPU 0 (stream form: the direct path)"
timeout 150 $M -x T_COLL_MEM=gpu tests/mpi/t_coll_gpu >"$OUT/t_coll_gpu_direct.log" 2>&1
echo "t_coll_gpu exit code: $? ($(grep -c '^ok' "$OUT/t_coll_gpu_direct.log") ok, $(grep -c '^FAIL' "$OUT/t_coll_gpu_direct.log") FAIL)"
grep -E "^FAIL|SKIP|stream form" "$OUT/t_coll_gpu_direct.log" | sort | uniq -c | head -20
for v in "UCCL_COLL_STREAM_SEQ0=4294967270" "UCCL_COLL_STREAM=hold"; do
    timeout 60 env "$v" $M -x "${v%%=*}" -x T_COLL_MEM=gpu -x T_COLL_STREAM_ONLY=1 tests/mpi/t_coll_gpu \
        >"$OUT/t_coll_gpu_stream_${v%%=*}.log" 2>&1
    echo "t_coll_gpu stream cases, $v: exit code $? ($(grep -c '^ok' "$OUT/t_coll_gpu_stream_${v%%=*}.log") ok)"
    grep -E "^FAIL|SKIP" "$OUT/t_coll_gpu_stream_${v%%=*}.log" | sort | uniq -c | head
done

step "t_gpu_stream_kill: 3 processes on GPU 0, the last SIGKILLed mid stream-ordered allgather (UCCL_TIMEOUT_MS=3000)"
for meet in 0 1; do
    log=$OUT/t_gpu_stream_kill$([ $meet = 1 ] && echo _meet).log
    if [ $meet = 1 ]; then
        UCCL_TIMEOUT_MS=3000 T_STREAM_KILL_MEET=1 timeout 150 tests/gpu/t_gpu_stream_kill >"$log" 2>&1
    else
        UCCL_TIMEOUT_MS=3000 timeout 150 tests/gpu/t_gpu_stream_kill >"$log" 2>&1
    fi
    echo "t_gpu_stream_kill (T_STREAM_KILL_MEET=$meet) exit code: $?"
    grep -vE "^\[uccl.*(debug|info)" "$log" | head -30
done

if [ -f python/uccl/.libs/_uccl.so ] && [ "${STREAM_PY_RUNS:-5}" -gt 0 ]; then
    export top_srcdir=$src top_builddir=. uccl_python_built=yes PYTHON=${PYTHON:-python3}
    export MPIEXEC="mpirun --allow-run-as-root --oversubscribe" PYTHONUNBUFFERED=1
    step "python: test_stream_form_host_waits_first (device_sync, first_kernel) x ${STREAM_PY_RUNS:-5}, CuPy and torch"
    for i in $(seq 1 "${STREAM_PY_RUNS:-5}"); do
        for kind in cupy torch; do
            UCCL_LOG_LEVEL=info UCCL_PY_TEST_MEM=$kind timeout 100 "$src/tests/gpu/hang-dump.sh" 45 "$src/python/run-python.sh" 2 \
                shm,gpu_ipc numpy,mpi4py,pytest,$kind "$src/python/tests/run_pytest.py" test_coll_stream.py \
                -k "host_waits_first" -rs -v >"$OUT/py_first_kernel_${kind}_$i.log" 2>&1
            echo "run $i $kind: exit $? $(grep -cE ' passed' "$OUT/py_first_kernel_${kind}_$i.log") passed" \
                "$(grep -cE 'FAILED|HANG' "$OUT/py_first_kernel_${kind}_$i.log") failed/hung"
        done
    done
    grep -hE "FAILED|HANG" "$OUT"/py_first_kernel_*.log | sort | uniq -c | head
else
    echo "SKIP: the Python binding is not built here"
fi

step "uccl_perf coll --mem cuda --stream: direct vs hold (2 processes on GPU 0; copy = each rank's D2D copy)"
for op in ${STREAM_OPS-allgather alltoall bcast}; do
    for path in direct hold; do
        timeout 90 env UCCL_COLL_STREAM=$path $M -x UCCL_COLL_STREAM tools/uccl_perf coll --mem cuda --stream \
            --op "$op" --min 64K --max 64M --rounds 3 --json "$OUT/stream_${op}_$path.json" 2>&1 | grep -v "^\["
    done
done
(cd "$OUT" && tar czf stream-logs.tgz ./*.log ./*.json 2>/dev/null)
step "done"
