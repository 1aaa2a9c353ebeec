#!/bin/bash
# ofi-callgrind-s18.sh PERF_OFI LIB_DIR OUT_DIR [OPS]: what the one-sided
# initiator runs per operation inside perf_ofi's uccl loop (ucc_run only:
# callgrind --toggle-collect), by function (self instructions), split into
# libuccl, libfabric, libc and the rest; shm, 64 KiB, window 16, 4096
# operations (warm-ups included), both ranks under callgrind as in
# ofi-callgrind.sh. The raw loop (raw_run) is collected the same way. Posts
# and completions are deterministic; wait loops count their polls (timing).
set -u
perf=$(realpath "${1:?usage: ofi-callgrind-s18.sh PERF_OFI LIB_DIR OUT_DIR [OPS]}")
lib=$(realpath "${2:?}")
out=${3:?}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
for op in ${4:-write read}; do
    for loop in ucc_run raw_run; do
        LD_LIBRARY_PATH=$lib timeout 600 mpirun $root --oversubscribe --bind-to none -np 2 \
            -x LD_LIBRARY_PATH valgrind --tool=callgrind --toggle-collect="$loop" \
            --callgrind-out-file="$out/cg.$op.$loop.%q{OMPI_COMM_WORLD_RANK}.out" \
            "$perf" --provider shm --ops "$op" --sizes 65536 --repeat 3 >/dev/null 2>&1
        for rk in 0 1; do
            callgrind_annotate --threshold=100 --show-percs=no \
                "$out/cg.$op.$loop.$rk.out" >"$out/self.$op.$loop.$rk.txt" 2>/dev/null
        done
    done
    for rk in 0 1; do
        echo "### $op, rank $rk"
        python3 "$here/ofi-callgrind-self.py" "$out/self.$op.ucc_run.$rk.txt" \
            "$out/self.$op.raw_run.$rk.txt" 4096 "$out/cg.$op.ucc_run.$rk.out"
    done
done | tee "$out/summary.txt"
