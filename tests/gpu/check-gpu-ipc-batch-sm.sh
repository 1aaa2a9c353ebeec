#!/bin/sh
# Which gpu_ipc batches go as one launch of the copy kernel
# (UCCL_GPU_IPC_BATCH_SM) on the fake GPU backend; uccl_perf verifies every
# window's bytes, and the profile (UCCL_GPU_IPC_PROF=1) counts the copies
# each way ("sm batch(per copy)" against "batch(per copy)" and "copy"):
# - two processes on one GPU (UCCL_FAKE_GPU_COUNT=1), BATCH_SM=2: writes,
#   reads and sends (the receiver pulls) of a window of 16 go by kernel;
# - the default (BATCH_SM=2) as BATCH_SM=2;
# - BATCH_SM=0, or more copies asked for than a window has (BATCH_SM=17):
#   none does;
# - two GPUs (each rank its own fake GPU): none does (within one GPU only);
# - BATCH_MAX below every size (64K): copies still held for the kernel up to
#   BATCH_SM_MAX (64M), but not with BATCH_SM_MAX=64K, nor on two GPUs;
# - a fake without the kernel (UCCL_FAKE_GPU_SM_COPY=0): the copy engines,
#   still correct;
# - BATCH_SM out of range (65) fails engine creation naming the setting.
# Skips where uccl_perf finds no GPU (a real-GPU build in CI) or no mpirun.
set -e
. "$(dirname "$0")/prof-check.sh"

run() { # run NAME OP VAR=VAL...: OP, window 16, 64 KiB and 128 KiB (and an odd 4 KiB + 3), 2 ranks
    name=$1 op=$2
    shift 2
    run_p2p "$name" "$op" 16 64K 128K 3 UCCL_GPU_IPC_PROF=1 "$@"
}
kstep="sm batch(per copy)"

# 2 sizes x (warmup + 3 timed + 1 verified window) x 16 transfers = 160
one="UCCL_FAKE_GPU_COUNT=1"
expect write_on write 160 1000000 $one UCCL_GPU_IPC_BATCH_SM=2
[ "$c" -le 20 ] || { echo "FAIL: write_on: $c copy-engine copies left"; fail=1; }
expect read_on read 160 1000000 $one UCCL_GPU_IPC_BATCH_SM=2
expect send_on send 160 1000000 $one UCCL_GPU_IPC_BATCH_SM=2
expect default write 160 1000000 $one
expect off write 0 0 $one UCCL_GPU_IPC_BATCH_SM=0
expect above_window write 0 0 $one UCCL_GPU_IPC_BATCH_SM=17
expect two_gpus write 0 0 UCCL_GPU_IPC_BATCH_SM=2
expect sm_max write 160 1000000 $one UCCL_GPU_IPC_BATCH_MAX=64K
expect sm_max_off write 0 0 $one UCCL_GPU_IPC_BATCH_MAX=64K UCCL_GPU_IPC_BATCH_SM_MAX=64K
expect sm_max_2gpus write 0 0 UCCL_GPU_IPC_BATCH_MAX=64K
expect no_kernel send 0 0 $one UCCL_GPU_IPC_BATCH_SM=2 UCCL_FAKE_GPU_SM_COPY=0
[ "$c" -ge 160 ] || { echo "FAIL: no_kernel: only $c copy-engine copies"; fail=1; }
expect_fail range BATCH_SM write $one UCCL_GPU_IPC_BATCH_SM=65 # engine creation refuses it
[ $fail = 0 ] || exit 1
echo "PASS: gpu_ipc batch kernel selection"
