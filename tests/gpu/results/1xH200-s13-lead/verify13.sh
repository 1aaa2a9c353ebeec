#!/bin/bash
# lead, session 13: the merged tree on one GPU (two processes on GPU 0): the suites that cover this
# session's GPU-facing changes (gpu13's batch kernel, coll13's tcp rendezvous with GPU staging),
# then uccl_perf p2p --mem cuda, every size byte-checked, defaults vs BATCH_SM=0 in one job each.
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
R=$OUT
dpkg -i .debs/*.deb >/dev/null && echo "debs installed"
nvidia-smi --query-gpu=index,name --format=csv,noheader | head -2
t build
./autogen.sh >/dev/null 2>&1 || { echo autogen failed; exit 1; }
mkdir -p build-dev && cd build-dev || exit 1
../configure --with-cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
make -j16 >make.log 2>&1 && make -j16 check TESTS= >>make.log 2>&1 || { grep -E "error" make.log | head -30; exit 1; }
M="mpirun --allow-run-as-root --bind-to core --map-by core -np 2 --mca btl self,vader,tcp -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES"
run() { # name timeout cmd...
    local n=$1 to=$2; shift 2; t "$n"
    timeout "$to" "$@" >"$R/$n.log" 2>&1; echo "$n rc $? ($(grep -cE '^ok|PASS|passed' "$R/$n.log") ok/pass lines, $(grep -cE '^FAIL|FAIL:| failed' "$R/$n.log") fail lines)"
    grep -E "FAIL|error" "$R/$n.log" | grep -v "0 failed" | head -5
}
run t_gpu_ipc 100 $M tests/gpu/t_gpu_ipc
run t_gpu_staging_tcp 150 $M tests/gpu/t_gpu_staging tcp
run t_coll_gpu_mixed 120 $M -x T_COLL_MEM=mixed -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000 tests/mpi/t_coll_gpu
run t_coll_gpu_tcp 150 $M -x T_COLL_MEM=gpu -x UCCL_TRANSPORTS=tcp -x UCCL_TIMEOUT_MS=30000 tests/mpi/t_coll_gpu
for v in default off; do
  e=""; [ $v = off ] && e="-x UCCL_GPU_IPC_BATCH_SM=0"
  for op in write read send; do
    t "perf $op $v"
    timeout 60 $M $e tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op --min 4K --max 32M --window 16 \
      --rounds 1 --json "$R/perf_${op}_$v.json" > "$R/perf_${op}_$v.txt" 2>&1; echo "perf $op $v rc $?"
  done
done
cd "$R" && tar czf logs.tgz *.log perf_*.txt perf_*.json && rm -f *.log perf_*.json perf_*.txt
t end
