#!/bin/sh
# A blocking GPU allgather / alltoall on 2 fake-GPU processes (one GPU each),
# uccl_perf coll at 2 MiB a peer, verified byte for byte (#wrong 0), with
# gpu_ipc's profile (UCCL_GPU_IPC_PROF=1) and coll's trace (UCCL_COLL_TRACE=1):
# - UCCL_GPU_IPC_DUPLEX_PULL_MAX (4G by default): each rank's message arrives
#   while its own send to the peer is in flight, so it is pulled whole: 2
#   messages out a call per rank (the send's RTS and the pull's FIN), where
#   the push-and-split path (DUPLEX_PULL_MAX=0, 2 MiB >= PUSH_MIN) sends 4 (RTS,
#   CTS, FIN, PUSH_DONE);
# - UCCL_COLL_GPU_COPY_LATE=1: the own block's GPU copy is held back, and
#   posted in every call (the trace counts as many held-back posts as calls;
#   none with 0);
#   with 1000000 rounds it goes once the transfers are done, and the calls
#   still end, with the right bytes, in under 50 ms each (waiting out the
#   rounds took about 200 ms a call here).
# Skips where uccl_perf finds no GPU (a real-GPU build in CI) or no mpirun.
set -e
. "$(dirname "$0")/prof-check.sh"

# coll NAME OP VAR=VAL...: uccl_perf coll --mem cuda, 2 ranks, 2 MiB a peer
coll() {
    name=$1 op=$2
    shift 2
    env_on UCCL_GPU_IPC_PROF=1 UCCL_COLL_TRACE=1 "$@"
    st=0
    eval "timeout 60 ${MPIEXEC:-mpirun --oversubscribe} -np 2 $xs \"\$perf\" coll --mem cuda --op $op \
        --min 2M --max 2M --iters 5 --warmup 1 --rounds 1 --no-ref" >"$tmp/$name" 2>&1 || st=$?
    env_off UCCL_GPU_IPC_PROF=1 UCCL_COLL_TRACE=1 "$@"
    if [ $st -ne 0 ]; then
        skip_no_gpu "$name"
        cat "$tmp/$name"
        echo "FAIL: $name: uccl_perf coll --op $op ($*) exit $st"
        fail=1
        return 1
    fi
    wrong=$(awk '$1 ~ /^[0-9]+$/ && NF > 10 { w += $NF; r++ } END { print (r == 1 ? w : -1) }' "$tmp/$name")
    calls=$(awk 'index($0, "coll trace") && index($0, " calls, ") { for (i = 1; i < NF; i++) if ($(i + 1) == "calls,") n += $i } END { print n + 0 }' "$tmp/$name")
    callus=$(awk 'index($0, "coll trace") && index($0, " us a call") { for (i = 1; i < NF; i++) if ($(i + 1) == "us" && $i + 0 > m) m = $i + 0 } END { print int(m) }' "$tmp/$name")
    held=$(awk 'index($0, "held-back GPU copies") { f = $NF; gsub(/[()]/, "", f); n += f } END { print n + 0 }' "$tmp/$name")
    msgs=$(count "$tmp/$name" "message out")
    all=$((calls + 8)) # the trace leaves out each rank's first 4 calls; the profile counts them
    echo "$name ($op $*): $calls calls (both ranks), $msgs messages out, $held held-back copy posts," \
        "$wrong wrong, $callus us a call (slower rank)"
    if [ "$wrong" != 0 ] || [ "$calls" -lt 10 ]; then
        cat "$tmp/$name"
        echo "FAIL: $name: $wrong wrong bytes (-1: no result row), $calls calls traced"
        fail=1
        return 1
    fi
}

for op in allgather alltoall; do
    if coll "$op-duplex" $op UCCL_COLL_GPU_COPY_LATE=1; then
        if [ "$msgs" -gt $((2 * all + 8)) ]; then
            echo "FAIL: $op-duplex: $msgs messages out for $all calls: not pulled whole (DUPLEX_PULL_MAX)"
            fail=1
        fi
        if [ "$held" -ne "$calls" ]; then
            echo "FAIL: $op-duplex: $held held-back copy posts for $calls calls (UCCL_COLL_GPU_COPY_LATE=1)"
            fail=1
        fi
    fi
    if coll "$op-split" $op UCCL_GPU_IPC_DUPLEX_PULL_MAX=0 UCCL_COLL_GPU_COPY_LATE=0; then
        if [ "$msgs" -lt $((3 * all)) ]; then
            echo "FAIL: $op-split: $msgs messages out for $all calls: DUPLEX_PULL_MAX=0 should push and split"
            fail=1
        fi
        if [ "$held" -ne 0 ]; then
            echo "FAIL: $op-split: $held held-back copy posts with UCCL_COLL_GPU_COPY_LATE=0"
            fail=1
        fi
    fi
    if coll "$op-late-max" $op UCCL_COLL_GPU_COPY_LATE=1000000; then
        if [ "$held" -ne "$calls" ] || [ "$callus" -ge 50000 ]; then
            echo "FAIL: $op-late-max: $held held-back copy posts for $calls calls, $callus us a call"
            fail=1
        fi
    fi
done
[ $fail = 0 ] && echo PASS
exit $fail
