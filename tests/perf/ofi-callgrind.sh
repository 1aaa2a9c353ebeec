#!/bin/bash
# ofi-callgrind.sh PERF_OFI LIB_DIR OUT_DIR [OPS]: instructions per operation
# of perf_ofi's raw libfabric loop and of libuccl's (LIB_DIR's libuccl.so.0),
# shm, 64 KiB, window 16, 3 pairs of runs after the warm-ups (4 x 64 x 16 =
# 4096 operations per loop), both ranks under callgrind on this host
# (results/ofi/ofi15-H200host/README.md). Wait loops count what their polls
# cost, so they move with timing; posts and completions do not.
set -u
perf=$(realpath "${1:?usage: ofi-callgrind.sh PERF_OFI LIB_DIR OUT_DIR [OPS]}")
lib=$(realpath "${2:?}")
out=${3:?}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
for op in ${4:-write read send}; do
    LD_LIBRARY_PATH=$lib timeout 600 mpirun $root --oversubscribe --bind-to none -np 2 \
        -x LD_LIBRARY_PATH valgrind --tool=callgrind \
        --callgrind-out-file="$out/cg.$op.%q{OMPI_COMM_WORLD_RANK}.out" \
        "$perf" --provider shm --ops "$op" --sizes 65536 --repeat 3 2>&1 |
        grep -E '^(op|write|read|send|sendv) ' >"$out/run.$op.txt"
    for rk in 0 1; do
        callgrind_annotate --threshold=100 --inclusive=yes --tree=calling \
            "$out/cg.$op.$rk.out" >"$out/tree.$op.$rk.txt" 2>/dev/null
        echo "### $op, rank $rk"
        python3 "$here/ofi-callgrind-ops.py" "$out/tree.$op.$rk.txt" 4096 uccl_wait_all \
            uccl_ofi_progress ofi_op_complete uccl_ofi_direct_progress raw_wait
    done
done | tee "$out/summary.txt"
