#!/bin/sh
# A pulled send told done by the receiver's GPU (UCCL_GPU_IPC_PEER_DONE,
# src/tp/gpu_ipc/done.c) on the fake GPU backend; uccl_perf verifies every
# size's last window byte for byte, and the profile (UCCL_GPU_IPC_PROF=1)
# counts the sends completed by the word ("peer done", sender) and the
# fences that wrote one ("peer word", receiver):
# - two processes on one GPU, send at window 1: every data message (15 at
#   least) ends by the word, by the copy kernel (the default) and by the
#   copy + stream write (FLAG_KERNEL_MAX=0), and the receiver sends no FIN:
#   its messages out are the 0-byte acks only (as many as windows);
# - window 16: a fence holds several pulls (or one is in flight): those end
#   with FIN; every message still arrives (the counts only bounded);
# - PEER_DONE=0, FLAG_DONE=0 (no flagged fence), two GPUs (flagged fences
#   are within one GPU only): no word, FIN as before;
# - the defaults (PEER_DONE=1, PEER_DONE_MIN=4M): 4-16 KiB sends end with
#   FIN, 4-8 MiB sends by the word; PEER_DONE_MIN=8K: the 8 and 16 KiB
#   sends by the word, the 4 KiB ones with FIN;
# - the receiver's copy fails (the fake's 5th copy): the window fails with
#   UCCL_ERR_TRANSPORT, never hangs (both sides' statuses: t_gpu_fault's
#   PEER_DONE cases);
# - a lazily connected comm (UCCL_LAZY_CONNECT=1, uccl_perf coll allgather,
#   verified): the word page is registered inside the first collective (the
#   accepting side in progress), and sends end by the word; when that
#   registration fails (UCCL_FAKE_GPU_FAIL_HOST_REGISTER=1, both ranks) the
#   failure is logged with a warning that PEER_DONE is off for that peer, no
#   word is written, sends end with FIN and every call completes with the
#   right bytes.
# Skips where uccl_perf finds no GPU (a real-GPU build in CI) or no mpirun.
set -e
. "$(dirname "$0")/prof-check.sh"

run() { run_small "$@"; } # prof-check.sh: OP at 4 KiB-16 KiB, WINDOW in flight
# check NAME WINDOW LO HI VAR=VAL...: send at WINDOW; sends ended by the
# word in [LO, HI], as many fences wrote one; leaves $d (those) and $o
# (the receiver's messages out)
check() {
    name=$1 w=$2 lo=$3 hi=$4
    shift 4
    if ! run "$name" send "$w" "$@"; then
        skip_no_gpu "$name"
        cat "$tmp/$name"
        echo "FAIL: $name: uccl_perf send window $w over gpu_ipc ($*)"
        fail=1
        return
    fi
    d=$(count "$tmp/$name" "peer done")
    p=$(count "$tmp/$name" "peer word")
    # the receiver (rank 1) is the process whose profile has no "peer done"
    # row when on; take the message-out count of the profile that wrote words
    o=$(awk 'index($0, "gpu_ipc prof") { pid = $4; if (index($0, ": peer word ")) w[pid] = 1;
             if (index($0, ": message out ")) m[pid] = $(NF - 2) }
             END { for (q in w) print m[q] + 0 }' "$tmp/$name" | head -1)
    echo "$name (send window $w $*): $d sends ended by the word, $p fences wrote one, receiver's messages out ${o:-?}"
    if [ "$d" -lt "$lo" ] || [ "$d" -gt "$hi" ] || [ "$d" -ne "$p" ]; then
        cat "$tmp/$name"
        echo "FAIL: $name: $d sends ended by the word (expected $lo..$hi), $p fences wrote one"
        fail=1
    fi
}

