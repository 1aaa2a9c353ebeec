#!/bin/sh
# Which gpu_ipc copies take the copy kernel (UCCL_GPU_IPC_COPY, SM_MIN) on
# the fake GPU backend, where uccl_perf puts its two ranks on the two fake
# GPUs (copies between different GPUs) and verifies every window's bytes;
# the profile (UCCL_GPU_IPC_PROF=1) counts the kernels ("sm copy"):
# - COPY=sm: writes of 64-128 KiB, and sends pushed by the sender, go
#   through the kernel; sends the receiver pulls only with SM_PULL=1;
# - COPY=ce, or sm with SM_MIN above every size: none does;
# - COPY=auto (the default) copies with the copy engines between two GPUs;
#   on 3 ranks on 3 fake GPUs (UCCL_FAKE_GPU_COUNT=3: each engine connected
#   to 2 other GPUs) an alltoall's messages from SM_AUTO_MIN are pulled whole
#   by the receiver's kernel (no push, no copy-engine copy left, though
#   PUSH_MIN and SPLIT_PCT ask for half pushed), and not between 2 ranks
#   (one peer GPU), nor below SM_AUTO_MIN;
# - a fake without the kernel (UCCL_FAKE_GPU_SM_COPY=0, as a build without
#   nvcc): COPY=sm fails engine creation naming the setting.
# Skips where uccl_perf finds no GPU (a real-GPU build in CI) or no mpirun.
set -e
. "$(dirname "$0")/prof-check.sh"

run() { # run NAME OP VAR=VAL...: OP, window 16, 64 KiB and 128 KiB, on 2 ranks (MPIEXEC holds a $(...));
    # OP coll-OP: uccl_perf coll --op OP on 3 ranks, blocks of 256 KiB (SPLIT_PCT's default splits them)
    name=$1
    op=$2
    shift 2
    case $op in
    coll-*) ;;
    *) run_p2p "$name" "$op" 16 64K 128K 3 UCCL_GPU_IPC_PROF=1 "$@"; return ;;
    esac
    env_on UCCL_GPU_IPC_PROF=1 "$@"
    st=0
    eval "timeout 120 ${MPIEXEC:-mpirun --oversubscribe} -np 3 $xs \"\$perf\" coll --mem cuda \
        --transport shm,gpu_ipc --op ${op#coll-} --min 256K --max 256K --iters 1 --warmup 1" >"$tmp/$name" 2>&1 || st=$?
    env_off UCCL_GPU_IPC_PROF=1 "$@"
    return $st
}
kstep="sm copy"

# 2 sizes x (warmup + 3 timed + 1 verified window) x 16 transfers at least
sm="UCCL_GPU_IPC_COPY=sm UCCL_GPU_IPC_SM_MIN=64K"
expect sm_write write 160 1000000 $sm
expect sm_streams write 160 1000000 $sm UCCL_GPU_IPC_SM_STREAMS=1
expect sm_pull send 0 0 $sm
expect sm_pull_on send 160 1000000 $sm UCCL_GPU_IPC_SM_PULL=1
expect sm_push send 160 1000000 $sm UCCL_GPU_IPC_PUSH_MIN=64K UCCL_GPU_IPC_SPLIT_PCT=0
expect ce_write write 0 0 UCCL_GPU_IPC_COPY=ce
expect sm_min write 0 0 UCCL_GPU_IPC_COPY=sm UCCL_GPU_IPC_SM_MIN=256K
expect auto write 0 0 UCCL_GPU_IPC_COPY=auto UCCL_GPU_IPC_SM_MIN=64K UCCL_GPU_IPC_SM_AUTO_MIN=64K
# auto on 3 GPUs: (warmup 1 + 1 timed) x 2 peers x 3 ranks, at least; one peer GPU: the auto case above
auto="UCCL_GPU_IPC_SM_MIN=64K UCCL_GPU_IPC_SM_AUTO_MIN=64K UCCL_GPU_IPC_PUSH_MIN=64K"
expect auto_3gpus coll-alltoall 12 1000000 $auto UCCL_FAKE_GPU_COUNT=3
n3=$n
if [ "$c" != 0 ]; then
    cat "$tmp/auto_3gpus"
    echo "FAIL: auto_3gpus: $c copy-engine copies: not every message was pulled whole by kernel"
    fail=1
fi
# (DUPLEX_PULL_MAX=0: an alltoall's messages meet a send of the receiver's own, which would pull them whole)
expect auto_min coll-alltoall 0 0 $auto UCCL_FAKE_GPU_COUNT=3 UCCL_GPU_IPC_SM_AUTO_MIN=512K \
    UCCL_GPU_IPC_DUPLEX_PULL_MAX=0
# the same messages split in two there (half pushed, half pulled: SPLIT_PCT), one kernel pull each above
if [ "$c" != $((2 * n3)) ]; then
    echo "FAIL: auto_3gpus: $n3 kernel copies for the $c/2 messages split in auto_min: not one whole pull each"
    fail=1
fi
# COPY=sm without a copy kernel: engine creation refuses it
expect_fail sm_nokernel "UCCL_GPU_IPC_COPY=sm: no copy kernel" write UCCL_GPU_IPC_COPY=sm UCCL_FAKE_GPU_SM_COPY=0
[ $fail = 0 ] || exit 1
echo "PASS: gpu_ipc copy kernel selection"
