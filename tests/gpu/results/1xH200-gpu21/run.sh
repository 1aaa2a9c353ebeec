#!/bin/bash
# gpu21's one device call (issue 19, bcast on one GPU, two processes):
# this tree built with CUDA, the suites with the candidate, then
# uccl_perf coll --mem cuda --op bcast at 4-64 MiB (each job with its own
# same-run D2D copy ceiling), main's defaults against the candidates in
# alternation, allgather/alltoall at 16-64 MiB as a control, and a
# trace + micro profile of 16 MiB calls. From the tree's root:
#   bash tests/gpu/results/1xH200-gpu21/run.sh     (logs in $OUT)
# The candidate UCCL_GPU_IPC_SM_SINGLE_MIN is commit d69c101 of branch gpu21 (reverted: no gain).
# Rehearsal: B21_BUILT=build/fakegpu B21_MPI_ARGS=--oversubscribe UCCL_FAKE_GPU_COUNT=1
# B21_MIN=64K B21_MAX=128K B21_CMIN=64K B21_ITERS=5 B21_PROF=128K.
set -u
OUT=${OUT:-/tmp/b21-out}
mkdir -p "$OUT/logs"
exec > >(tee -a "$OUT/device.txt") 2>&1
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
START=$SECONDS
step() { echo "=== $* ($(date -u +%T), +$((SECONDS - START)) s)"; }
late() { [ $((SECONDS - START)) -ge "${B21_DEADLINE_S:-135}" ]; }
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader
lscpu | grep -E "^(Model name|CPU\(s\))"
B=${B21_BUILT:-build-dev}
[ -n "${B21_BUILT:-}" ] || { step build; (./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev &&
    ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
    make -j16 libuccl.la tools/uccl_perf tests/gpu/t_gpu_ipc tests/mpi/t_coll_gpu >make.log 2>&1) ||
    { echo "build failed"; grep -E "error|Error" build-dev/*.log | head -30; exit 1; }; }
MPIRUN="mpirun --allow-run-as-root ${B21_MPI_ARGS:---bind-to core} --map-by core -np 2 --mca btl self,vader,tcp -x NCCL_NVLS_ENABLE -x CUDA_VISIBLE_DEVICES"
[ -n "${UCCL_FAKE_GPU_COUNT:-}" ] && MPIRUN="$MPIRUN -x UCCL_FAKE_GPU_COUNT"
CAND="UCCL_GPU_IPC_SM_SINGLE_MIN=4M"
SUITE="UCCL_GPU_IPC_SM_SINGLE_MIN=4K" # the suites: every lone copy from 4 KiB by the kernel
SX=""; for kv in $SUITE; do SX="$SX -x ${kv%%=*}"; done
step "t_gpu_ipc ($SUITE)"
env $SUITE timeout 60 $MPIRUN $SX $B/tests/gpu/t_gpu_ipc >"$OUT/logs/t_gpu_ipc.log" 2>&1
echo "t_gpu_ipc exit $? ($(grep -c PASS "$OUT/logs/t_gpu_ipc.log") PASS, $(grep -c FAIL "$OUT/logs/t_gpu_ipc.log") FAIL)"
step "t_coll_gpu gpu ($SUITE)"
env $SUITE UCCL_TRANSPORTS=shm,gpu_ipc T_COLL_MEM=gpu UCCL_TIMEOUT_MS=30000 \
    timeout 60 $MPIRUN -x UCCL_TRANSPORTS -x T_COLL_MEM -x UCCL_TIMEOUT_MS $SX \
    $B/tests/mpi/t_coll_gpu >"$OUT/logs/t_coll_gpu.log" 2>&1
echo "t_coll_gpu gpu exit $? ($(grep -c '^ok' "$OUT/logs/t_coll_gpu.log") ok, $(grep -c 'FAIL' "$OUT/logs/t_coll_gpu.log") FAIL lines)"
MN=${B21_MIN:-4M} MX=${B21_MAX:-64M} CM=${B21_CMIN:-16M} IT=${B21_ITERS:-100} PS=${B21_PROF:-16M}
coll() { # tag op min max iters rounds [VAR=VAL...]: one uccl_perf coll job, its table's rows
    local tag=$1 op=$2 min=$3 max=$4 it=$5 rounds=$6 xs=""
    shift 6
    for kv in "$@"; do xs="$xs -x ${kv%%=*}"; done
    late && { echo "(skipped $tag: past the deadline)"; return; }
    step "$tag: $op $min-$max, $it calls x $rounds rounds, ${*:-defaults}"
    env "$@" timeout 40 $MPIRUN $xs $B/tools/uccl_perf coll --mem cuda --op $op --min $min --max $max \
        --iters $it --warmup 5 --rounds $rounds --ucx-ref off --json "$OUT/logs/$tag.json" >"$OUT/logs/$tag.txt" 2>&1
    echo "exit $?; size algo uccl-us plan-us copy-us x-copy(copy/uccl) #wrong"
    awk '/^# +count/ { for (i = 2; i <= NF; i++) col[$i] = i - 1 } # the header names the columns (fake and real GPU differ)
        $1 ~ /^[0-9]+$/ && NF > 10 { u = $col["uccl(us)"]; c = $col["copy(us)"]
            printf "%s %s %s %s %s %.3f %s\n", $2, $3, u, $col["plan(us)"], c, c / u, $NF }' "$OUT/logs/$tag.txt"
}
coll bcast-main-1 bcast $MN $MX $IT 5
coll bcast-single4M-1 bcast $MN $MX $IT 5 $CAND
coll bcast-single4M-smmax128M bcast $MN $MX $IT 5 $CAND UCCL_GPU_IPC_BATCH_SM_MAX=128M
coll bcast-direct bcast $MN $MX $IT 5 UCCL_COLL_ALGO=direct
coll bcast-scatter_allgather bcast $MN $MX $IT 5 UCCL_COLL_ALGO=scatter_allgather
coll bcast-peerdone bcast $MN $MX $IT 5 UCCL_GPU_IPC_PEER_DONE=1
coll bcast-main-2 bcast $MN $MX $IT 5
coll bcast-single4M-2 bcast $MN $MX $IT 5 $CAND
coll allgather-main allgather $CM $MX $IT 5
coll allgather-single4M allgather $CM $MX $IT 5 $CAND
coll alltoall-main alltoall $CM $MX $IT 5
coll alltoall-single4M alltoall $CM $MX $IT 5 $CAND
for side in main single4M; do # where a 16 MiB call's time goes (host side)
    [ $side = main ] && e="" || e=$CAND
    coll prof-$side bcast $PS $PS $((IT * 4)) 1 UCCL_COLL_TRACE=1 UCCL_GPU_IPC_PROF=1 $e
    grep -E "coll trace|gpu_ipc prof" "$OUT/logs/prof-$side.txt" | head -60
done
coll bcast-main-3 bcast $MN $MX $IT 5
coll bcast-single4M-3 bcast $MN $MX $IT 5 $CAND
step done
(cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
