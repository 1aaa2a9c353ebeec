#!/bin/sh
# Fences told by a host word (UCCL_GPU_IPC_FLAG_DONE, src/tp/gpu_ipc/flag.c)
# on the fake GPU backend; uccl_perf verifies every size's last window byte
# for byte, and the profile (UCCL_GPU_IPC_PROF=1) counts the flag writes
# ("flag write") and the completed stream and event queries:
# - two processes on one GPU (UCCL_FAKE_GPU_COUNT=1), the default (fences
#   of one transfer): write, read and send at window 1, and with every
#   fence flagged (FLAG_DONE=4096) at window 16: one flag write per window
#   at least, no completed stream or event query at all (but for send at
#   window 16: a fence closed while a flagged one is in flight is queried,
#   flag.c);
# - the default at window 16: a write window's fence holds 16 transfers:
#   fewer flag writes than windows, the rest queried;
# - FLAG_DONE out of range (4097) fails engine creation naming it;
# - two GPUs (each rank its own fake GPU): no flag write (within one GPU only);
# - FLAG_DONE=0: no flag write, the completion queried as before;
# - FLAG_KERNEL_MAX (default 64K): at window 1 each fence's copy and word
#   by one launch of the copy kernel ("flag kernel") and no flag write; only
#   up to the size set; none with 0, without a copy kernel or across two
#   GPUs (the flag checks above pin 0 for their window-1 cases).
# A copy that fails under a flagged fence is t_gpu_fault's (FAIL_COPY cases).
# Skips where uccl_perf finds no GPU (a real-GPU build in CI) or no mpirun.
set -e
. "$(dirname "$0")/prof-check.sh"

run() { run_small "$@"; } # prof-check.sh: OP at 4 KiB-16 KiB, WINDOW in flight
# check NAME OP WINDOW LO HI VAR=VAL...: flag writes in [LO, HI]; with LO > 0
# no completed query either
check() {
    name=$1 op=$2 w=$3 lo=$4 hi=$5
    shift 5
    if ! run "$name" "$op" "$w" "$@"; then
        skip_no_gpu "$name"
        cat "$tmp/$name"
        echo "FAIL: $name: uccl_perf $op window $w over gpu_ipc ($*)"
        fail=1
        return
    fi
    n=$(count "$tmp/$name" "flag write")
    q=$(($(count "$tmp/$name" "stream query done") + $(count "$tmp/$name" "event query done")))
    echo "$name ($op window $w $*): $n flag writes, $q completed queries"
    if [ "$n" -lt "$lo" ] || [ "$n" -gt "$hi" ]; then
        cat "$tmp/$name"
        echo "FAIL: $name: $n flag writes, expected $lo..$hi"
        fail=1
    elif [ "$lo" -gt 0 ] && [ "$q" -ne 0 ] && { [ "$w" = 1 ] || [ "$op" != send ]; }; then
        cat "$tmp/$name"
        echo "FAIL: $name: $q completed stream/event queries with the flag on"
        fail=1
    elif [ "$lo" -eq 0 ] && [ "$q" -eq 0 ]; then
        cat "$tmp/$name"
        echo "FAIL: $name: no completed query with the flag off"
        fail=1
    fi
}

# 3 sizes x (warmup + 3 timed + 1 verified window) >= 15 windows; at most
# one fence per transfer (16 x that at window 16)
# (the window-1 fences by the stream write: FLAG_KERNEL_MAX=0; see kcheck below)
one="UCCL_FAKE_GPU_COUNT=1"
ce="UCCL_GPU_IPC_FLAG_KERNEL_MAX=0"
for op in write read send; do
    check "${op}_w1" $op 1 15 200 $one $ce
    check "${op}_w16" $op 16 15 3200 $one UCCL_GPU_IPC_FLAG_DONE=4096
done
check limit_w16 write 16 0 14 $one
check two_gpus write 1 0 0
check two_gpus_send send 16 0 0
check off_w1 write 1 0 0 $one UCCL_GPU_IPC_FLAG_DONE=0
check off_send send 16 0 0 $one UCCL_GPU_IPC_FLAG_DONE=0
expect_fail range FLAG_DONE write 1 $one UCCL_GPU_IPC_FLAG_DONE=4097 # engine creation refuses it
# kcheck NAME OP LO HI VAR=VAL...: window 1, fences whose copy and word
# went as one launch (UCCL_GPU_IPC_FLAG_KERNEL_MAX: "flag kernel") in
# [LO, HI]; with LO > 0 no completed query either; leaves $n and $w
# (flag writes: the stream-write path)
kcheck() {
    name=$1 op=$2 lo=$3 hi=$4
    shift 4
    if ! run "$name" "$op" 1 "$@"; then
        cat "$tmp/$name"
        echo "FAIL: $name: uccl_perf $op window 1 over gpu_ipc ($*)"
        fail=1
        return
    fi
    n=$(count "$tmp/$name" "flag kernel")
    w=$(count "$tmp/$name" "flag write")
    q=$(($(count "$tmp/$name" "stream query done") + $(count "$tmp/$name" "event query done")))
    echo "$name ($op window 1 $*): $n flag kernels, $w flag writes, $q completed queries"
    if [ "$n" -lt "$lo" ] || [ "$n" -gt "$hi" ] || { [ "$lo" -gt 0 ] && [ "$q" -ne 0 ]; }; then
        cat "$tmp/$name"
        echo "FAIL: $name: $n flag kernels (expected $lo..$hi), $q completed queries"
        fail=1
    fi
}
for op in write read send; do # the default (64K) covers the 4-16 KiB transfers
    kcheck "${op}_kernel" $op 15 200 $one
    [ "$w" -eq 0 ] || { echo "FAIL: ${op}_kernel: $w flag writes besides the kernels"; fail=1; }
done
kcheck kernel_4k write 5 100 $one UCCL_GPU_IPC_FLAG_KERNEL_MAX=4K # 8K and 16K: copy + write
[ "$w" -ge 10 ] || { echo "FAIL: kernel_4k: $w flag writes for the 8-16 KiB transfers"; fail=1; }
kcheck kernel_off write 0 0 $one $ce
[ "$w" -ge 15 ] || { echo "FAIL: kernel_off: $w flag writes"; fail=1; }
kcheck kernel_no_sm write 0 0 $one UCCL_FAKE_GPU_SM_COPY=0 # no copy kernel: copy + write
[ "$w" -ge 15 ] || { echo "FAIL: kernel_no_sm: $w flag writes"; fail=1; }
kcheck kernel_two_gpus write 0 0 # within one GPU only
# a copy that fails inside the kernel (the fake's 5th copy: a window-1
# write by the kernel) fails the window, never passes or hangs
expect_fail kernel_fault UCCL_ERR_TRANSPORT write 1 $one UCCL_FAKE_GPU_FAIL_COPY=5
[ $fail = 0 ] || exit 1
echo "PASS: gpu_ipc fences told by a host word"
