#!/bin/bash
# ofi-device-ab.sh: the ofi A/B on the device machine (replaces ofi18's ofi-device-s18.sh).
# VARIANTS libuccl builds (bin/VARIANT/lib/libuccl.so.0, default "base new"), one perf_ofi,
# ROUNDS rounds (default 16); each round runs every variant once, their order rotated by the
# round and reversed every other round (two variants: ABBA). A job runs perf_ofi --provider
# shm once per SPEC ("OPS:SIZES", default "write,read,send:65536,262144"), --repeat REPEAT
# (default 21) --dump 1: raw libfabric and uccl in the same job, pairs of runs in flipped
# order. No round starts past LIMIT s (default 120). Summary (ofi-ab.py, the first variant
# the reference) in $OUT/summary.txt, every job's rows in $OUT/ofi-ab-run.tgz.
# Layout (tests/perf/ofi-device-ab-prep.sh): DIR/{run.sh,ofi-ab.py,builds.txt,bin/perf_ofi,
#         bin/VARIANT/lib/libuccl.so.0,ofi-debs}; run as DIR/run.sh.
cd "$(dirname "$0")" || exit 1
VARIANTS=${VARIANTS:-base new} ROUNDS=${ROUNDS:-16} REPEAT=${REPEAT:-21} LIMIT=${LIMIT:-120}
SPECS=${SPECS:-write,read,send:65536,262144} OUT=${OUT:-/tmp/ofi-ab-out}
read -r -a vs <<< "$VARIANTS"
read -r -a specs <<< "$SPECS"
mkdir -p "$OUT"
S=$(date +%s)
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader 2>/dev/null | head -2 > "$OUT/machine.txt"
{ date -u; nproc; lscpu | grep -E "Model name|NUMA node\(s\)"; uptime; grep PRETTY /etc/os-release;
  echo "VARIANTS=$VARIANTS ROUNDS=$ROUNDS REPEAT=$REPEAT SPECS=$SPECS LIMIT=$LIMIT"
  cat builds.txt; } >> "$OUT/machine.txt" 2>&1
# Debian 12's libfabric (no headers on the device: the runtime packages, unpacked here),
# without the libraries the machine has already
fab=$PWD/.fab; lib=$fab/usr/lib/x86_64-linux-gnu
rm -rf "$fab" && mkdir -p "$fab"
for d in ofi-debs/*.deb; do dpkg -x "$d" "$fab"; done
ln -sf ../libpsm1/libpsm_infinipath.so.1.16 "$lib/libpsm_infinipath.so.1"
for f in "$lib"/lib*.so.* "$fab"/lib/x86_64-linux-gnu/lib*.so.*; do
    so=$(basename "$f"); case $so in libfabric.so.*) continue ;; esac
    ldconfig -p | grep -q " $so " && rm -f "$f"
done
fablib=$lib:$fab/lib/x86_64-linux-gnu
LD_LIBRARY_PATH=$PWD/bin/${vs[0]}/lib:$fablib ldd bin/perf_ofi | grep -E "fabric|uccl|mpi.so|not found" >> "$OUT/machine.txt"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
job() { # variant round
    echo "### $1-$2: perf_ofi --provider shm ($(date +%T), load $(cut -d' ' -f1 /proc/loadavg))" >> "$OUT/jobs.txt"
    for sp in "${specs[@]}"; do
        LD_LIBRARY_PATH=$PWD/bin/$1/lib:$fablib timeout 25 mpirun $root --bind-to core -np 2 \
            -x LD_LIBRARY_PATH bin/perf_ofi --provider shm --ops "${sp%%:*}" \
            --sizes "${sp#*:}" --repeat "$REPEAT" --dump 1 </dev/null >> "$OUT/jobs.txt" 2>&1
        echo "rc $?" >> "$OUT/jobs.txt"
    done
}
n=${#vs[@]}
for ((i = 1; i <= ROUNDS; i++)); do
    [ $(( $(date +%s) - S )) -gt "$LIMIT" ] && { echo "stopped before round $i (time)" >> "$OUT/machine.txt"; break; }
    order=()
    for ((k = 0; k < n; k++)); do order+=("${vs[$(( (i + k) % n ))]}"); done
    if (( i % 2 == 0 )); then
        for ((k = n - 1; k >= 0; k--)); do job "${order[$k]}" "$i"; done
    else
        for v in "${order[@]}"; do job "$v" "$i"; done
    fi
done
echo "wall $(( $(date +%s) - S )) s" >> "$OUT/machine.txt"
python3 ofi-ab.py "$OUT/jobs.txt" $VARIANTS > "$OUT/summary.txt" 2>&1
cd "$OUT" && tar czf ofi-ab-run.tgz jobs.txt machine.txt summary.txt && rm -f jobs.txt
cat machine.txt summary.txt
