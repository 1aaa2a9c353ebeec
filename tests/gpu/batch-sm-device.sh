#!/bin/bash
# One device call for issue 19's one-GPU point-to-point gaps (session 13,
# tests/gpu/results/1xH200-gpu13): two processes on GPU 0 through CUDA IPC,
# this tree built once with CUDA, then alternating sides of one setting:
#   off = UCCL_GPU_IPC_BATCH_SM=0 (the default: main's copy path),
#   on  = BATCH_SM=2 at window 16 (a window's batch as one kernel launch),
#         BATCH_SM=1 at window 1 (a single copy by kernel too).
# Every uccl_perf job has the plain cudaMemcpyAsync of the same bytes in the
# same job, and for send the copy+ack column (the copy plus the one host-flag
# notification and ack the send loop has). Also: t_gpu_ipc with BATCH_SM=1
# (every same-GPU case by kernel, bytes verified) and the micro profile.
#   bash tests/gpu/batch-sm-device.sh   (from the tree's root; logs in $OUT)
# Knobs: BSM_ROUNDS (alternations, 2), BSM_PROF_SIZES ("": no profile), BSM_DEADLINE_S (start nothing after, 250);
# rehearsal: BSM_BUILT=build/fakegpu BSM_MPI_ARGS=--oversubscribe UCCL_FAKE_GPU_COUNT=1.
set -u
OUT=${OUT:-/tmp/bsm-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
START=$SECONDS
step() { echo "=== $* ($(date +%T), +$((SECONDS - START)) s)"; }
late() { [ $((SECONDS - START)) -ge "${BSM_DEADLINE_S:-250}" ]; }
nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader
lscpu | grep -E "^(Model name|CPU\(s\))"
B=${BSM_BUILT:-build-dev} # BSM_BUILT: a build dir to use as it is (a rehearsal on the fake GPU)
[ -n "${BSM_BUILT:-}" ] || { step build; (./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev &&
    ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
    make -j16 libuccl.la tools/uccl_perf tests/gpu/t_gpu_ipc >make.log 2>&1) ||
    { echo "build failed"; grep -E "error|Error" build-dev/*.log | head -30; exit 1; }; }
MPIRUN="mpirun --allow-run-as-root ${BSM_MPI_ARGS:---bind-to core} --map-by core -np 2 --mca btl self,vader,tcp -x NCCL_NVLS_ENABLE -x CUDA_VISIBLE_DEVICES"
step "t_gpu_ipc, UCCL_GPU_IPC_BATCH_SM=${BSM_TGPU:-1} (same GPU)"
UCCL_GPU_IPC_BATCH_SM=${BSM_TGPU:-1} UCCL_GPU_IPC_PROF=1 timeout 90 $MPIRUN -x UCCL_GPU_IPC_BATCH_SM -x UCCL_GPU_IPC_PROF \
    $B/tests/gpu/t_gpu_ipc >"$OUT/t_gpu_ipc-batch-sm.log" 2>&1
echo "t_gpu_ipc exit $? ($(grep -c PASS "$OUT/t_gpu_ipc-batch-sm.log") PASS, $(grep -c FAIL "$OUT/t_gpu_ipc-batch-sm.log") FAIL," \
    "$(grep -c 'sm batch' "$OUT/t_gpu_ipc-batch-sm.log") profiles with kernel batches)"
tail -3 "$OUT/t_gpu_ipc-batch-sm.log"
perf() { # tag op window min max rounds [VAR=VAL...]
    local tag=$1 op=$2 w=$3 min=$4 max=$5 rounds=$6 xs="" it=""
    shift 6
    for kv in "$@"; do xs="$xs -x $kv"; done
    [ "$w" = 1 ] && it="--iters 300"
    late && { echo "(skipped $tag $op w$w: past the deadline)"; return; }
    env "$@" timeout 60 $MPIRUN $xs $B/tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op \
        --min $min --max $max --window $w $it --rounds $rounds --json "$OUT/perf_${op}_w${w}_${tag}.json" 2>&1
}
step "micro profile, 4 MiB and 4 KiB window 16, off / on"
for s in ${BSM_PROF_SIZES-4M 4K}; do
    for side in off on; do
        v=0; [ $side = on ] && v=2
        echo "# profile write w16 $s $side"
        perf prof$side$s write 16 $s $s 1 UCCL_GPU_IPC_PROF=1 UCCL_GPU_IPC_BATCH_SM=$v |
            grep -E "^ +[0-9]|gpu_ipc prof" | sed 's/^ *//'
    done
done >"$OUT/profile.txt" 2>&1
cat "$OUT/profile.txt"
# BSM_SIDES: the alternated sides, NAME:VAR=VAL,... each (window 16; window 1
# takes BATCH_SM=1 on every side but off); BSM_W16="MIN MAX", BSM_OPS, BSM_W1=0
SIDES=${BSM_SIDES:-off:UCCL_GPU_IPC_BATCH_SM=0 on:UCCL_GPU_IPC_BATCH_SM=2}
for r in $(seq 1 "${BSM_ROUNDS:-2}"); do
    for sd in $SIDES; do
        side=${sd%%:*} kvs=${sd#*:}
        env16=${kvs//,/ } env1=UCCL_GPU_IPC_BATCH_SM=1
        [ $side = off ] && env1=UCCL_GPU_IPC_BATCH_SM=0
        step "round $r, $side ($env16)"
        for op in ${BSM_OPS:-write read send}; do
            echo "# $op window 16 ($side, round $r): size uccl-GB/s uccl-us copy-GB/s copy-us x-copy [c+ack-us x-c+ack]"
            perf "${side}$r" $op 16 ${BSM_W16:-4K 16M} 3 $env16 | grep -E "^ +[0-9]|MISMATCH|failed" |
                awk '{print $1, $2, $3, $4, $5, $6, $10, $11}'
        done
        [ "${BSM_W1:-1}" = 0 ] && continue
        for op in write send; do
            echo "# $op window 1 ($side, round $r): size uccl-GB/s uccl-us copy-GB/s copy-us x-copy [c+ack-us x-c+ack]"
            perf "${side}$r" $op 1 4K 1M 3 $env1 | grep -E "^ +[0-9]|MISMATCH|failed" |
                awk '{print $1, $2, $3, $4, $5, $6, $10, $11}'
        done
    done
done
step done
tar czf "$OUT/json.tgz" -C "$OUT" $(cd "$OUT" && ls perf_*.json 2>/dev/null) && rm -f "$OUT"/perf_*.json
