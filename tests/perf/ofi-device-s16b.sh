#!/bin/bash
# ofi16b's device call: shm write/read/send at 64 and 256 KiB, main (base) and ofi16b (new)
# libuccl alternated ABBA over 10 pairs of jobs (ofi-device-s16b.jobs, perf_ofi: raw
# libfabric next to uccl in each job); then uccl_perf p2p over the shm TRANSPORT (not ofi),
# send and write 4-64 KiB, base and new alternated ABBA over 4 pairs (uccl only, --rounds 3)
# layout: .dev/ofi16b/{bin/perf_ofi,bin/{base,new}/{lib,uccl_perf},ofi-debs,
#         ofi-device-s13.sh,ofi16b.jobs}
cd "$(dirname "$0")" || exit 1
S=$(date +%s)
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader 2>/dev/null | head -2 > "$OUT/machine.txt"
{ date -u; nproc; lscpu | grep -E "Model name|NUMA node\(s\)"; uptime; md5sum bin/perf_ofi bin/*/uccl_perf bin/*/lib/libuccl.so.0; } >> "$OUT/machine.txt"
timeout 200 bash ./ofi-device-s13.sh ofi-debs bin ofi16b.jobs > /dev/null 2>&1
echo "ofi jobs done at $(( $(date +%s) - S )) s" >> "$OUT/machine.txt"
fablib=$PWD/.fab/usr/lib/x86_64-linux-gnu:$PWD/.fab/lib/x86_64-linux-gnu
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
for j in base-a new-a new-b base-b base-c new-c new-d base-d; do
  v=${j%-*}
  echo "### $j: uccl_perf p2p --transport shm --op send,write --min 4K --max 64K --no-ref --rounds 3" >> "$OUT/p2p-shm.txt"
  LD_LIBRARY_PATH=$PWD/bin/$v/lib:$fablib timeout 40 mpirun $root --bind-to core -np 2 -x LD_LIBRARY_PATH \
     bin/$v/uccl_perf p2p --transport shm --op send,write --min 4K --max 64K --no-ref --rounds 3 </dev/null >> "$OUT/p2p-shm.txt" 2>&1
done
echo "wall $(( $(date +%s) - S )) s" >> "$OUT/machine.txt"
cd "$OUT" && tar czf ofi16b-run.tgz --exclude=ofi16b-run.tgz ./*.txt ./*.log && find . -maxdepth 1 -type f ! -name ofi16b-run.tgz ! -name machine.txt ! -name ofi-device.log ! -name p2p-shm.txt -delete
tail -3 ofi-device.log; cat machine.txt; grep -cE "^(write|read|send) " ofi-device.log
