#!/bin/bash
# ofi16's device call: shm write/read/send at 64 and 256 KiB, main (base) and ofi16 (new)
# libuccl alternated ABBA over 10 pairs of jobs; tcp;ofi_rxm once each; the seed once;
# the direct counters (hints) of one send job at debug level
# layout: .dev/ofi16/{bin/perf_ofi,bin/{base,new,ofi15}/lib,ofi-debs,ofi-device-s13.sh,ofi16.jobs} (ofi-device-s16*.jobs here)
cd "$(dirname "$0")" || exit 1
S=$(date +%s)
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader 2>/dev/null | head -2 > "$OUT/machine.txt"
{ date -u; nproc; lscpu | grep -E "Model name|NUMA node\(s\)"; uptime; md5sum bin/perf_ofi bin/*/lib/libuccl.so.0; } >> "$OUT/machine.txt"
timeout 250 bash ./ofi-device-s13.sh ofi-debs bin ofi16.jobs > /dev/null 2>&1
fablib=$PWD/.fab/usr/lib/x86_64-linux-gnu:$PWD/.fab/lib/x86_64-linux-gnu
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
for v in new base; do
  echo "### counters $v: perf_ofi shm --ops send --repeat 5, UCCL_LOG_LEVEL=debug" >> "$OUT/counters.txt"
  LD_LIBRARY_PATH=$PWD/bin/$v/lib:$fablib timeout 20 mpirun $root --bind-to core -np 2 -x LD_LIBRARY_PATH -x UCCL_LOG_LEVEL=debug \
     bin/perf_ofi --provider shm --ops send --sizes 65536,262144 --repeat 5 </dev/null 2>&1 | grep -E "direct sends|^send " >> "$OUT/counters.txt"
done
echo "wall $(( $(date +%s) - S )) s" >> "$OUT/machine.txt"
cd "$OUT" && tar czf ofi16-run.tgz --exclude=ofi16-run.tgz ./*.txt ./*.log && find . -maxdepth 1 -type f ! -name ofi16-run.tgz ! -name machine.txt ! -name ofi-device.log ! -name counters.txt -delete
tail -3 ofi-device.log; cat machine.txt counters.txt
