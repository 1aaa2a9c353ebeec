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
perf=${top_builddir:-.}/tools/uccl_perf
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" # as tests/mpi/run-mpi.sh
export ASAN_OPTIONS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: no mpirun"; exit 77; }

run() { # run NAME OP VAR=VAL...: OP, window 16, 64 KiB and 128 KiB (and an odd 4 KiB + 3), 2 ranks
    name=$1
    op=$2
    shift 2
    xs=""
    for kv in UCCL_GPU_IPC_PROF=1 "$@"; do
        export "$kv"
        xs="$xs -x ${kv%%=*}"
    done
    st=0
    eval "timeout 120 ${MPIEXEC:-mpirun --oversubscribe} -np 2 $xs \"\$perf\" p2p --mem cuda --transport gpu_ipc \
        --op $op --min 64K --max 128K --window 16 --iters 3 --no-ref" >"$tmp/$name" 2>&1 || st=$?
    for kv in UCCL_GPU_IPC_PROF=1 "$@"; do unset "${kv%%=*}"; done
    return $st
}
count() { # count FILE STEP: calls of STEP in the profiles of FILE (0: no such row)
    awk -v s="$2" 'index($0, "gpu_ipc prof") && index($0, ": " s " ") { n += $(NF - 2) } END { print n + 0 }' "$1"
}
fail=0
expect() { # expect NAME OP MIN MAX VAR=VAL...: runs, and the kernel count of both ranks is in [MIN, MAX]
    name=$1 op=$2 lo=$3 hi=$4
    shift 4
    if ! run "$name" "$op" "$@"; then
        if grep -q "needs a GPU" "$tmp/$name"; then
            echo "SKIP: uccl_perf --mem cuda finds no GPU here (a CUDA/ROCm build without a device)"
            exit 77
        fi
        cat "$tmp/$name"
        echo "FAIL: $name: uccl_perf p2p $op over gpu_ipc ($*)"
        fail=1
        return
    fi
    n=$(count "$tmp/$name" "sm batch(per copy)")
    c=$(($(count "$tmp/$name" copy) + $(count "$tmp/$name" "batch(per copy)")))
    echo "$name ($op $*): $n copies by batch kernel, $c by the copy engines"
    if [ "$n" -lt "$lo" ] || [ "$n" -gt "$hi" ]; then
        cat "$tmp/$name"
        echo "FAIL: $name: $n batch-kernel copies, expected $lo..$hi"
        fail=1
    fi
}

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
if run range write $one UCCL_GPU_IPC_BATCH_SM=65; then
    cat "$tmp/range"
    echo "FAIL: UCCL_GPU_IPC_BATCH_SM=65 must fail engine creation"
    fail=1
elif ! grep -q "BATCH_SM" "$tmp/range"; then
    cat "$tmp/range"
    echo "FAIL: UCCL_GPU_IPC_BATCH_SM=65: no message naming the setting"
    fail=1
else
    echo "range: refused: $(grep -m1 "BATCH_SM" "$tmp/range")"
fi
[ $fail = 0 ] || exit 1
echo "PASS: gpu_ipc batch kernel selection"
