#!/bin/bash
# On the device machine (16 cores), from the source root: the small-message
# latency of all seven collectives over shm at np 2 and 4, 8 B .. 4 KiB, both
# Open MPI references in every run (tests/gpu/run-device.sh ONLY=hostcoll,
# tests/perf/coll-perf.sh), then bcast/gather/scatter with algorithm mapped's
# ring cut to 2 buffers (UCCL_COLL_MAPPED_DEPTH=2: the layout before the
# ring) in the same session. Everything into $OUT/coll-small.tgz (the device
# returns at most 8 files). Tables: tests/perf/coll-ratios.py DIR [DIR_B].
set -u
OUT=${OUT:-/tmp/uccl-gpu-out}
r=/tmp/coll-small && rm -rf "$r" && mkdir -p "$r/depth2"
[ -d .debs ] || [ -d ../.debs ] || ln -sfn ../../.debs .debs
OUT=$r ONLY=hostcoll COLL_PERF_MAX=${COLL_PERF_MAX:-4K} \
    COLL_PERF_OPS=${COLL_PERF_OPS:-allgather allgatherv alltoall alltoallv bcast gather scatter} \
    bash tests/gpu/run-device.sh >"$r/run-device.log" 2>&1
echo "run-device exit $?"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
for np in 2 4; do
    for op in ${DEPTH2_OPS:-bcast gather scatter}; do
        echo "### np $np shm $op UCCL_COLL_MAPPED_DEPTH=2"
        UCCL_COLL_MAPPED_DEPTH=2 timeout 120 mpirun $root --bind-to core --map-by core -np $np \
            -x UCCL_COLL_MAPPED_DEPTH --mca pml ob1 --mca btl self,vader build-host/tools/uccl_perf \
            coll --op $op --transport shm --min 8 --max "${COLL_PERF_MAX:-4K}" --rounds 3 \
            --ucx-ref off --json "$r/depth2/coll_${op}_shm_np$np.json" 2>&1 | grep -v '^\[uccl'
    done
done >"$r/depth2/coll-perf.txt"
python3 tests/perf/coll-ratios.py "$r" >"$r/ratios.md" 2>&1
python3 tests/perf/coll-ratios.py "$r" "$r/depth2" >"$r/depth16-vs-2.md" 2>&1
cat "$r/ratios.md" "$r/depth16-vs-2.md"
tail -5 "$r/run-device.log"
tar czf "$OUT/coll-small.tgz" -C "$r" .
