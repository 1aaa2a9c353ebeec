#!/bin/bash
# lead, session 14 (final): the merged tree on the device machine (one or two GPUs): the suites that cover
# this session's GPU-facing changes (gpu14's FLAG_DONE fences, py14's GIL handling, core14's
# per-message path, hyg14's GPU fault test), the Python binding on torch/CuPy, then FLAG_DONE 0/1
# alternating (write/send, window 1 and 16, two processes on GPU 0, every size byte-checked).
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
R=$OUT
dpkg -i .debs/*.deb >/dev/null && echo "debs installed"
nvidia-smi --query-gpu=index,name --format=csv,noheader | head -4; nproc
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
for i in 1 2 3 4; do run t_gpu_stream_kill_$i 120 tests/gpu/t_gpu_stream_kill; done
run t_coll_gpu_stream 150 $M -x T_COLL_MEM=gpu -x T_COLL_STREAM_ONLY=1 -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000 tests/mpi/t_coll_gpu
ls tests/gpu/ | grep -E "^t_" | grep -v "\.o$" | tr '\n' ' '; echo
ngpu=$(nvidia-smi -L | grep -c "^GPU")
if [ "$ngpu" -ge 2 ]; then # two GPUs: the suites again GPU0 <-> GPU1, then write/send GPU0 -> GPU1
    run t_gpu_ipc_2gpu 100 env CUDA_VISIBLE_DEVICES=0,1 $M tests/gpu/t_gpu_ipc
    run t_coll_gpu_2gpu 150 env CUDA_VISIBLE_DEVICES=0,1 $M -x T_COLL_MEM=gpu -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000 tests/mpi/t_coll_gpu
    for w in 1 16; do for op in write send; do
        t "GPU0 -> GPU1 $op window $w"
        CUDA_VISIBLE_DEVICES=0,1 timeout 60 $M tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op \
            --min 4K --max 16M --window $w --rounds 3 2>&1 | grep -E "^ *[0-9]|^#" | head -20
    done; done
fi
t python
PY_BENCH="write_cuda" PY_BENCH_MIN=1M PY_BENCH_MAX=16M PY_EXAMPLES="kv_cache moe" PY_HOST_TESTS=0 \
    PY_STREAM_EXTRA="" timeout 240 bash ../tests/gpu/python-device.sh >"$R/python.log" 2>&1
echo "python rc $?"; grep -E "passed|failed|error|Error|x C|ratio" "$R/python.log" | head -30
cd .. || exit 1
t perf window 1 and 16, defaults, the last window of each size byte-checked
for w in 1 16; do for op in write read send; do
    echo "## $op window $w"
    timeout 60 $M build-dev/tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op --min 4K --max 16M \
        --window $w --rounds 3 2>&1 | grep -E "^ *[0-9]|MISMATCH|fail" | awk '{print $1, $3, $5, $6, $(NF)}'
done; done
cd "$R" && tar czf logs.tgz *.log && rm -f *.log
t end
