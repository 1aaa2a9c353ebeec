#!/bin/bash
# Everything the GPU work needs on the device machine, in one call:
# install the carried .debs, build with CUDA, run the GPU tests under
# mpirun -np 2, uccl_info, and uccl_perf --mem cuda (uccl vs plain copy vs
# NCCL, windowed and latency), the Python binding (tests/gpu/python-device.sh).
# Logs and JSON go to $OUT. ONLY=python: the build, then the Python part alone.
# Run from the source root: cd .gpu-src && bash tests/gpu/run-device.sh
# ONLY=coll: build, then only the collectives on GPU memory (issue E).
# ONLY=stream: build, then only the stream-ordered collectives
# (tests/gpu/stream-device.sh: t_coll_gpu, t_gpu_stream_kill (a rank
# SIGKILLed mid-call), the Python first-kernel case STREAM_PY_RUNS times,
# uccl_perf coll --stream direct vs hold).
# ONLY=hostcoll: CPU-only build, then only uccl_perf coll on host memory over
# shm (tests/perf/coll-perf.sh; COLL_PERF_* narrow it) with both Open MPI
# references, tables in $OUT/coll-perf.txt, JSON in $OUT.
# ONLY=devq: build, then only the device-queue step (b_devq: kernel-issued
# writes checked byte for byte, benchmark vs host-issued, peer killed).
# ONLY=p2p: build, then only the point-to-point GPU benchmark (issue E's
# gaps): b_copy_cost (the CPU's price per copy, each vs batched), t_gpu_ipc
# under each variant, and uccl_perf p2p --mem cuda for every op and variant
# in P2P_VARIANTS (space-separated; each is "-" for the defaults or
# VAR=VAL[,VAR=VAL...]), window 16 and window 1, with the same-run copy.
# ONLY=multi: build, then only the several-GPU job (multi_step below: one
# process a GPU; the full run does it too, at the end, where nvidia-smi
# lists two or more GPUs). Tables also in $OUT/coll-multi.txt and
# p2p-multi.txt, JSON and logs in $OUT/results-multi.tgz. MULTI_STEPS picks
# its parts (default "coll p2p tests devq pairs"; "probes": the ceiling's
# PERF_PEER_MODE variants and bcast's algorithms), MULTI_NPS the rank
# counts, MULTI_DEADLINE_S when no further step starts (default 520 s).
# MULTI_COPY: gpu_ipc's copy modes (UCCL_GPU_IPC_COPY: "ce sm", ...) that
# the coll and p2p steps each run in turn (default: the library's own; MULTI_COPY_NP<n> for np n only),
# "sm:N" also sets UCCL_GPU_IPC_SM_BLOCKS=N, "MODE,VAR=VAL,..." more settings; MULTI_P2P_COPY overrides it for
# the p2p step; MULTI_TEST_COPY the mode the tests step forces (MULTI_TEST_ENV: "VAR=VAL ..." more); MULTI_COLL_MIN the
# smallest collective size (default 4K), MULTI_COLL_MAX the largest
# received per rank (default 256M), MULTI_P2P_OPS the window-16 ops.
# Results on 4x H200: tests/gpu/results/4xH200/README.md.
set -u
ONLY=${ONLY:-}
OUT=${OUT:-/tmp/uccl-gpu-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo "=== $* ($(date +%T))"; }

