#!/bin/bash
# Session 21's second one-GPU call (issue 19 [E]): the tree with PEER_DONE on
# by default from PEER_DONE_MIN (4 MiB), built with CUDA; the GPU suites with
# the defaults (t_gpu_ipc, t_gpu_staging shm, t_coll_gpu,
# t_gpu_stream_kill with the word at every size); then the new default
# against UCCL_GPU_IPC_PEER_DONE=0 (the old one) in alternation: bcast at
# 4-64 MiB (3 pairs), allgather / alltoall at 16-64 MiB (1 pair), p2p send
# window 1 at 4 KiB-16 MiB and window 16 (2 pairs). From the tree's root:
#   bash tests/gpu/results/1xH200-s21/run2.sh     (logs in $OUT)
# Rehearsal: S21_BUILT=build/fakegpu S21_MPI_ARGS=--oversubscribe UCCL_FAKE_GPU_COUNT=1
# S21_MIN=64K S21_MAX=128K S21_ITERS=5 S21_P2P_MAX=64K.
set -u
OUT=${OUT:-/tmp/s21-out}
mkdir -p "$OUT/logs"
exec > >(tee -a "$OUT/device.txt") 2>&1
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
START=$SECONDS
step() { echo "=== $* ($(date -u +%T), +$((SECONDS - START)) s)"; }
late() { [ $((SECONDS - START)) -ge "${S21_DEADLINE_S:-400}" ]; }
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader
lscpu | grep -E "^(Model name|CPU\(s\))"
B=${S21_BUILT:-build-dev}
[ -n "${S21_BUILT:-}" ] || { step build; (./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev &&
    ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
    make -j16 libuccl.la tools/uccl_perf tests/gpu/t_gpu_ipc tests/gpu/t_gpu_staging tests/mpi/t_coll_gpu tests/gpu/t_gpu_stream_kill >make.log 2>&1) ||
    { echo "build failed"; grep -E "error|Error" build-dev/*.log | head -30; exit 1; }; }
MPIRUN="mpirun --allow-run-as-root ${S21_MPI_ARGS:---bind-to core} --map-by core -np 2 --mca btl self,vader,tcp -x NCCL_NVLS_ENABLE -x CUDA_VISIBLE_DEVICES"
[ -n "${UCCL_FAKE_GPU_COUNT:-}" ] && MPIRUN="$MPIRUN -x UCCL_FAKE_GPU_COUNT"
suite() { # tag program [args]: one suite run, its PASS / FAIL / ok counts
    local tag=$1
    shift
    step "$tag"
    timeout 90 $MPIRUN "$@" >"$OUT/logs/$tag.log" 2>&1
    echo "$tag exit $? ($(grep -c PASS "$OUT/logs/$tag.log") PASS, $(grep -c '^ok' "$OUT/logs/$tag.log") ok," \
        "$(grep -c FAIL "$OUT/logs/$tag.log") FAIL)"
    grep -E "mem_free|FAIL|SKIP|skipped" "$OUT/logs/$tag.log" | sort | uniq -c | head -12
}
suite t_gpu_ipc $B/tests/gpu/t_gpu_ipc
suite t_gpu_staging_shm $B/tests/gpu/t_gpu_staging shm
UCCL_TRANSPORTS=shm,gpu_ipc T_COLL_MEM=gpu UCCL_TIMEOUT_MS=30000 \
    suite t_coll_gpu -x UCCL_TRANSPORTS -x T_COLL_MEM -x UCCL_TIMEOUT_MS $B/tests/mpi/t_coll_gpu
step "t_gpu_stream_kill (PEER_DONE_MIN=0)"
UCCL_GPU_IPC_PEER_DONE_MIN=0 timeout 90 $B/tests/gpu/t_gpu_stream_kill >"$OUT/logs/t_gpu_stream_kill.log" 2>&1
echo "t_gpu_stream_kill exit $?"; tail -3 "$OUT/logs/t_gpu_stream_kill.log"
MN=${S21_MIN:-4M} MX=${S21_MAX:-64M} IT=${S21_ITERS:-100} PMAX=${S21_P2P_MAX:-16M}
xs_of() { local xs="" kv; for kv in "$@"; do xs="$xs -x ${kv%%=*}"; done; echo "$xs"; }
coll() { # tag op min max [VAR=VAL...]: one uccl_perf coll --mem cuda job, its rows
    local tag=$1 op=$2 min=$3 max=$4
    shift 4
    late && { echo "(skipped $tag: past the deadline)"; return; }
    step "$tag: $op $min-$max, $IT calls x 5 rounds, ${*:-defaults}"
    env "$@" timeout 60 $MPIRUN $(xs_of "$@") $B/tools/uccl_perf coll --mem cuda --op $op --min $min --max $max \
        --iters $IT --warmup 5 --rounds 5 --ucx-ref off --json "$OUT/logs/$tag.json" >"$OUT/logs/$tag.txt" 2>&1
    echo "exit $?; size uccl-us plan-us copy-us x-copy(copy/uccl) #wrong"
    awk '/^# +count/ { for (i = 2; i <= NF; i++) col[$i] = i - 1 } # the header names the columns
        $1 ~ /^[0-9]+$/ && NF > 10 { u = $col["uccl(us)"]; c = $col["copy(us)"]
            printf "%s %s %s %s %.3f %s\n", $2, u, $col["plan(us)"], c, c / u, $NF }' "$OUT/logs/$tag.txt"
}
p2p() { # tag window [VAR=VAL...]: one uccl_perf p2p --op send job, its rows
    local tag=$1 w=$2 max=$PMAX it=""
    shift 2
    late && { echo "(skipped $tag: past the deadline)"; return; }
    [ "$w" = 1 ] && it="--iters 200"
    step "$tag: send window $w, 4K-$max, 3 rounds, ${*:-defaults}"
    echo "size uccl-GB/s uccl-us copy-GB/s copy-us x-copy"
    env "$@" timeout 90 $MPIRUN $(xs_of "$@") $B/tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op send \
        --min 4K --max $max --window $w $it --rounds 3 --json "$OUT/logs/$tag.json" 2>&1 |
        tee "$OUT/logs/$tag.txt" | grep -E "^ +[0-9]|MISMATCH|failed" | awk '{print $1, $2, $3, $4, $5, $6}'
}
OLD=UCCL_GPU_IPC_PEER_DONE=0
for r in 1 2 3; do
    coll bcast-new-$r bcast $MN $MX
    coll bcast-old-$r bcast $MN $MX $OLD
done
for op in allgather alltoall; do
    coll $op-new $op 16M $MX
    coll $op-old $op 16M $MX $OLD
done
for r in 1 2; do
    p2p send-w1-new-$r 1
    p2p send-w1-old-$r 1 $OLD
    p2p send-w16-new-$r 16
    p2p send-w16-old-$r 16 $OLD
done
step done
(cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
