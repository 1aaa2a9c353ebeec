#!/bin/bash
# On the device machine (16 cores), from the source root: the small-message
# latency of all seven collectives over shm at np 2 and 4, 8 B .. 4 KiB, both
# Open MPI references in every run (tests/gpu/run-device.sh ONLY=hostcoll,
# tests/perf/coll-perf.sh), then bcast/gather/scatter with algorithm mapped's
# ring cut to 2 buffers (UCCL_COLL_MAPPED_DEPTH=2: the layout before the
# ring; DEPTH2=0 leaves it out) and the VARIANTS of coll/mapped.c (sed
# expressions) in the same session. BASE_COLL=DIR: DIR's files then replace
# coll/ (e.g. main's: the code before a change), rebuilt, measured the same
# way into base/ (BASE_OPS, BASE_NP; default VARIANT_OPS, VARIANT_NP), and
# coll/ is put back; AGAIN=1 then rebuilds the tree's own coll/ and measures
# it once more into again/ (so the tree and the base alternate: the first
# table, base/, again/). Everything into $OUT/coll-small.tgz (the device returns at most
# 8 files). Tables: tests/perf/coll-ratios.py DIR [DIR_B].
set -u
OUT=${OUT:-/tmp/uccl-gpu-out}
r=/tmp/coll-small && rm -rf "$r" && mkdir -p "$r/depth2"
[ -d .debs ] || [ -d ../.debs ] || ln -sfn ../../.debs .debs
OUT=$r ONLY=hostcoll COLL_PERF_MAX=${COLL_PERF_MAX:-4K} \
    COLL_PERF_OPS=${COLL_PERF_OPS:-allgather allgatherv alltoall alltoallv bcast gather scatter} \
    bash tests/gpu/run-device.sh >"$r/run-device.log" 2>&1
echo "run-device exit $?"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
measure() { # measure DIR: VARIANT_OPS on VARIANT_NP (2 4), mapped as built, no UCX reference
    mkdir -p "$1"
    for np in ${VARIANT_NP:-2 4}; do
        for op in ${VARIANT_OPS:-bcast gather scatter}; do
            echo "### np $np shm $op ${UCCL_COLL_MAPPED_DEPTH:+UCCL_COLL_MAPPED_DEPTH=$UCCL_COLL_MAPPED_DEPTH}"
            timeout 120 mpirun $root --bind-to core --map-by core -np $np \
                -x UCCL_COLL_MAPPED_DEPTH --mca pml ob1 --mca btl self,vader \
                build-host/tools/uccl_perf coll --op $op --transport shm --min 8 \
                --max "${COLL_PERF_MAX:-4K}" --rounds 3 --ucx-ref off \
                --json "$1/coll_${op}_shm_np$np.json" </dev/null 2>&1 | grep -v '^\[uccl'
        done
    done >"$1/coll-perf.txt"
}
# the ring cut to 2 buffers (the layout before the ring), same build
[ "${DEPTH2:-1}" = 0 ] || UCCL_COLL_MAPPED_DEPTH=2 measure "$r/depth2"
# VARIANTS: lines "NAME=SED_EXPR" applied to coll/mapped.c, rebuilt, measured, restored
while IFS= read -r v; do
    [ -n "$v" ] || continue
    cp coll/mapped.c /tmp/mapped.c.orig
    sed -i "${v#*=}" coll/mapped.c
    if (cd build-host && make -j16 libuccl.la tools/uccl_perf >/dev/null 2>&1); then
        UCCL_COLL_MAPPED_DEPTH=16 measure "$r/${v%%=*}"
    else
        echo "variant ${v%%=*}: build failed"
    fi
    cp /tmp/mapped.c.orig coll/mapped.c
done <<<"${VARIANTS:-}"
if [ -n "${BASE_COLL:-}" ]; then
    rm -rf /tmp/coll.mine && cp -r coll /tmp/coll.mine && cp "$BASE_COLL"/* coll/
    if (cd build-host && make -j16 libuccl.la tools/uccl_perf >/dev/null 2>&1); then
        VARIANT_OPS=${BASE_OPS:-${VARIANT_OPS:-bcast gather scatter}} \
            VARIANT_NP=${BASE_NP:-${VARIANT_NP:-2 4}} measure "$r/base"
    else
        echo "base build failed"
    fi
    rm -rf coll && cp -r /tmp/coll.mine coll
    if [ "${AGAIN:-0}" = 1 ]; then
        touch coll/*.c
        if (cd build-host && make -j16 libuccl.la tools/uccl_perf >/dev/null 2>&1); then
            VARIANT_OPS=${BASE_OPS:-${VARIANT_OPS:-bcast gather scatter}} \
                VARIANT_NP=${BASE_NP:-${VARIANT_NP:-2 4}} measure "$r/again"
        else
            echo "rebuild of the tree failed"
        fi
    fi
fi
python3 tests/perf/coll-ratios.py "$r" >"$r/ratios.md" 2>&1
for d in "$r"/*/; do
    [ -f "$d/coll-perf.txt" ] || continue
    echo "## uccl time: this build / $(basename "$d")" >>"$r/variants.md"
    python3 tests/perf/coll-ratios.py "$r" "$d" >>"$r/variants.md" 2>&1
done
cat "$r/ratios.md" "$r/variants.md"
tail -5 "$r/run-device.log"
tar czf "$OUT/coll-small.tgz" -C "$r" .