if [ "$ONLY" = hostcoll ]; then
    # host-memory collectives vs Open MPI ob1 and UCX (issue E) on the quiet
    # cores, nothing else: a CPU-only build of the library and uccl_perf
    step "host collectives only: build without CUDA"
    for d in ../.debs .debs; do [ -d "$d" ] && dpkg -i "$d"/*.deb >/dev/null && echo "installed $d"; done
    lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"
    ./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
    mkdir -p build-host && cd build-host || exit 1
    ../configure --without-cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
    make -j16 libuccl.la tools/uccl_perf >make.log 2>&1 || { grep -E "error|Error" make.log | head -40; exit 1; }
    step "collectives vs Open MPI ob1 and UCX, host memory, shm (${COLL_PERF_OPS:-allgather alltoall bcast})"
    COLL_PERF_TPS=${COLL_PERF_TPS:-shm} COLL_PERF_OPS=${COLL_PERF_OPS:-allgather alltoall bcast} \
        bash ../tests/perf/coll-perf.sh . "$OUT" >"$OUT/coll-perf.txt" 2>&1
    echo "coll-perf exit code: $?"
    grep -vE "^#   " "$OUT/coll-perf.txt" | head -150
    step "done"
    exit 0
fi

step "packages"
for d in ../.debs .debs; do [ -d "$d" ] && dpkg -i "$d"/*.deb >/dev/null && echo "installed $d"; done
nvidia-smi --query-gpu=index,name,pci.bus_id,memory.total --format=csv
nvidia-smi topo -m

step "build"
./autogen.sh >/dev/null 2>&1 || { echo "autogen failed"; exit 1; }
mkdir -p build-dev && cd build-dev || exit 1
../configure --with-cuda --enable-werror >configure.log 2>&1 || { tail -30 configure.log; exit 1; }
tail -13 configure.log
make -j16 >make.log 2>&1 || { grep -E "error|Error" make.log | head -40; exit 1; }
if [ "$ONLY" != python ]; then # the test programs (ONLY=python needs the binding and uccl_perf)
    make -j16 check TESTS= >>make.log 2>&1 || { grep -E "error|Error" make.log | head -40; exit 1; }
fi

devq_step() {
    step "device queues: kernel-issued writes (b_devq, two processes on GPU 0)"
    if [ -x tests/gpu/b_devq ]; then
        timeout ${DEVQ_TIMEOUT:-400} tests/gpu/b_devq --json "$OUT/devq.json" >"$OUT/b_devq.log" 2>&1
        echo "b_devq exit code: $?"
        grep -v "^\[uccl" "$OUT/b_devq.log" | head -60
    else
        echo "tests/gpu/b_devq not built (configure found no nvcc)"
    fi
}
if [ "$ONLY" = devq ]; then
    devq_step
    step "done"
    exit 0
fi

NCCL_DIR=$(python3 -c "import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))" 2>/dev/null)
[ -n "$NCCL_DIR" ] && export LD_LIBRARY_PATH="$NCCL_DIR/lib:${LD_LIBRARY_PATH:-}"
echo "nccl: ${NCCL_DIR:-not found}"
MPIRUN="mpirun --allow-run-as-root --bind-to core --map-by core -np 2 --mca btl self,vader,tcp -x LD_LIBRARY_PATH
        -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS"
if [ "$ONLY" = stream ]; then # the stream-ordered collectives alone (tests/gpu/stream-device.sh)
    MPIRUN=$MPIRUN OUT=$OUT bash ../tests/gpu/stream-device.sh
    exit $?
fi

p2p_step() {
    local variants=${P2P_VARIANTS:--} ops=${P2P_OPS:-write read send} rounds=${P2P_ROUNDS:-5} idx=0
    lscpu | grep -E "^(Model name|Thread|Core|Socket|NUMA node\(s\))"
    step "b_copy_cost: the CPU's price per copy (a forked process owns the IPC destination)"
    timeout 60 tests/gpu/b_copy_cost >"$OUT/b_copy_cost.txt" 2>&1; echo "b_copy_cost exit code: $?"
    cat "$OUT/b_copy_cost.txt"
    for v in $variants; do
        local xs="" tag=default
        if [ "$v" != - ]; then
            tag=$(echo "$v" | sed 's/UCCL_GPU_IPC_//g; s/[=,]/_/g')
            for kv in ${v//,/ }; do xs="$xs -x $kv"; done
        fi
        idx=$((idx + 1))
        tag="$idx-$tag"
        step "variant $tag: t_gpu_ipc, then uccl_perf p2p --mem cuda (window 16: ${ops}; window 1: write send)"
        timeout 120 $MPIRUN $xs tests/gpu/t_gpu_ipc >"$OUT/t_gpu_ipc_$tag.log" 2>&1
        echo "t_gpu_ipc ($tag) exit code: $? ($(grep -c PASS "$OUT/t_gpu_ipc_$tag.log") PASS," \
            "$(grep -c FAIL "$OUT/t_gpu_ipc_$tag.log") FAIL)"
        for op in $ops; do
            echo "# $op window 16 ($tag): size uccl-GB/s uccl-us copy-GB/s copy-us x-copy"
            timeout 120 $MPIRUN $xs tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op --min 4K \
                --max ${P2P_MAX:-32M} --window 16 --rounds $rounds --json "$OUT/perf_${op}_w16_$tag.json" 2>&1 |
                grep -E "^ +[0-9]|MISMATCH|failed" | awk '{print $1, $2, $3, $4, $5, $6}'
        done
        for op in $([ "${P2P_W1:-1}" = 1 ] && echo write send); do
            echo "# $op window 1 ($tag): size uccl-GB/s uccl-us copy-GB/s copy-us x-copy"
            timeout 120 $MPIRUN $xs tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op --min 4K \
                --max 1M --window 1 --iters 200 --rounds $rounds --json "$OUT/perf_${op}_w1_$tag.json" 2>&1 |
                grep -E "^ +[0-9]|MISMATCH|failed" | awk '{print $1, $2, $3, $4, $5, $6}'
        done
    done
    for v in ${P2P_COLL_VARIANTS:-}; do
        local xs="" tag=default
        if [ "$v" != - ]; then
            tag=$(echo "$v" | sed 's/UCCL_GPU_IPC_//g; s/[=,]/_/g')
            for kv in ${v//,/ }; do xs="$xs -x $kv"; done
        fi
        step "variant $tag: uccl_perf coll --mem cuda --op bcast"
        timeout 150 $MPIRUN $xs tools/uccl_perf coll --mem cuda --op bcast --min 1M --max 64M --rounds 3 \
            --json "$OUT/coll_bcast_cuda_$tag.json" 2>&1 | grep -v "^\["
    done
}

# Several GPUs (issue W): one process a GPU (CUDA device = local rank), in
# one job: the GPU suites at np 2 (the two-process programs: GPU0 -> GPU1)
# and np 2/4/8 (t_coll_gpu), kernel-issued writes GPU 0 -> GPU 1, the
# collectives next to NCCL and the all-peers copy ceiling at every np, and
# point-to-point GPU 0 -> GPU 1 (then disjoint pairs at once) next to a
# plain peer cudaMemcpyAsync. Each step has its own timeout, and no step
# starts after MULTI_DEADLINE_S seconds of the script (the bundle must come
# back within the device call). MULTI_COLL_OPS / MULTI_NPS narrow it.
multi_step() {
    local ngpu nps np op max t kv
    local M="mpirun --allow-run-as-root --bind-to none --map-by slot --mca btl self,vader,tcp
        -x LD_LIBRARY_PATH -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS"
    left() { [ "$SECONDS" -lt "${MULTI_DEADLINE_S:-520}" ] || { echo "SKIPPED (time): $*"; return 1; }; }
    ngpu=$(nvidia-smi -L | grep -c "^GPU")
    nps=${MULTI_NPS:-$(for n in 2 4 8; do [ "$n" -le "$ngpu" ] && echo $n; done)}
    echo "multi: $ngpu GPUs, np: $(echo $nps)"
    nvidia-smi nvlink -s 2>/dev/null | head -12
    if [ "$ngpu" -lt 2 ]; then echo "SKIP: one GPU: no multi-GPU run"; return 0; fi
    has() { case " ${MULTI_STEPS:-coll p2p tests devq pairs} " in *" $1 "*) return 0;; esac; return 1; }

    # the suites first: a copy path that breaks them is seen before the benchmarks
    local tx=""
    [ -n "${MULTI_TEST_COPY:-}" ] && tx="-x UCCL_GPU_IPC_COPY=$MULTI_TEST_COPY"
    for kv in ${MULTI_TEST_ENV:-}; do tx="$tx -x $kv"; done
    has tests && step "multi: GPU suites, np 2 (two-process programs: GPU0 -> GPU1, then same GPU), copy ${MULTI_TEST_COPY:-default}"
    if has tests && [ -n "${MULTI_TEST_COPY:-}" ] && left t_gpu_copy; then
        UCCL_GPU_IPC_COPY=$MULTI_TEST_COPY timeout 60 tests/gpu/t_gpu_copy >"$OUT/m_t_gpu_copy.log" 2>&1
        echo "t_gpu_copy (UCCL_GPU_IPC_COPY=$MULTI_TEST_COPY) exit code: $?"
        grep -cE "^ok|PASS" "$OUT/m_t_gpu_copy.log"; grep -E "FAIL|SKIP" "$OUT/m_t_gpu_copy.log" | head -5
    fi
    for t in $(has tests && echo t_gpu_ipc t_gpu_staging_shm); do
        t=${t/_shm/ shm}
        left "$t" || break
        timeout 150 $M -np 2 $tx tests/gpu/$t >"$OUT/m_${t// /_}.log" 2>&1; echo "$t exit code: $?"
        grep -E "PASS|FAIL|skipped" "$OUT/m_${t// /_}.log" | sort | uniq -c | head -12
    done
    has tests && step "multi: t_coll_gpu (gpu, mixed) one process a GPU, np: $(echo $nps)"
    for np in $(has tests && echo $nps); do
        for m in gpu mixed; do
            left "t_coll_gpu $m np $np" || break 2
            timeout 150 $M -np $np $tx -x T_COLL_MEM=$m -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000 \
                tests/mpi/t_coll_gpu >"$OUT/m_t_coll_gpu_${m}_np$np.log" 2>&1
            echo "t_coll_gpu $m np $np exit code: $? ($(grep -c '^ok' "$OUT/m_t_coll_gpu_${m}_np$np.log") ok," \
                "$(grep -c '^FAIL' "$OUT/m_t_coll_gpu_${m}_np$np.log") FAIL, $(grep -c '^SKIP' "$OUT/m_t_coll_gpu_${m}_np$np.log") SKIP lines)"
            grep -E "^FAIL|SKIP|^# GPUs|error" "$OUT/m_t_coll_gpu_${m}_np$np.log" | sort | uniq -c | head -12
        done
    done
    # copy mode: "-" = the library's default; else -x UCCL_GPU_IPC_COPY=mode
    # ("sm:64": sm with UCCL_GPU_IPC_SM_BLOCKS=64; "sm,VAR=VAL,...": more settings)
    cx() {
        local m=${1%%,*} kv
        [ "$m" = - ] || echo "-x UCCL_GPU_IPC_COPY=${m%%:*}"
        case $m in *:*) echo "-x UCCL_GPU_IPC_SM_BLOCKS=${m#*:}";; esac
        case $1 in *,*) for kv in $(echo "${1#*,}" | tr , ' '); do echo "-x $kv"; done;; esac
    }
    cs() { [ "$1" = - ] || echo "_$(echo "$1" | sed -e 's/UCCL_GPU_IPC_//g' -e 's/UCCL_//g' -e 's/[^A-Za-z0-9]//g')"; }
    local cmax=$(( $(numfmt --from=iec "${MULTI_COLL_MAX:-256M}") ))
    for np in $(has coll && echo $nps); do
        # sizes: 4 KiB per rank block up to 256 MiB received per rank
        for op in ${MULTI_COLL_OPS:-allgather alltoall alltoallv bcast}; do
            max=$(( cmax / np ))
            [ "$op" = bcast ] && max=$cmax
            local modes=MULTI_COPY_NP$np
            for cm in ${!modes:-${MULTI_COPY:--}}; do
                left "coll $op np $np copy $cm" || break 3
                step "multi: uccl_perf coll --op $op --mem cuda, np $np, copy $cm (uccl, copy, peer ceiling, NCCL)"
                timeout 150 $M -np $np $(cx $cm) tools/uccl_perf coll --mem cuda --op $op \
                    --min ${MULTI_COLL_MIN:-4K} --max $max --rounds 3 --json "$OUT/m_coll_${op}_np$np$(cs $cm).json" \
                    2>&1 | grep -v "^\[" | tee -a "$OUT/coll-multi.txt"
            done
        done
    done

    if has probes; then
        # what bounds the ceiling (PERF_PEER_MODE, tools/perf_coll_gpu.c), and
        # bcast's algorithms, at the large sizes
        for np in $nps; do
            for mode in streams one pull self; do
                [ "$np" = 2 ] && [ "$mode" != streams ] && [ "$mode" != self ] && continue
                left "probe $mode np $np" || break 2
                step "multi probe: allgather np $np, ceiling PERF_PEER_MODE=$mode"
                PERF_PEER_MODE=$mode timeout 90 $M -np $np -x PERF_PEER_MODE tools/uccl_perf coll --mem cuda \
                    --op allgather --min $((16 << 20)) --max $((64 << 20)) --rounds 3 \
                    --json "$OUT/m_probe_ag_${mode}_np$np.json" 2>&1 | grep -E "^  |PERF_PEER" | tee -a "$OUT/probes.txt"
            done
        done
        for algo in linear scatter_allgather binomial; do
            left "probe bcast $algo" || break
            step "multi probe: bcast np $ngpu --algo $algo"
            timeout 90 $M -np $ngpu tools/uccl_perf coll --mem cuda --op bcast --algo $algo --min 1M \
                --max 256M --rounds 3 --json "$OUT/m_probe_bcast_${algo}.json" 2>&1 | grep -E "^  " |
                tee -a "$OUT/probes.txt"
        done
    fi

    has p2p && step "multi: uccl_perf p2p --transport gpu_ipc, GPU 0 -> GPU 1 (plain peer cudaMemcpyAsync, NCCL)"
    for op in $(has p2p && echo ${MULTI_P2P_OPS:-write read send}); do
        for cm in ${MULTI_P2P_COPY:-${MULTI_COPY:--}}; do
            left "p2p $op copy $cm" || break 2
            echo "# p2p $op window 16, copy $cm" | tee -a "$OUT/p2p-multi.txt"
            timeout 120 $M -np 2 $(cx $cm) tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op --min 4K \
                --max 256M --window 16 --rounds 3 --json "$OUT/m_p2p_${op}_w16$(cs $cm).json" 2>&1 | grep -v "^\[" |
                tee -a "$OUT/p2p-multi.txt"
        done
    done
    for op in $(has p2p && [ -z "${MULTI_P2P_OPS:-}" ] && echo write send); do
        left "p2p $op window 1" || break
        timeout 90 $M -np 2 tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op --min 4K --max 4M \
            --window 1 --iters 200 --rounds 5 --json "$OUT/m_p2p_${op}_w1.json" 2>&1 | grep -v "^\[" |
            grep -E "^ |^#   " | tee -a "$OUT/p2p-multi.txt"
    done

    if has devq && [ -x tests/gpu/b_devq ] && left "b_devq"; then
        step "multi: device queues, kernel on GPU 0 writing into GPU 1 (b_devq, B_DEVQ_RX_GPU=1)"
        B_DEVQ_RX_GPU=1 timeout 150 tests/gpu/b_devq --json "$OUT/m_devq.json" >"$OUT/m_b_devq.log" 2>&1
        echo "b_devq (rx GPU 1) exit code: $?"
        grep -v "^\[uccl" "$OUT/m_b_devq.log" | head -40
    fi
    # two jobs at once: bundle what is there first (a stuck job must not
    # cost the rest), each job killed 5 s after its timeout
    multi_bundle
    if has pairs && [ "$ngpu" -ge 4 ]; then
        for op in ${MULTI_PAIR_OPS:-write send}; do
            left "p2p pairs $op" || break
            step "multi: p2p $op, pairs GPU 0 -> 1 and GPU 2 -> 3 at once (two jobs)"
            local pids=""
            for pair in 0,1 2,3; do
                CUDA_VISIBLE_DEVICES=$pair timeout -k 5 ${MULTI_PAIR_TIMEOUT:-60} $M -np 2 -x CUDA_VISIBLE_DEVICES \
                    tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op $op --min 64K --max 256M --window 16 \
                    --rounds 3 --json "$OUT/m_p2p_${op}_pair${pair/,/}.json" </dev/null \
                    >"$OUT/m_p2p_${op}_pair${pair/,/}.log" 2>&1 &
                pids="$pids $!"
            done
            wait $pids
            for pair in 01 23; do
                echo "# pair $pair"; grep -E "^ +[0-9]|MISMATCH|failed|rror" "$OUT/m_p2p_${op}_pair$pair.log" | head -30
            done | tee -a "$OUT/p2p-multi.txt"
        done
    fi
}

# JSON and logs of the multi step in one archive (the device tool returns
# few files); called again, it adds what came since
multi_bundle() {
    (cd "$OUT" && mkdir -p multi && { mv ./*.json ./m_*.log multi/ 2>/dev/null; true; } &&
     [ -n "$(ls multi)" ] && tar czf results-multi.tgz multi)
}

if [ "$ONLY" = multi ]; then
    multi_step
    step "bundle"
    multi_bundle
    rm -rf "$OUT/multi"
    step "done"
    exit 0
fi

if [ "$ONLY" = p2p ]; then
    p2p_step
    step "bundle"
    (cd "$OUT" && tar czf results-json.tgz ./*.json ./*.log && rm -f ./*.json ./t_gpu_ipc_*.log)
    step "done"
    exit 0
fi

if [ -z "$ONLY" ] || [ "$ONLY" = coll ]; then
    # collectives on GPU memory (issue E): the suite (stream form included) and
    # uccl_perf coll --mem cuda next to the same-run device-to-device copy
    step "collectives on GPU memory: t_gpu_copy, t_coll_gpu (gpu, mixed; 2 processes on GPU 0)"
    timeout 60 tests/gpu/t_gpu_copy >"$OUT/t_gpu_copy.log" 2>&1; echo "t_gpu_copy exit code: $?"
    tail -3 "$OUT/t_gpu_copy.log"
    for m in gpu mixed; do
        timeout 150 $MPIRUN -x T_COLL_MEM=$m -x UCCL_TRANSPORTS=shm,gpu_ipc -x UCCL_TIMEOUT_MS=30000 \
            tests/mpi/t_coll_gpu >"$OUT/t_coll_gpu_$m.log" 2>&1
        echo "t_coll_gpu $m exit code: $? ($(grep -c '^ok' "$OUT/t_coll_gpu_$m.log") ok lines," \
            "$(grep -c '^FAIL' "$OUT/t_coll_gpu_$m.log") FAIL, $(grep -c '^SKIP' "$OUT/t_coll_gpu_$m.log") SKIP lines)"
        grep -E "^FAIL|SKIP|stream form|error" "$OUT/t_coll_gpu_$m.log" | sort | uniq -c | head -20
    done
    step "uccl_perf coll --mem cuda (2 processes on GPU 0; reference: each rank's D2D copy of the bytes it receives)"
    for op in allgather alltoall alltoallv bcast; do
        timeout 150 $MPIRUN tools/uccl_perf coll --mem cuda --op $op --min 64K --max 64M --rounds 3 \
            --json "$OUT/coll_${op}_cuda.json" 2>&1 | grep -v "^\["
    done
fi
if [ "$ONLY" = coll ]; then
    step "bundle (ONLY=coll: the point-to-point steps are left out)"
    (cd "$OUT" && tar czf results-json.tgz ./*.json && rm -f ./*.json)
    step "done"
    exit 0
fi
if [ "${ONLY:-}" = python ]; then
    bash ../tests/gpu/python-device.sh
    (cd "$OUT" && tar czf results-json.tgz ./*.json && rm -f ./*.json)
    step "done"
    exit 0
fi

step "GPU tests (mpirun -np 2)"
UCCL_LOG_LEVEL=info timeout 240 $MPIRUN -x UCCL_LOG_LEVEL tests/gpu/t_gpu_ipc >"$OUT/t_gpu_ipc.log" 2>&1
echo "t_gpu_ipc exit code: $?"
grep -E "PASS|FAIL|ok |skipped|unsupported|gpu_ipc:" "$OUT/t_gpu_ipc.log" | sort | uniq -c | head -60

step "host-only engine leaves the GPUs untouched; GPU memory staged over shm and tcp"
timeout 120 tests/gpu/t_gpu_host_only; echo "t_gpu_host_only exit code: $?"
timeout 60 tests/gpu/t_gpu_dmabuf; echo "t_gpu_dmabuf exit code: $?"
for tp in shm tcp; do
    timeout 240 $MPIRUN tests/gpu/t_gpu_staging $tp >"$OUT/t_gpu_staging_$tp.log" 2>&1
    echo "t_gpu_staging $tp exit code: $?"
    grep -E "FAIL|GB/s|skipped" "$OUT/t_gpu_staging_$tp.log" | head -20
done

step "uccl_info"
if [ -x tools/uccl_info ]; then timeout 60 tools/uccl_info 2>&1 | head -40
else echo "tools/uccl_info not built in this tree"; fi

ngpu=$(nvidia-smi -L | grep -c "^GPU")
step "uccl_perf --mem cuda ($([ "$ngpu" -ge 2 ] && echo "GPU 0 -> GPU 1" || echo "both processes on GPU 0: one GPU"))"
PERF="timeout 240 $MPIRUN tools/uccl_perf p2p --mem cuda --transport gpu_ipc"
# every time is the median of alternating rounds (uccl, plain copy, NCCL):
# single runs on these machines move by 10-30% at some sizes
# bandwidth: a window of 16 in flight, every op, 4 KiB .. 1 GiB
for op in write read send; do
    $PERF --op $op --min 4K --max 1G --window 16 --rounds 3 --json "$OUT/perf_${op}_w16.json" 2>&1 | grep -v "^\["
done
# latency: window 1 (post to completion), small to mid sizes
for op in write send; do
    $PERF --op $op --min 4K --max 64M --window 1 --iters 200 --rounds 5 --json "$OUT/perf_${op}_w1.json" 2>&1 |
        grep -v "^\[" | grep -E "^ |^#   "
done
step "variants: default transports (write, window 1)"
timeout 90 $MPIRUN tools/uccl_perf p2p --mem cuda --op write --min 4K --max 64M --window 1 --iters 200 2>&1 | grep -E "^ |over"
step "send/recv 512 KiB .. 4 MiB, window 16, 5 rounds: default, push only (SPLIT_PCT=0), pull only (PUSH_MIN=0)"
for v in "" "UCCL_GPU_IPC_SPLIT_PCT=0" "UCCL_GPU_IPC_PUSH_MIN=0"; do
    echo "# ${v:-default}"
    timeout 90 $MPIRUN ${v:+-x "$v"} tools/uccl_perf p2p --mem cuda --transport gpu_ipc --op send --min 512K --max 4M \
        --window 16 --rounds 5 2>&1 | grep -E "^ +[0-9]"
done
if [ "${HOST_PERF:-1}" = 1 ]; then
    step "host transports vs Open MPI (issue A), on this quiet machine"
    bash ../tests/perf/host-perf.sh . "$OUT" 2>&1 | tee "$OUT/host-perf.txt" | grep -v "^#   "
fi

devq_step

if [ "${COLL_PERF:-0}" = 1 ]; then
    step "collectives vs Open MPI over ob1 and over UCX (issue E), host memory"
    bash ../tests/perf/coll-perf.sh . "$OUT" >"$OUT/coll-perf.txt" 2>&1
    grep -E "^###|reference ucx" "$OUT/coll-perf.txt" | head -40
fi

step "Python binding"
bash ../tests/gpu/python-device.sh

if [ "$ngpu" -ge 2 ]; then
    MULTI_DEADLINE_S=${MULTI_DEADLINE_S:-100000} multi_step
    multi_bundle
    rm -rf "$OUT/multi"
fi

step "bundle"
# the device tool returns at most 8 files: JSON results travel in one archive
(cd "$OUT" && tar czf results-json.tgz ./*.json && rm -f ./*.json)
step "done"
