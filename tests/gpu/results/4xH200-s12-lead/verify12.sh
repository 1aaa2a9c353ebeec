#!/bin/bash
# lead, session 12: the merged tree on the 4-GPU machine: multi-GPU suites and collectives (np 4 and 2, default
# copy mode = the new auto, next to NCCL and the ceilings), then the one-GPU suites on GPU 0.
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$OUT
t multi
mkdir -p $R/multi
OUT=$R/multi ONLY=multi MULTI_NPS="4 2" MULTI_STEPS="tests coll" MULTI_COLL_OPS="alltoall allgather" \
  MULTI_COLL_MIN=1M MULTI_DEADLINE_S=${MDL:-150} timeout ${MTO:-180} bash tests/gpu/run-device.sh > $R/multi.log 2>&1
echo "multi rc $?"; grep -E "exit code|ok,|FAIL|SKIPPED|GPUs, np" $R/multi.log | head -30
t one-gpu
export CUDA_VISIBLE_DEVICES=0
cd build-dev || exit 1
M="mpirun --allow-run-as-root --bind-to core --map-by core -np 2 --mca btl self,vader,tcp -x LD_LIBRARY_PATH"
t t_coll_gpu mixed
timeout 100 $M -x T_COLL_MEM=mixed -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000 tests/mpi/t_coll_gpu > $R/t_coll_gpu_mixed.log 2>&1
echo "t_coll_gpu mixed rc $? ($(grep -c '^ok' $R/t_coll_gpu_mixed.log) ok, $(grep -c '^FAIL' $R/t_coll_gpu_mixed.log) FAIL)"
t t_gpu_copy; timeout 60 tests/gpu/t_gpu_copy > $R/t_gpu_copy.log 2>&1; echo "t_gpu_copy rc $?"
t t_gpu_ipc
timeout 100 $M tests/gpu/t_gpu_ipc > $R/t_gpu_ipc.log 2>&1; echo "t_gpu_ipc rc $?"
grep -E "FAIL" $R/t_gpu_ipc.log | head; grep -cE "^ok|PASS" $R/t_gpu_ipc.log
t end
