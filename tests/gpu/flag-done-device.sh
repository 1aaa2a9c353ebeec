#!/bin/bash
# One device call for issue 19's window-1 gap on one GPU (session 14,
# tests/gpu/results/1xH200-gpu14): two processes on GPU 0 through CUDA IPC,
# this tree built once with CUDA, then alternating sides of one setting:
#   main = UCCL_GPU_IPC_FLAG_DONE=0 (fences polled with cudaStreamQuery),
#   flag = FLAG_DONE=1 (a stream write of the fence's number into a mapped
#          host word, read by progress: src/tp/gpu_ipc/flag.c).
# Every uccl_perf job has the plain cudaMemcpyAsync of the same bytes in the
# same job (and for send the copy+ack column). Also t_gpu_ipc with the flag
# (bytes verified on the GPU) and the micro profile (UCCL_GPU_IPC_PROF=1) of
# window 1 at FD_PROF_SIZES on both sides; t_coll_gpu over shm,gpu_ipc (FD_SUITES=0: not).
#   bash tests/gpu/flag-done-device.sh   (from the tree's root; logs in $OUT)
# Knobs: FD_ROUNDS (alternations, 2), FD_SIDES (NAME:VAR=VAL,... each),
# FD_PROF_VAR (the profile's 0 / 1 setting, UCCL_GPU_IPC_FLAG_DONE), FD_PROF_OPS ("write send"),
# FD_W1 / FD_W16 ("MIN MAX"; "" skips), FD_OPS, FD_DEADLINE_S (start nothing after, 300),
# FD_ALT=1 (even rounds run the sides in reverse order), FD_SUITE_ENV (VAR=VAL ... for t_gpu_ipc
# and t_coll_gpu);
# rehearsal: FD_BUILT=build/fakegpu FD_MPI_ARGS=--oversubscribe UCCL_FAKE_GPU_COUNT=1.
set -u
OUT=${OUT:-/tmp/fd-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
START=$SECONDS
step() { echo "=== $* ($(date +%T), +$((SECONDS - START)) s)"; }
late() { [ $((SECONDS - START)) -ge "${FD_DEADLINE_S:-300}" ]; }
nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader
lscpu | grep -E "^(Model name|CPU\(s\))"
B=${FD_BUILT:-build-dev}
[ -n "${FD_BUILT:-}" ] || { step build; (./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev &&
    ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
    make -j16 libuccl.la tools/uccl_perf tests/gpu/t_gpu_ipc tests/mpi/t_coll_gpu >make.log 2>&1) ||
    { echo "build failed"; grep -E "error|Error" build-dev/*.log | head -30; exit 1; }; }
MPIRUN="mpirun --allow-run-as-root ${FD_MPI_ARGS:---bind-to core} --map-by core -np 2 --mca btl self,vader,tcp -x NCCL_NVLS_ENABLE -x CUDA_VISIBLE_DEVICES"
SE=${FD_SUITE_ENV:-} SX=""
for kv in $SE; do SX="$SX -x $kv"; done
step "t_gpu_ipc, UCCL_GPU_IPC_FLAG_DONE=1 $SE"
env $SE UCCL_GPU_IPC_FLAG_DONE=1 UCCL_GPU_IPC_PROF=1 timeout 90 $MPIRUN -x UCCL_GPU_IPC_FLAG_DONE -x UCCL_GPU_IPC_PROF $SX \
    $B/tests/gpu/t_gpu_ipc >"$OUT/t_gpu_ipc-flag.log" 2>&1
echo "t_gpu_ipc exit $? ($(grep -c PASS "$OUT/t_gpu_ipc-flag.log") PASS, $(grep -c FAIL "$OUT/t_gpu_ipc-flag.log") FAIL," \
    "$(grep -c 'flag write' "$OUT/t_gpu_ipc-flag.log") profiles with flag writes)"
tail -3 "$OUT/t_gpu_ipc-flag.log"
if [ "${FD_SUITES:-1}" = 1 ]; then # the collectives on GPU memory over gpu_ipc, the stream form too (library defaults)
    for v in gpu stream; do
        step "t_coll_gpu ($v) $SE"
        only=""; [ $v = stream ] && only="-x T_COLL_STREAM_ONLY=1"
        env $SE UCCL_TRANSPORTS=shm,gpu_ipc T_COLL_MEM=gpu UCCL_TIMEOUT_MS=30000 \
            timeout 120 $MPIRUN -x UCCL_TRANSPORTS -x T_COLL_MEM -x UCCL_TIMEOUT_MS $only $SX \
            $B/tests/mpi/t_coll_gpu >"$OUT/t_coll_gpu-$v.log" 2>&1
        echo "t_coll_gpu $v exit $? ($(grep -c '^ok' "$OUT/t_coll_gpu-$v.log") ok, $(grep -c 'FAIL' "$OUT/t_coll_gpu-$v.log") FAIL lines)"
    done
fi
perf() { # tag op window min max rounds [VAR=VAL...]
    local tag=$1 op=$2 w=$3 min=$4 max=$5 rounds=$6 xs="" it=""
    shift 6
    for kv in "$@"; do xs="$xs -x $kv"; done
    [ "$w" = 1 ] && it="--iters 300"
    late && { echo "(skipped $tag $op w$w: past the deadline)"; return; }
    env "$@" timeout 60 $MPIRUN $xs $B/tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op \
        --min $min --max $max --window $w $it --rounds $rounds --json "$OUT/perf_${op}_w${w}_${tag}.json" 2>&1
}
PV=${FD_PROF_VAR:-UCCL_GPU_IPC_FLAG_DONE}
step "micro profile, window 1 (${FD_PROF_SIZES-4K 64K 1M 8M}), $PV=0 / 1"
for s in ${FD_PROF_SIZES-4K 64K 1M 8M}; do
    for op in ${FD_PROF_OPS:-write send}; do
        for v in 0 1; do
            echo "# profile $op w1 $s $PV=$v"
            perf prof$v$s $op 1 $s $s 1 UCCL_GPU_IPC_PROF=1 $PV=$v |
                grep -E "^ +[0-9]|gpu_ipc prof" | sed 's/^ *//'
        done
    done
done >"$OUT/profile.txt" 2>&1
cat "$OUT/profile.txt"
SIDES=${FD_SIDES:-main:UCCL_GPU_IPC_FLAG_DONE=0 flag:UCCL_GPU_IPC_FLAG_DONE=1}
W1=${FD_W1-4K 8M} W16=${FD_W16-4K 16M}
for r in $(seq 1 "${FD_ROUNDS:-2}"); do
    order=$SIDES
    [ "${FD_ALT:-0}" = 1 ] && [ $((r % 2)) = 0 ] && order=$(echo $SIDES | tr ' ' '\n' | tac | tr '\n' ' ')
    for sd in $order; do
        side=${sd%%:*} kvs=${sd#*:}
        env=${kvs//,/ }
        step "round $r, $side ($env)"
        for op in ${FD_OPS:-write read send}; do
            for w in 1 16; do
                range=$W1; [ $w = 16 ] && range=$W16
                [ -n "$range" ] || continue
                echo "# $op window $w ($side, round $r): size uccl-GB/s uccl-us copy-GB/s copy-us x-copy [c+ack-us x-c+ack]"
                perf "${side}$r" $op $w $range 3 $env | grep -E "^ +[0-9]|MISMATCH|failed" |
                    awk '{print $1, $2, $3, $4, $5, $6, $10, $11}'
            done
        done
    done
done
step done
tar czf "$OUT/json.tgz" -C "$OUT" $(cd "$OUT" && ls perf_*.json 2>/dev/null) && rm -f "$OUT"/perf_*.json
