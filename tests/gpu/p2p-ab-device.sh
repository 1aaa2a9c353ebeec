#!/bin/bash
# A/B of gpu_ipc point-to-point between two source trees on one GPU (two
# processes through CUDA IPC), for issue 19's "GPU point-to-point gaps":
#   bash tests/gpu/p2p-ab-device.sh TREE_A TREE_B   (from the repository root)
# Builds both with CUDA (in parallel), then on B: b_copy_cost, t_gpu_ipc, and
# the micro profile (UCCL_GPU_IPC_PROF=1: host ns per step of the transport)
# at AB_PROF_SIZES; then uccl_perf p2p --mem cuda --transport gpu_ipc, write /
# read / send, window 16 (4 KiB .. AB_MAX) and window 1 (4 KiB .. 1 MiB), in
# AB_ROUNDS alternating rounds A B [C] [D] A B ... Each run has the plain
# cudaMemcpyAsync of the same bytes in the same job (x-copy = uccl / copy).
# Logs and JSON under $OUT. Results: tests/gpu/results/1xH200-gpu10/.
# Knobs (defaults keep the one-GPU run above): AB_OPS (ops, "write read
# send"), AB_PLACES (CUDA_VISIBLE_DEVICES of each placement, "0": two
# processes on GPU 0; "0,1": rank 0 on GPU 0, rank 1 on GPU 1), AB_W16_MAX
# (largest window-16 size, AB_MAX or 32M), AB_COPY_COST=0 (skip b_copy_cost),
# AB_DEADLINE_S (start no run after this many seconds), AB_TGPU_PLACES
# (t_gpu_ipc's placements, AB_PLACES; empty: none), AB_PROF_TREES and
# AB_PROF_ENV (below); AB_ROUNDS=0 runs the profile alone. Results with them:
# tests/gpu/results/4xH100-gpu11/.
set -u
A=$1 B=$2
OUT=${OUT:-/tmp/ab-out}
ROUNDS=${AB_ROUNDS:-2}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
export NCCL_NVLS_ENABLE=0
step() { echo "=== $* ($(date +%T))"; }
START=$SECONDS
late() { [ -n "${AB_DEADLINE_S:-}" ] && [ $((SECONDS - START)) -ge "$AB_DEADLINE_S" ]; }
OPS=${AB_OPS:-write read send}
step packages
for d in .debs ../.debs; do [ -d "$d" ] && dpkg -i "$d"/*.deb >/dev/null && echo "installed $d"; done
nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total --format=csv
lscpu | grep -E "^(Model name|Thread|CPU\(s\))"
build() {
    (cd "$1" && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev &&
        ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
        make -j8 libuccl.la tools/uccl_perf tests/gpu/t_gpu_ipc tests/gpu/b_copy_cost >make.log 2>&1) ||
        { echo "build of $1 failed"; grep -E "error|Error" "$1"/build-dev/*.log | head -30; return 1; }
}
step "build $A and $B"
build "$A" & pa=$!
build "$B" & pb=$!
wait $pa || exit 1
wait $pb || exit 1
MPIRUN="mpirun --allow-run-as-root --bind-to core --map-by core -np 2 --mca btl self,vader,tcp -x NCCL_NVLS_ENABLE"
if [ "${AB_COPY_COST:-1}" != 0 ]; then
    step "b_copy_cost ($B)"
    timeout 60 "$B"/build-dev/tests/gpu/b_copy_cost 2>&1 | tee "$OUT/b_copy_cost.txt"
fi
for place in ${AB_TGPU_PLACES-${AB_PLACES:-0}}; do
    step "t_gpu_ipc ($B, CUDA_VISIBLE_DEVICES=$place)"
    log="$OUT/t_gpu_ipc-gpus${place/,/}.log"
    CUDA_VISIBLE_DEVICES=$place timeout 150 $MPIRUN -x CUDA_VISIBLE_DEVICES "$B"/build-dev/tests/gpu/t_gpu_ipc >"$log" 2>&1
    echo "t_gpu_ipc exit code: $? ($(grep -c PASS "$log") PASS, $(grep -c FAIL "$log") FAIL)"
    tail -3 "$log"
done
perf() { # tree tag op window min max [extra mpirun args]
    local t=$1 tag=$2 op=$3 w=$4 min=$5 max=$6
    shift 6
    local it="${PERF_ITERS:+--iters $PERF_ITERS}"
    [ "$w" = 1 ] && it="--iters ${PERF_ITERS:-200}"
    local place_tag=${PLACE:-0}
    place_tag=${place_tag/,/}
    late && { echo "(skipped: past AB_DEADLINE_S)"; return; }
    CUDA_VISIBLE_DEVICES=${PLACE:-0} timeout 120 $MPIRUN -x CUDA_VISIBLE_DEVICES "$@" "$t"/build-dev/tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op \
        --min $min --max $max --window $w $it --rounds ${PERF_ROUNDS:-3} --json "$OUT/perf_${op}_w${w}_${tag}_gpus${place_tag}.json" 2>&1
}
# AB_PROF_TREES: the trees profiled ("B"; "A B" for both), AB_PROF_ENV: VAR=VAL,... for B's
step "micro profile (${AB_PROF_TREES:-B}, UCCL_GPU_IPC_PROF=1): host ns per step, per size, op and window"
for s in ${AB_PROF_SIZES:-4K 4M}; do
    for w in 16 1; do
        for op in $OPS; do
          for pt in ${AB_PROF_TREES:-B}; do
            t=$A xs=""
            pe=${AB_PROF_ENV:-}
            [ "$pt" = B ] && t=$B && for kv in ${pe//,/ }; do xs="$xs -x $kv"; done
            echo "# profile $op window $w size $s, tree $pt ($t $xs)"
            PERF_ROUNDS=1 PERF_ITERS=$((w == 1 ? 2000 : 500)) perf "$t" prof$pt $op $w $s $s -x UCCL_GPU_IPC_PROF=1 $xs |
                grep -E "^ +[0-9]|gpu_ipc prof" | sed 's/^ *//'
          done
        done
    done
