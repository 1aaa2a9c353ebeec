#!/bin/bash
# Session 21's third one-GPU call: the merged tree (revstream's stream fixes: a comm's direct
# stream calls now run in call order, each waiting for the comm's previous one; a flush while a
# call is queued refused; revshm, revtopo) on a real GPU: t_coll_gpu on GPU memory (2 ranks),
# its stream cases with wrapping sequence numbers (3 ranks), t_gpu_stream_kill (default, the
# survivors meeting, the word at every size), t_gpu_ipc and t_gpu_staging (shm, tcp: revtcp's
# staging fix); then the cost of the call-order wait: uccl_perf
# coll --mem cuda --stream (direct path) on this tree against the tree before revstream
# (.dev/s21base = 9660166), alternating, two pairs. From the tree's root (carry .debs,
# .dev/s21base):  bash tests/gpu/results/1xH200-s21/run3.sh   (logs in $OUT)
set -u
OUT=${OUT:-/tmp/s21-out3}
mkdir -p "$OUT/logs"
exec > >(tee -a "$OUT/device.txt") 2>&1
export NCCL_NVLS_ENABLE=0 CUDA_VISIBLE_DEVICES=0
START=$SECONDS
step() { echo "=== $* ($(date -u +%T), +$((SECONDS - START)) s)"; }
nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader
build() { # dir: the library, uccl_perf and the GPU tests with CUDA in dir/build-dev
    (cd "$1" && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-dev && cd build-dev &&
        ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
        make -j8 libuccl.la tools/uccl_perf tests/mpi/t_coll_gpu tests/gpu/t_gpu_stream_kill tests/gpu/t_gpu_ipc tests/gpu/t_gpu_staging >make.log 2>&1) ||
        { echo "build of $1 failed"; grep -E "error|Error" "$1"/build-dev/*.log | head -20; return 1; }
}
if [ -z "${S21_B:-}" ]; then # rehearsal: S21_B=S21_A=build/fakegpu S21_MPI_ARGS=--oversubscribe UCCL_FAKE_GPU_COUNT=1
    step "build this tree and .dev/s21base"
    build . & p1=$!
    build .dev/s21base & p2=$!
    wait $p1 || exit 1
    wait $p2 || exit 1
fi
B=${S21_B:-build-dev} A=${S21_A:-.dev/s21base/build-dev}
M="mpirun --allow-run-as-root ${S21_MPI_ARGS:---bind-to core} --map-by core --mca btl self,vader,tcp -x NCCL_NVLS_ENABLE -x CUDA_VISIBLE_DEVICES -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000"
[ -n "${UCCL_FAKE_GPU_COUNT:-}" ] && M="$M -x UCCL_FAKE_GPU_COUNT"
for t in "t_gpu_ipc" "t_gpu_staging shm" "t_gpu_staging tcp"; do
    step "$t"
    timeout 120 $M -np 2 $B/tests/gpu/$t >"$OUT/logs/${t// /_}.log" 2>&1
    echo "exit $? ($(grep -c PASS "$OUT/logs/${t// /_}.log") PASS, $(grep -c '^ok' "$OUT/logs/${t// /_}.log") ok, $(grep -c FAIL "$OUT/logs/${t// /_}.log") FAIL)"
done
step "t_coll_gpu, GPU memory, 2 ranks"
timeout 150 $M -np 2 -x T_COLL_MEM=gpu $B/tests/mpi/t_coll_gpu >"$OUT/logs/t_coll_gpu.log" 2>&1
echo "exit $? ($(grep -c '^ok' "$OUT/logs/t_coll_gpu.log") ok, $(grep -c '^FAIL' "$OUT/logs/t_coll_gpu.log") FAIL)"
grep -E "^FAIL|SKIP" "$OUT/logs/t_coll_gpu.log" | sort | uniq -c | head
step "t_coll_gpu stream cases, 3 ranks, sequence numbers wrapping"
timeout 120 $M -np 3 --oversubscribe -x UCCL_COLL_STREAM_SEQ0=4294967270 -x T_COLL_STREAM_ONLY=1 -x T_COLL_MEM=gpu \
    $B/tests/mpi/t_coll_gpu >"$OUT/logs/t_coll_gpu_stream3.log" 2>&1
echo "exit $? ($(grep -c '^ok' "$OUT/logs/t_coll_gpu_stream3.log") ok, $(grep -c '^FAIL' "$OUT/logs/t_coll_gpu_stream3.log") FAIL)"
grep -E "^FAIL|SKIP" "$OUT/logs/t_coll_gpu_stream3.log" | sort | uniq -c | head
for v in "" "T_STREAM_KILL_MEET=1" "UCCL_GPU_IPC_PEER_DONE_MIN=0"; do
    step "t_gpu_stream_kill ${v:-default}"
    env $v UCCL_TIMEOUT_MS=3000 timeout 150 $B/tests/gpu/t_gpu_stream_kill >"$OUT/logs/kill_${v%%=*}.log" 2>&1
    echo "exit $?"; grep -E "PASS|FAIL" "$OUT/logs/kill_${v%%=*}.log" | head -3
done
for r in 1 2; do
    for t in new base; do
        [ $t = new ] && d=$B || d=$A
        for op in allgather alltoall; do
            step "round $r, $t tree: uccl_perf coll --stream --op $op 4K-16M"
            timeout 90 $M -np 2 $d/tools/uccl_perf coll --mem cuda --stream --op $op --min 4K --max 16M --rounds 3 \
                --json "$OUT/logs/stream_${op}_${t}_$r.json" >"$OUT/logs/stream_${op}_${t}_$r.txt" 2>&1
            echo "exit $?; size uccl-us copy-us #wrong"
            awk '/^# +count/ { for (i = 2; i <= NF; i++) col[$i] = i - 1 }
                $1 ~ /^[0-9]+$/ && NF > 10 { print $2, $col["uccl(us)"], $col["copy(us)"], $NF }' \
                "$OUT/logs/stream_${op}_${t}_$r.txt"
        done
    done
done
step done
(cd "$OUT" && tar czf logs.tgz logs && rm -rf logs)
