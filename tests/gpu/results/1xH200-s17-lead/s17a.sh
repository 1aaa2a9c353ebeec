#!/bin/bash
# lead, session 17, call A (one GPU): (1) done.c's PEER_DONE teardown fix on a real GPU
# (t_gpu_stream_kill x3 with UCCL_GPU_IPC_PEER_DONE=1, x1 default, t_gpu_ipc with it);
# (2) issue 22: Python (PersistentGroup) / C, send and write, 1-16 MiB, window 16, 12 rounds;
# (3) issue 19: window-1 send and write 4K-1M, 3 rounds, default and PEER_DONE=1 alternating.
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1
R=$OUT
dpkg -i .debs/*.deb >/dev/null && echo "debs installed"
nvidia-smi --query-gpu=index,name --format=csv,noheader | head -2; nproc; git log --oneline -1 2>/dev/null
t build
./autogen.sh >/dev/null 2>&1 || { echo autogen failed; exit 1; }
mkdir -p build-dev && cd build-dev || exit 1
../configure --with-cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
make -j16 libuccl.la tools/uccl_perf python/uccl/_uccl.la >make.log 2>&1 && make -j16 tests/gpu/t_gpu_stream_kill tests/gpu/t_gpu_ipc >>make.log 2>&1 || { grep -E "error" make.log | head -30; exit 1; }
export UCCL_TIMEOUT_MS=3000
k() { t "$1"; timeout 60 tests/gpu/t_gpu_stream_kill >"$R/$1.log" 2>&1; echo "$1 rc $?"; grep -E "PASS|FAIL|SKIP" "$R/$1.log" | sort | uniq -c | head -4; }
UCCL_GPU_IPC_PEER_DONE=1 k kill_pd1
UCCL_GPU_IPC_PEER_DONE=1 k kill_pd2
UCCL_GPU_IPC_PEER_DONE=1 k kill_pd3
k kill_default
unset UCCL_TIMEOUT_MS
M="mpirun --allow-run-as-root --bind-to core --map-by core -np 2 --mca btl self,vader,tcp -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES"
t t_gpu_ipc PEER_DONE=1
timeout 90 $M -x UCCL_GPU_IPC_PEER_DONE=1 tests/gpu/t_gpu_ipc >"$R/ipc_pd.log" 2>&1; echo "t_gpu_ipc rc $?"; grep -cE "^ok" "$R/ipc_pd.log"; grep -E "FAIL" "$R/ipc_pd.log" | head -4
t "python bench: pgroup against C, 1-16 MiB, window 16, 12 rounds"
mkdir -p stage/uccl && cp ../python/uccl/*.py ../python/uccl/*.pyi stage/uccl/ && cp python/uccl/.libs/_uccl.so stage/uccl/
for op in send write; do
    PYTHONPATH=$PWD/stage timeout 170 python3 -m uccl.bench --perf tools/uccl_perf \
        --mpirun "mpirun --allow-run-as-root --oversubscribe --bind-to core -x PYTHONPATH -x NCCL_NVLS_ENABLE" \
        --op $op --mem cuda --transport shm,gpu_ipc --min 1M --max 16M --iters 300 --rounds 12 \
        --post pgroup --json "$R/pybench-$op.json" 2>&1 | grep -v "^\[" | tee "$R/pybench-$op.txt" | tail -14
done
t "window 1: send and write 4K-1M, default vs PEER_DONE=1 alternating, 3 rounds each"
for r in 1 2 3; do for pd in 0 1; do for op in send write; do
    echo "## r$r pd$pd $op window 1"
    timeout 60 $M -x UCCL_GPU_IPC_PEER_DONE=$pd tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op \
        --min 4K --max 1M --window 1 --rounds 1 --json "$R/w1-r$r-pd$pd-$op.json" 2>&1 | grep -E "^ *[0-9]|MISMATCH|fail" | awk '{print $1, $3, $5, $6, $(NF)}'
done; done; done
cd "$R" && tar czf logs.tgz *.log *.json && rm -f *.log *.json
t end