one="UCCL_FAKE_GPU_COUNT=1"
on="UCCL_GPU_IPC_PEER_DONE=1 UCCL_GPU_IPC_PEER_DONE_MIN=0" # every size (the default floor is 4 MiB)
# 3 sizes x (warmup + 3 timed + 1 verified window) >= 15 windows of one message
check kernel_w1 1 15 200 $one $on
windows=$d
# no FIN: the receiver's only messages are its acks, one per window
[ -z "$o" ] || [ "$o" -eq "$windows" ] || { echo "FAIL: kernel_w1: $o receiver messages for $windows windows"; fail=1; }
check write_w1 1 15 200 $one $on UCCL_GPU_IPC_FLAG_KERNEL_MAX=0
[ -z "$o" ] || [ "$o" -eq "$d" ] || { echo "FAIL: write_w1: $o receiver messages for $d windows"; fail=1; }
check window16 16 0 3200 $one $on
check off_w1 1 0 0 $one UCCL_GPU_IPC_PEER_DONE=0
check no_flag_w1 1 0 0 $one $on UCCL_GPU_IPC_FLAG_DONE=0
check two_gpus 1 0 0 $on
# the default floor: small sends keep the FIN, large ones end by the word
check default_small 1 0 0 $one
run() { run_p2p "$@"; }
check default_large 1 5 200 4M 8M 3 UCCL_GPU_IPC_PROF=1 $one
run() { run_small "$@"; }
check min_8k 1 10 200 $one UCCL_GPU_IPC_PEER_DONE_MIN=8K
[ "$d" -lt "$windows" ] || { echo "FAIL: min_8k: $d of $windows windows ended by the word, the 4 KiB ones too"; fail=1; }
expect_fail fault UCCL_ERR_TRANSPORT send 1 $one $on UCCL_FAKE_GPU_FAIL_COPY=5

# lazy NAME VAR=VAL...: uccl_perf coll allgather at 64 KiB, 2 ranks on one
# GPU, PEER_DONE on, lazily connected; sets $d and $p as check does, $wrong
# (wrong bytes in the verified call, -1: no result row) and $regfail (the
# failed registrations logged)
lazy() {
    name=$1
    shift
    env_on UCCL_GPU_IPC_PROF=1 UCCL_LAZY_CONNECT=1 $one $on "$@"
    st=0
    eval "timeout 60 ${MPIEXEC:-mpirun --oversubscribe} -np 2 $xs \"\$perf\" coll --mem cuda --op allgather \
        --min 64K --max 64K --iters 5 --warmup 1 --rounds 1 --no-ref" >"$tmp/$name" 2>&1 || st=$?
    env_off UCCL_GPU_IPC_PROF=1 UCCL_LAZY_CONNECT=1 $one $on "$@"
    d=$(count "$tmp/$name" "peer done")
    p=$(count "$tmp/$name" "peer word")
    wrong=$(awk '$1 ~ /^[0-9]+$/ && NF > 10 { w += $NF; r++ } END { print (r == 1 ? w : -1) }' "$tmp/$name")
    regfail=$(grep -c 'cudaHostRegister.* failed' "$tmp/$name" || true)
    fallback=$(grep -c "PEER_DONE=1, but .* end with FIN" "$tmp/$name" || true)
    echo "$name (allgather, lazy connect $*): exit $st, $d sends ended by the word, $p fences wrote one," \
        "$wrong wrong, $regfail failed registrations, $fallback warned"
    [ $st -eq 0 ] || skip_no_gpu "$name"
}
lazy lazy_words
if [ $st -ne 0 ] || [ "$wrong" != 0 ] || [ "$d" -lt 1 ] || [ "$d" -ne "$p" ]; then
    cat "$tmp/lazy_words"
    echo "FAIL: lazy_words: a lazily connected comm's sends should end by the word, bytes right"
    fail=1
fi
lazy lazy_register_fails UCCL_FAKE_GPU_FAIL_HOST_REGISTER=1
if [ $st -ne 0 ] || [ "$wrong" != 0 ] || [ "$d" -ne 0 ] || [ "$p" -ne 0 ] || [ "$regfail" -ne 2 ] ||
    [ "$fallback" -ne 2 ]; then
    cat "$tmp/lazy_register_fails"
    echo "FAIL: lazy_register_fails: with the word page's registration failed (both ranks), sends" \
        "must end with FIN, every call with the right bytes"
    fail=1
fi
[ $fail = 0 ] || exit 1
echo "PASS: gpu_ipc sends told done by the receiver's GPU"
