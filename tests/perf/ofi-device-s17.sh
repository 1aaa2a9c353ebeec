#!/bin/bash
# ofi17's device call (tests/perf/ofi-device-s17.sh): how many control receives shm's
# tagged queue holds ahead of the direct receives. One libuccl (branch ofi17), one perf_ofi;
# variants by UCCL_OFI_RX_DEPTH: r64 (main's default), r16, r4, rotated over 10 rounds, each
# job perf_ofi --provider shm (raw libfabric and uccl in the same job); then small sends
# (eager path) 3 rounds; then one --phases job per r64/r4 with the debug counters.
# layout: .dev/ofi17/{run.sh,bin/perf_ofi,bin/lib/libuccl.so.0,ofi-debs}
cd "$(dirname "$0")" || exit 1
S=$(date +%s)
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader 2>/dev/null | head -2 > "$OUT/machine.txt"
{ date -u; nproc; lscpu | grep -E "Model name|NUMA node\(s\)"; uptime; grep PRETTY /etc/os-release;
  md5sum bin/perf_ofi bin/lib/libuccl.so.0; cat /proc/sys/kernel/perf_event_paranoid; which perf; } >> "$OUT/machine.txt" 2>&1
fab=$PWD/.fab; lib=$fab/usr/lib/x86_64-linux-gnu
rm -rf "$fab" && mkdir -p "$fab"
for d in ofi-debs/*.deb; do dpkg -x "$d" "$fab"; done
ln -sf ../libpsm1/libpsm_infinipath.so.1.16 "$lib/libpsm_infinipath.so.1"
for f in "$lib"/lib*.so.* "$fab"/lib/x86_64-linux-gnu/lib*.so.*; do
    so=$(basename "$f"); case $so in libfabric.so.*) continue ;; esac
    ldconfig -p | grep -q " $so " && rm -f "$f"
done
export LD_LIBRARY_PATH=$PWD/bin/lib:$lib:$fab/lib/x86_64-linux-gnu
ldd bin/perf_ofi | grep -E "fabric|uccl|mpi.so|not found" >> "$OUT/machine.txt"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
job() { # name rx log-level args...
    local name=$1 rx=$2 lvl=$3; shift 3
    echo "### $name: UCCL_OFI_RX_DEPTH=$rx perf_ofi $* ($(date +%T), load $(cut -d' ' -f1 /proc/loadavg))" >> "$OUT/jobs.txt"
    UCCL_OFI_RX_DEPTH=$rx UCCL_LOG_LEVEL=$lvl timeout 20 mpirun $root --bind-to core -np 2 \
        -x LD_LIBRARY_PATH -x UCCL_OFI_RX_DEPTH -x UCCL_LOG_LEVEL bin/perf_ofi --provider shm "$@" \
        </dev/null >> "$OUT/jobs.txt" 2>&1
    echo "rc $?" >> "$OUT/jobs.txt"
}
v=(64 16 4)
for i in 0 1 2 3 4 5 6 7 8 9; do
    r=$(printf "\\x$(printf %x $((97 + i)))")
    for k in 0 1 2; do
        x=${v[$(( (i + k) % 3 ))]}
        job "r$x-$r" "$x" warn --ops write,read,send --sizes 65536,262144 --repeat 11 --dump 1
    done
done
echo "main jobs done at $(( $(date +%s) - S )) s" >> "$OUT/machine.txt"
for i in 0 1 2; do
    for k in 0 1 2; do
        x=${v[$(( (i + k) % 3 ))]}
        job "small-r$x-$i" "$x" warn --ops send --sizes 1024,4096 --repeat 5
    done
done
for x in 64 4; do
    job "phases-r$x" "$x" debug --ops write,read,send --sizes 65536 --repeat 5 --phases 1
done
echo "wall $(( $(date +%s) - S )) s" >> "$OUT/machine.txt"
cd "$OUT" && tar czf ofi17-run.tgz jobs.txt machine.txt && rm -f jobs.txt
cat machine.txt
