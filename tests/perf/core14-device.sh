#!/bin/bash
# One device call for the core's per-message path (session 14, core14;
# tests/perf/results/core14-H200host): main's tree (MAIN_ROOT) against this
# tree, each built once with CUDA, then alternating main / this tree in whole
# jobs: uccl_perf p2p send on GPU 0 (two processes, gpu_ipc, window 1 and 16;
# reference: the plain cudaMemcpyAsync of the same bytes in the same job),
# send over shm in host memory (window 16; reference: Open MPI in the same
# job), and tests/perf/b_core_msg (one process, CPU time per message over shm).
#   bash tests/perf/core14-device.sh MAIN_ROOT   (from this tree's root; logs in $OUT)
# Knobs: C14_ROUNDS (2), C14_BUILT_MAIN / C14_BUILT_NEW (build dirs: skip the
# builds), C14_GPU (0: no GPU jobs), C14_GPU_MIN/MAX (4K/1M), C14_W16 (0: no GPU window 16), C14_MPI_ARGS, C14_DEADLINE_S (start nothing after, 200).
set -u
OUT=${OUT:-/tmp/core14-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
MAIN=$(cd "${1:?usage: core14-device.sh MAIN_ROOT}" && pwd)
NEW=$PWD
START=$SECONDS
step() { echo "=== $* ($(date +%T), +$((SECONDS - START)) s)"; }
late() { [ $((SECONDS - START)) -ge "${C14_DEADLINE_S:-200}" ]; }
[ "${C14_GPU:-1}" = 1 ] && nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader
lscpu | grep -E "^(Model name|CPU\(s\))"
build() { # ROOT DIR
    (cd "$1" && ./autogen.sh >/dev/null 2>&1 && mkdir -p "$2" && cd "$2" &&
        ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
        make -j8 libuccl.la tools/uccl_perf >make.log 2>&1) ||
        { echo "build of $1 failed"; grep -E "error|Error" "$1/$2"/*.log | head -30; exit 1; }
}
BM=${C14_BUILT_MAIN:-} BN=${C14_BUILT_NEW:-}
if [ -z "$BM" ]; then
    step build
    build "$MAIN" build-c14main & pm=$!
    build "$NEW" build-c14 & pn=$!
    wait $pm && wait $pn || exit 1
    BM=$MAIN/build-c14main BN=$NEW/build-c14
fi
BM=$(cd "$BM" && pwd) BN=$(cd "$BN" && pwd)
for s in main:$BM new:$BN; do
    cc -O2 -I"$NEW/include" -I"${s#*:}" "$NEW/tests/perf/b_core_msg.c" -L"${s#*:}/.libs" -luccl \
        -lpthread -Wl,-rpath,"${s#*:}/.libs" -o "$OUT/b_core_msg-${s%%:*}" || exit 1
done
MPIRUN="mpirun --allow-run-as-root ${C14_MPI_ARGS:---bind-to core} --map-by core -np 2 --mca btl self,vader,tcp -x NCCL_NVLS_ENABLE -x CUDA_VISIBLE_DEVICES"
gpu_send() { # SIDE BUILD WINDOW ROUND
    local it=""
    [ "$3" = 1 ] && it="--iters 300"
    late && { echo "(skipped $1 gpu w$3: past the deadline)"; return; }
    echo "# gpu send window $3 ($1, round $4): size uccl-GB/s uccl-us copy-GB/s copy-us x-copy c+ack-us x-c+ack"
    timeout 60 $MPIRUN "$2/tools/uccl_perf" p2p --mem cuda --transport gpu_ipc --op send \
        --min ${C14_GPU_MIN:-4K} --max ${C14_GPU_MAX:-1M} --window "$3" $it --rounds 3 --json "$OUT/perf_gpu_w$3_$1$4.json" 2>&1 |
        grep -E "^ +[0-9]|MISMATCH|failed" | awk '{print $1, $2, $3, $4, $5, $6, $10, $11}'
}
host_send() { # SIDE BUILD ROUND
    late && { echo "(skipped $1 host: past the deadline)"; return; }
    echo "# shm send window 16 ($1, round $3): size uccl-GB/s uccl-us ref-GB/s ref-us ratio"
    timeout 60 $MPIRUN "$2/tools/uccl_perf" p2p --mem host --transport shm --op send \
        --min 8 --max 64K --window 16 --rounds 3 --json "$OUT/perf_shm_w16_$1$3.json" 2>&1 |
        grep -E "^ +[0-9]|MISMATCH|failed"
}
cpu_msg() { # SIDE ROUND
    for c in "8 1" "8 16" "4096 1" "4096 16" "65536 1" "65536 16"; do
        echo "$1 round $2: $(taskset -c 1 timeout 30 "$OUT/b_core_msg-$1" $c 200000 shm 2>&1 | tail -1)"
    done
}
for r in $(seq 1 "${C14_ROUNDS:-2}"); do
    for s in main:$BM new:$BN; do
        side=${s%%:*} b=${s#*:}
        step "round $r, $side"
        cpu_msg "$side" "$r"
        if [ "${C14_GPU:-1}" = 1 ]; then
            gpu_send "$side" "$b" 1 "$r"
            [ "${C14_W16:-1}" = 1 ] && gpu_send "$side" "$b" 16 "$r"
        fi
        host_send "$side" "$b" "$r"
    done
done
step done
rm -f "$OUT"/b_core_msg-*
tar czf "$OUT/json.tgz" -C "$OUT" $(cd "$OUT" && ls perf_*.json 2>/dev/null) && rm -f "$OUT"/perf_*.json
