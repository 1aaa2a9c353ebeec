#!/bin/bash
# lead, session 17, call W (several GPUs): (1) main: multi-GPU suites and collectives next to NCCL
# (run-device.sh ONLY=multi, np 4 and 2); (2) gpu16's push (branch gpu17 = gpu16 + main) GPU0 -> GPU1:
# send window 1 and 16, UCCL_GPU_IPC_PUSH=0 vs 1 alternating, write window 1 beside; t_gpu_ipc with PUSH=1.
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT; ROOT=$PWD
dpkg -i .debs/*.deb >/dev/null && echo "debs installed"
nvidia-smi -L; nproc
t "build gpu17 (background)"
( cd .dev/gpu17 && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev &&
  ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
  make -j24 libuccl.la tools/uccl_perf tests/gpu/t_gpu_ipc >make.log 2>&1; echo "gpu17 build rc $?" ) > $R/gpu17-build.txt 2>&1 &
BG=$!
t "main: multi"
mkdir -p $R/multi
OUT=$R/multi ONLY=multi MULTI_NPS="4 2" MULTI_STEPS="tests coll" MULTI_COLL_OPS="alltoall allgather" \
  MULTI_COLL_MIN=1M MULTI_DEADLINE_S=${MDL:-260} timeout ${MTO:-300} bash tests/gpu/run-device.sh > $R/multi.log 2>&1
echo "multi rc $?"; grep -E "exit code|ok,|FAIL|SKIPPED|GPUs, np" $R/multi.log | head -30
wait $BG; cat $R/gpu17-build.txt
cd .dev/gpu17/build-dev || { t end; exit 1; }
export CUDA_VISIBLE_DEVICES=0,1
M="mpirun --allow-run-as-root --bind-to none --map-by slot -np 2 --mca btl self,vader,tcp -x LD_LIBRARY_PATH -x CUDA_VISIBLE_DEVICES -x NCCL_NVLS_ENABLE"
t "gpu17: t_gpu_ipc, GPU0 <-> GPU1 and same GPU, PUSH=1"
timeout 120 $M -x UCCL_GPU_IPC_PUSH=1 tests/gpu/t_gpu_ipc > $R/ipc_push.log 2>&1; echo "t_gpu_ipc PUSH=1 rc $? ($(grep -c '^ok' $R/ipc_push.log) ok)"; grep -E "FAIL|PASS|skipped" $R/ipc_push.log | sort | uniq -c
mkdir -p $R/p2p
for r in 1 2; do for p in 0 1; do
    t "gpu17 r$r PUSH=$p: send window 1"
    timeout 60 $M -x UCCL_GPU_IPC_PUSH=$p tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op send --min 4K --max 16M \
        --window 1 --rounds 3 --json $R/p2p/send-w1-r$r-p$p.json 2>&1 | grep -E "^ +[0-9]|MISMATCH|fail" | awk '{print $1, $3, $5, $6, $(NF)}'
    t "gpu17 r$r PUSH=$p: send window 16"
    timeout 60 $M -x UCCL_GPU_IPC_PUSH=$p tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op send --min 4K --max 16M \
        --window 16 --rounds 3 --json $R/p2p/send-w16-r$r-p$p.json 2>&1 | grep -E "^ +[0-9]|MISMATCH|fail" | awk '{print $1, $3, $5, $6, $(NF)}'
done
t "gpu17 r$r write window 1 (reference)"
timeout 60 $M tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op write --min 4K --max 16M \
    --window 1 --rounds 3 --json $R/p2p/write-w1-r$r.json 2>&1 | grep -E "^ +[0-9]|MISMATCH|fail" | awk '{print $1, $3, $5, $6}'
done
cd $R && tar czf p2p.tgz p2p *.log && rm -rf p2p *.log
t end
