#!/bin/bash
# The dead-peer stream race on the device machine, in one call (rev14):
# build the library with CUDA and only the programs used, then
# t_gpu_stream_kill KILL_RUNS times (survivors tear down at once: a
# revoked mapping must not close under a stream) and MEET_RUNS times with
# T_STREAM_KILL_MEET=1, t_gpu_ipc (2 processes on GPU 0) and t_coll_gpu's
# stream cases. Run from the source root; logs in $OUT/stream-kill.tgz,
# the summary in $OUT/stream-kill.txt. NOBUILD=1: use ./build-dev as is.
set -u
OUT=${OUT:-/tmp/uccl-gpu-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/stream-kill.txt") 2>&1
export NCCL_NVLS_ENABLE=0
step() { echo "=== $* ($(date +%T))"; }
date -u
nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader 2>/dev/null
if [ -z "${NOBUILD:-}" ]; then
    step "build (CUDA)"
    ./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
    mkdir -p build-dev && cd build-dev || exit 1
    ../configure --with-cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
    make -j16 libuccl_internal.la >make.log 2>&1 &&
        make -j16 tests/gpu/t_gpu_stream_kill tests/gpu/t_gpu_ipc tests/mpi/t_coll_gpu >>make.log 2>&1 ||
        { grep -E "error|Error" make.log | head -40; exit 1; }
else
    cd build-dev || exit 1
fi
L=$(mktemp -d)
step "t_gpu_stream_kill: 3 processes on GPU 0, the last SIGKILLed, UCCL_TIMEOUT_MS=3000"
for mode in kill meet; do
    runs=${KILL_RUNS:-5}; [ $mode = meet ] && runs=${MEET_RUNS:-2}
    pass=0
    for i in $(seq 1 "$runs"); do
        log=$L/t_gpu_stream_kill_${mode}_$i.log
        if [ $mode = meet ]; then
            T_STREAM_KILL_MEET=1 UCCL_TIMEOUT_MS=3000 timeout 100 tests/gpu/t_gpu_stream_kill >"$log" 2>&1
        else
            UCCL_TIMEOUT_MS=3000 timeout 100 tests/gpu/t_gpu_stream_kill >"$log" 2>&1
        fi
        rc=$?
        [ $rc = 0 ] && pass=$((pass + 1))
        echo "  $mode run $i: exit $rc; $(grep -E '^(PASS|FAIL)' "$log" | tail -1)"
    done
    echo "t_gpu_stream_kill ($mode): $pass of $runs passed"
done
grep -hE "^FAIL|peer mappings|ended with|fake GPU|error" "$L"/t_gpu_stream_kill_*.log | sed 's/pid [0-9]*/pid N/; s/vm:[0-9]*/P/' |
    sort | uniq -c | sort -rn | head -20
M="mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader,tcp -x UCCL_TRANSPORTS=shm,gpu_ipc"
step "t_gpu_ipc, 2 processes on GPU 0"
timeout 150 $M tests/gpu/t_gpu_ipc >"$L/t_gpu_ipc.log" 2>&1
echo "t_gpu_ipc exit code: $? ($(grep -c PASS "$L/t_gpu_ipc.log") PASS, $(grep -c FAIL "$L/t_gpu_ipc.log") FAIL)"
step "t_coll_gpu stream cases, GPU memory, 2 processes on GPU 0"
timeout 120 $M -x T_COLL_MEM=gpu -x T_COLL_STREAM_ONLY=1 tests/mpi/t_coll_gpu >"$L/t_coll_gpu_stream.log" 2>&1
echo "t_coll_gpu stream cases exit code: $? ($(grep -c '^ok' "$L/t_coll_gpu_stream.log") ok, $(grep -c '^FAIL' "$L/t_coll_gpu_stream.log") FAIL)"
grep -E "^FAIL|SKIP" "$L/t_coll_gpu_stream.log" | sort | uniq -c | head
tar czf "$OUT/stream-kill.tgz" -C "$L" .
step "done"
