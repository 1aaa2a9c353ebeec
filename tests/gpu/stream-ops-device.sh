#!/bin/bash
# The stream form's per-call stream operations (coll/stream.c: batched
# memops, a host word instead of an event; UCCL_COLL_STREAM_OPS) on the
# device machine, run from the source root: a lean build of this tree and,
# with BASE=<absolute path of another tree, e.g. the machine's copy of
# main>, of that tree too (the code before, same machine, same call); then
# t_gpu_copy (uccl_stream_ops order and refusals, stream words), b_copy_cost
# (the CPU per call: one driver call each + event vs batched), t_coll_gpu's
# stream cases (sequence numbers wrapping past 2^32, a rank gone; each
# UCCL_COLL_STREAM_OPS mode, and the hold path) and uccl_perf coll --mem
# cuda --stream per op and run: base, batch, all, single (RUNS), OPS
# (default bcast alltoall allgather), MIN/MAX (default 4K / 1M), one process
# per GPU where 2 GPUs exist, else 2 on GPU 0. DEADLINE_S: no perf run
# starts after it (default 200). Logs and JSON to $OUT.
set -u
OUT=${OUT:-/tmp/uccl-gpu-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S=$(date +%s)
step() { echo "=== $* ($(date +%T), t=$(( $(date +%s) - S ))s)"; }
step "packages"
for d in ../.debs .debs ../../.debs; do [ -d "$d" ] && dpkg -i "$d"/*.deb >/dev/null && echo "installed $d"; done
nvidia-smi --query-gpu=index,name,memory.total --format=csv
lean() { # build the library and the programs named, in ./$1 of the tree at $2
    (cd "$2" && ./autogen.sh >/dev/null 2>&1 && mkdir -p "$1" && cd "$1" &&
     ../configure --with-cuda --enable-werror >configure.log 2>&1 &&
     make -j16 libuccl.la libuccl_internal.la tools/uccl_perf >make.log 2>&1 &&
     make -j16 ${3:-} >>make.log 2>&1) || { echo "build in $2/$1 failed"; grep -E "error" "$2/$1/make.log" | head; return 1; }
}
step "build this tree"
lean build-dev . "tests/gpu/t_gpu_copy tests/gpu/b_copy_cost tests/mpi/t_coll_gpu" &
pids=$!
if [ -n "${BASE:-}" ]; then
    step "build the base tree $BASE"
    lean build-base "$BASE" &
    pids="$pids $!"
fi
wait $pids # by pid: a bare wait would also wait for the tee above, forever
step "built"
cd build-dev || exit 1
NCCL_DIR=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null)
[ -n "$NCCL_DIR" ] && export LD_LIBRARY_PATH="$NCCL_DIR/lib:${LD_LIBRARY_PATH:-}"
ngpu=$(nvidia-smi -L | grep -c ^GPU)
echo "GPUs: $ngpu"
M="mpirun --allow-run-as-root --bind-to none --map-by slot -np 2 --mca btl self,vader,tcp -x LD_LIBRARY_PATH
   -x NCCL_NVLS_ENABLE -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000"

step "t_gpu_copy"
timeout 60 tests/gpu/t_gpu_copy >"$OUT/t_gpu_copy.log" 2>&1
echo "t_gpu_copy exit code $?"; grep -vE "^\[" "$OUT/t_gpu_copy.log" | tail -5
step "b_copy_cost (the CPU per copy, per stream call)"
timeout 60 tests/gpu/b_copy_cost >"$OUT/b_copy_cost.txt" 2>&1; echo "b_copy_cost exit code: $?"
cat "$OUT/b_copy_cost.txt"

for v in "UCCL_COLL_STREAM_OPS=batch" "UCCL_COLL_STREAM_OPS=all" "UCCL_COLL_STREAM_OPS=single" "UCCL_COLL_STREAM=hold"; do
    step "t_coll_gpu stream cases, $v, sequence from 4294967270"
    log="$OUT/t_coll_gpu_stream_${v#*=}.log"
    timeout 60 env "$v" UCCL_COLL_STREAM_SEQ0=4294967270 $M -x "${v%%=*}" -x UCCL_COLL_STREAM_SEQ0 -x T_COLL_MEM=gpu \
        -x T_COLL_STREAM_ONLY=1 tests/mpi/t_coll_gpu >"$log" 2>&1
    echo "exit code $? ($(grep -c '^ok' "$log") ok, $(grep -c '^FAIL' "$log") FAIL)"
    grep -E "^FAIL|SKIP|^# stream plan" "$log" | sort | uniq -c | head -8
done

for op in ${OPS-bcast alltoall allgather}; do
    for run in ${RUNS:-base batch all single}; do
        [ $(( $(date +%s) - S )) -gt "${DEADLINE_S:-200}" ] && { echo "deadline: no more perf"; break 2; }
        perf=tools/uccl_perf mode=$run
        [ "$run" = base ] && { [ -n "${BASE:-}" ] || continue; perf=$BASE/build-base/tools/uccl_perf mode=; }
        step "uccl_perf coll --stream --op $op, run $run ($perf)"
        timeout 60 env ${mode:+UCCL_COLL_STREAM_OPS=$mode} $M ${mode:+-x UCCL_COLL_STREAM_OPS} $perf coll --mem cuda \
            --stream --op "$op" --min "${MIN:-4K}" --max "${MAX:-1M}" --rounds 3 \
            --json "$OUT/stream_${op}_$run.json" 2>&1 | grep -v "^\[" | tee "$OUT/stream_${op}_$run.txt"
    done
done
step "done"
