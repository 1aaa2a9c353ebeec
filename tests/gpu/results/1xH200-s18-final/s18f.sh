#!/bin/bash
# lead, session 18 (final): the merged tree on one H200 (two/three processes on GPU 0):
# t_gpu_ipc, t_coll_gpu gpu/mixed/stream, t_gpu_stream_kill (default and UCCL_GPU_IPC_PEER_DONE=1),
# the binding on torch and CuPy (pytest, stream tests, kv_cache), Python/C send and write 1-16 MiB
# (pgroup, 2 jobs x 10 rounds each), send/write window 1 and 16 smoke (byte-checked).
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1
R=$OUT
dpkg -i .debs/*.deb >/dev/null && echo "debs installed"
nvidia-smi --query-gpu=index,name --format=csv,noheader | head -4; nproc; cat .dev/COMMIT 2>/dev/null
t build
./autogen.sh >/dev/null 2>&1 || { echo autogen failed; exit 1; }
mkdir -p build-dev && cd build-dev || exit 1
../configure --with-cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
make -j16 >make.log 2>&1 && make -j16 check TESTS= >>make.log 2>&1 || { grep -E "error" make.log | head -30; exit 1; }
M="mpirun --allow-run-as-root --bind-to core --map-by core -np 2 --mca btl self,vader,tcp -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES"
run() { # name timeout cmd...
    local n=$1 to=$2; shift 2; t "$n"
    timeout "$to" "$@" >"$R/$n.log" 2>&1; echo "$n rc $? ($(grep -cE '^ok|PASS|passed' "$R/$n.log") ok/pass lines, $(grep -cE '^FAIL|FAIL:| failed' "$R/$n.log") fail lines)"
    grep -E "FAIL|error|SKIP" "$R/$n.log" | grep -v " 0 failed" | head -5
}
run t_gpu_ipc 100 $M tests/gpu/t_gpu_ipc
run t_coll_gpu 150 $M -x T_COLL_MEM=gpu -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000 tests/mpi/t_coll_gpu
run t_coll_gpu_mixed 120 $M -x T_COLL_MEM=mixed -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000 tests/mpi/t_coll_gpu
run t_coll_gpu_stream 150 $M -x T_COLL_MEM=gpu -x T_COLL_STREAM_ONLY=1 -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000 tests/mpi/t_coll_gpu
export UCCL_TIMEOUT_MS=3000
run t_gpu_stream_kill 120 tests/gpu/t_gpu_stream_kill
UCCL_GPU_IPC_PEER_DONE=1 run t_gpu_stream_kill_peerdone 120 tests/gpu/t_gpu_stream_kill
unset UCCL_TIMEOUT_MS
t python tests
PY_BENCH=none PY_EXAMPLES="kv_cache" PY_HOST_TESTS=0 PY_STREAM_EXTRA="" timeout 220 bash ../tests/gpu/python-device.sh >"$R/python.log" 2>&1
echo "python rc $?"; grep -E "passed|failed|exit code|HANG" "$R/python.log" | head -24
t "python bench: pgroup against C, 1-16 MiB, send and write, 2 jobs each"
mkdir -p stage/uccl && cp ../python/uccl/*.py ../python/uccl/*.pyi stage/uccl/ && cp python/uccl/.libs/_uccl.so stage/uccl/
for j in 1 2; do for op in send write; do
    PYTHONPATH=$PWD/stage timeout 120 python3 -m uccl.bench --perf tools/uccl_perf \
        --mpirun "mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE" \
        --op $op --mem cuda --transport shm,gpu_ipc --min 1M --max 16M --iters 300 --rounds 10 \
        --post pgroup --json "$R/pybench-$op$j.json" 2>&1 | grep -v "^\[" | tee "$R/pybench-$op$j.txt" | tail -6
done; done
t send and write, window 1 and 16, the last window of each size byte-checked
for op in send write; do for w in 1 16; do
    echo "## $op window $w"
    timeout 60 $M tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op \
        --min 4K --max 1M --window $w --rounds 2 2>&1 | grep -E "^ *[0-9]|MISMATCH|fail" | awk '{print $1, $3, $5, $6, $(NF)}'
done; done
cd "$R" && tar czf logs.tgz *.log *.json && rm -f *.log *.json
t end
