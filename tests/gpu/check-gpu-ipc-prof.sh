#!/bin/sh
# gpu_ipc's micro profile and unrecorded fences on the fake GPU backend (two
# processes, uccl_perf p2p --mem cuda over gpu_ipc, every window's bytes
# verified): UCCL_GPU_IPC_PROF=1 prints each engine's host time per step at
# close, with the transfers counted; with the host word off
# (UCCL_GPU_IPC_FLAG_DONE=0: check-gpu-ipc-flag.sh tests it on) a fence of
# stream-0 copies is polled with a stream query (LAZY_EVENT), and
# UCCL_GPU_IPC_LAZY_EVENT=0 records an event per fence instead; without
# PROF nothing is printed. UCCL_GPU_IPC_QUIET_POLLS=N: a fence's stream is
# queried N times busy before its event is recorded ("quiet record"; the
# fake's streams run only when waited for, so every fence goes the whole
# way: exactly N busy queries per quiet record), and 0 is refused.
# Skips where uccl_perf finds no GPU (a real-GPU build in CI) or no mpirun.
set -e
. "$(dirname "$0")/prof-check.sh"

run() { # run NAME VAR=VAL...: write, window 16, 4 sizes x 5 windows, on 2 ranks (MPIEXEC holds a $(...))
    name=$1
    shift
    run_p2p "$name" write 16 4K 32K 5 "$@"
}

if ! run plain; then
    skip_no_gpu plain
    cat "$tmp/plain"
    echo "FAIL: uccl_perf p2p over gpu_ipc"
    exit 1
fi
grep -q "gpu_ipc prof" "$tmp/plain" && { cat "$tmp/plain"; echo "FAIL: a profile without UCCL_GPU_IPC_PROF"; exit 1; }

run lazy UCCL_GPU_IPC_PROF=1 UCCL_GPU_IPC_FLAG_DONE=0 || { cat "$tmp/lazy"; echo "FAIL: uccl_perf with PROF=1"; exit 1; }
run eager UCCL_GPU_IPC_PROF=1 UCCL_GPU_IPC_FLAG_DONE=0 UCCL_GPU_IPC_LAZY_EVENT=0 ||
    { cat "$tmp/eager"; echo "FAIL: uccl_perf with PROF=1 LAZY_EVENT=0"; exit 1; }
for f in lazy eager; do
    posts=$(count "$tmp/$f" post)
    copies=$(($(count "$tmp/$f" copy) + $(count "$tmp/$f" "batch(per copy)")))
    done=$(count "$tmp/$f" "op finish")
    headers=$(grep -c "gpu_ipc prof pid [0-9]*: step calls" "$tmp/$f" || true)
    # 4 sizes x (warmup + 5 timed + 1 verified window) x 16 writes at least
    echo "$f: $headers profiles, $posts posts, $copies copies, $done ops finished"
    [ "$headers" -eq 2 ] && [ "$posts" -ge 320 ] && [ "$copies" -ge 320 ] && [ "$done" -ge 320 ] ||
        { echo "FAIL: $f: profile counts"; fail=1; }
done
lq=$(($(count "$tmp/lazy" "stream query busy") + $(count "$tmp/lazy" "stream query done")))
eq=$(($(count "$tmp/eager" "stream query busy") + $(count "$tmp/eager" "stream query done")))
er=$(count "$tmp/eager" "event record")
echo "stream queries: $lq lazy, $eq eager; event records eager: $er"
[ "$lq" -gt 0 ] || { echo "FAIL: LAZY_EVENT=1 polled no fence with a stream query"; fail=1; }
[ "$eq" -eq 0 ] && [ "$er" -gt 0 ] || { echo "FAIL: LAZY_EVENT=0 must record an event per fence"; fail=1; }
for q in 5 50; do
    run quiet$q UCCL_GPU_IPC_PROF=1 UCCL_GPU_IPC_FLAG_DONE=0 UCCL_GPU_IPC_QUIET_POLLS=$q ||
        { cat "$tmp/quiet$q"; echo "FAIL: uccl_perf with QUIET_POLLS=$q"; exit 1; }
    qb=$(count "$tmp/quiet$q" "stream query busy")
    qr=$(count "$tmp/quiet$q" "quiet record")
    echo "QUIET_POLLS=$q: $qb busy stream queries, $qr events recorded after them"
    [ "$qr" -gt 0 ] && [ "$qb" -eq $((q * qr)) ] ||
        { cat "$tmp/quiet$q"; echo "FAIL: QUIET_POLLS=$q: $qb busy queries for $qr records"; fail=1; }
done
if run quiet0 UCCL_GPU_IPC_QUIET_POLLS=0 || ! grep -q "QUIET_POLLS" "$tmp/quiet0"; then
    cat "$tmp/quiet0"
    echo "FAIL: QUIET_POLLS=0 must fail engine creation naming the setting"
    fail=1
fi
[ $fail = 0 ] || { cat "$tmp/lazy" "$tmp/eager"; exit 1; }
echo "PASS: gpu_ipc profile and unrecorded fences"