done >"$OUT/profile.txt" 2>&1
cat "$OUT/profile.txt"
# C, D (optional): tree B again with the settings of AB_C_ENV, AB_D_ENV (VAR=VAL,...)
sides="A B"
[ -n "${AB_C_ENV:-}" ] && sides="$sides C"
[ -n "${AB_D_ENV:-}" ] && sides="$sides D"
for r in $(seq 1 "$ROUNDS"); do
for PLACE in ${AB_PLACES:-0}; do
    for side in $sides; do
        t=$A xs=""
        [ $side != A ] && t=$B
        [ $side = C ] && for kv in ${AB_C_ENV//,/ }; do xs="$xs -x $kv"; done
        [ $side = D ] && for kv in ${AB_D_ENV//,/ }; do xs="$xs -x $kv"; done
        step "round $r, $side ($t $xs), CUDA_VISIBLE_DEVICES=$PLACE"
        for op in $OPS; do
            echo "# $op window 16 ($side round $r, GPUs $PLACE): size uccl-GB/s uccl-us copy-GB/s copy-us x-copy"
            perf "$t" "${side}$r" $op 16 4K ${AB_W16_MAX:-${AB_MAX:-32M}} $xs | grep -E "^ +[0-9]|MISMATCH|failed" |
                awk '{print $1, $2, $3, $4, $5, $6}'
        done
        for op in $OPS; do
            echo "# $op window 1 ($side round $r, GPUs $PLACE): size uccl-GB/s uccl-us copy-GB/s copy-us x-copy"
            perf "$t" "${side}$r" $op 1 4K 1M $xs | grep -E "^ +[0-9]|MISMATCH|failed" |
                awk '{print $1, $2, $3, $4, $5, $6}'
        done
    done
done
done
step done
