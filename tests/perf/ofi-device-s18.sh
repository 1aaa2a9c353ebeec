#!/bin/bash
# ofi18's device call: main (base) and branch ofi18 (new) libuccl, one perf_ofi, alternated
# ABBA over PAIRS pairs of jobs (default 16; the first of a pair flips each pair), each job
# perf_ofi --provider shm --ops write,read,send --sizes 65536,262144 --repeat REPEAT (raw
# libfabric and uccl in the same job, pairs of runs in flipped order); no new pair starts past
# 120 s. Summary (ofi-pairs-s18.py) in $OUT/summary.txt, every job's rows in the tarball.
# layout (tests/perf/ofi-device-s18-prep.sh): .dev/ofi18/{run.sh,ofi-pairs-s18.py,builds.txt,
#         bin/perf_ofi,bin/{base,new}/lib/libuccl.so.0,ofi-debs}
cd "$(dirname "$0")" || exit 1
PAIRS=${PAIRS:-16} REPEAT=${REPEAT:-21} OUT=${OUT:-/tmp/ofi18-out}
mkdir -p "$OUT"
S=$(date +%s)
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader 2>/dev/null | head -2 > "$OUT/machine.txt"
{ date -u; nproc; lscpu | grep -E "Model name|NUMA node\(s\)"; uptime; grep PRETTY /etc/os-release;
  cat builds.txt; } >> "$OUT/machine.txt" 2>&1
fab=$PWD/.fab; lib=$fab/usr/lib/x86_64-linux-gnu
rm -rf "$fab" && mkdir -p "$fab"
for d in ofi-debs/*.deb; do dpkg -x "$d" "$fab"; done
ln -sf ../libpsm1/libpsm_infinipath.so.1.16 "$lib/libpsm_infinipath.so.1"
for f in "$lib"/lib*.so.* "$fab"/lib/x86_64-linux-gnu/lib*.so.*; do
    so=$(basename "$f"); case $so in libfabric.so.*) continue ;; esac
    ldconfig -p | grep -q " $so " && rm -f "$f"
done
fablib=$lib:$fab/lib/x86_64-linux-gnu
LD_LIBRARY_PATH=$PWD/bin/new/lib:$fablib ldd bin/perf_ofi | grep -E "fabric|uccl|mpi.so|not found" >> "$OUT/machine.txt"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
job() { # variant pair
    echo "### $1-$2: perf_ofi --provider shm ($(date +%T), load $(cut -d' ' -f1 /proc/loadavg))" >> "$OUT/jobs.txt"
    LD_LIBRARY_PATH=$PWD/bin/$1/lib:$fablib timeout 25 mpirun $root --bind-to core -np 2 \
        -x LD_LIBRARY_PATH bin/perf_ofi --provider shm --ops write,read,send \
        --sizes 65536,262144 --repeat "$REPEAT" --dump 1 </dev/null >> "$OUT/jobs.txt" 2>&1
    echo "rc $?" >> "$OUT/jobs.txt"
}
for ((i = 1; i <= PAIRS; i++)); do
    [ $(( $(date +%s) - S )) -gt 120 ] && { echo "stopped before pair $i (time)" >> "$OUT/machine.txt"; break; }
    if (( i % 2 )); then job base $i; job new $i; else job new $i; job base $i; fi
done
echo "wall $(( $(date +%s) - S )) s" >> "$OUT/machine.txt"
python3 ofi-pairs-s18.py "$OUT/jobs.txt" > "$OUT/summary.txt" 2>&1
cd "$OUT" && tar czf ofi18-run.tgz jobs.txt machine.txt summary.txt && rm -f jobs.txt
cat machine.txt summary.txt
