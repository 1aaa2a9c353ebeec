#!/bin/bash
# On the device machine (16 cores), from a source root: small-message
# latency of host-memory collectives over shm, several builds measured in
# turns. Builds: "base" (the tree at AB_BASE, e.g. the repo root = main),
# "mine" (this tree) and AB_VARIANTS ("NAME=SED_EXPR" lines applied to this
# tree's coll/mapped*.c and mapped*.h in a copy). Each is built once (CPU only: libuccl and
# uccl_perf); then AB_ROUNDS rounds (default 4), each running every build on
# every AB_OPS x AB_NP (uccl_perf coll 8 B .. AB_MAX, --rounds 3, ob1 in the
# job; Open MPI over UCX too in round 1), the builds' order rotated from one
# round to the next, ranks bound to cores. JSON into
# DIR/BUILD/rR/coll_OP_shm_npN.json; tables by tests/perf/coll-ab.py;
# everything into $OUT/coll-ab.tgz.
set -u
OUT=${OUT:-/tmp/uccl-ab-out}
r=/tmp/coll-ab && rm -rf "$r" && mkdir -p "$r" "$OUT"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
for d in .debs ../.debs ../../.debs; do [ -d "$d" ] && dpkg -i "$d"/*.deb >/dev/null && break; done
lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)" >"$r/machine.txt"
declare -A dir=([base]=$(cd "${AB_BASE:?AB_BASE: the base tree}" && pwd) [mine]=$PWD)
builds="base mine"
while IFS= read -r v; do
    [ -n "$v" ] || continue
    n=${v%%=*}
    rm -rf "/tmp/ab-$n" && mkdir -p "/tmp/ab-$n" && cp -r . "/tmp/ab-$n/" &&
        sed -i "${v#*=}" /tmp/ab-$n/coll/mapped*.[ch] && dir[$n]=/tmp/ab-$n && builds="$builds $n"
    grep -n "^#define" /tmp/ab-$n/coll/mapped*.[ch] >"$r/variant-$n.txt"
done <<<"${AB_VARIANTS:-}"
echo "builds: $builds" | tee "$r/builds.txt"
for b in $builds; do
    (cd "${dir[$b]}" && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-ab && cd build-ab &&
        ../configure --without-cuda --enable-werror >configure.log 2>&1 &&
        make -j6 libuccl.la tools/uccl_perf >make.log 2>&1 || echo "build $b failed") &
done
wait
set -- $builds
nb=$#
for ((round = 1; round <= ${AB_ROUNDS:-4}; round++)); do
    order=()
    for ((i = 0; i < nb; i++)); do
        j=$(((i + round - 1) % nb + 1))
        order+=("${!j}")
    done
    ucx=--ucx-ref\ off
    [ "$round" = 1 ] && ucx=
    echo "=== round $round: ${order[*]} ($(date +%T))"
    for np in ${AB_NP:-2 4}; do
        for op in ${AB_OPS:-allgather alltoall bcast gather scatter}; do
            for b in "${order[@]}"; do
                mkdir -p "$r/$b/r$round"
                echo "### $b round $round np $np $op" >>"$r/$b/coll-perf.txt"
                timeout 90 mpirun $root --bind-to core --map-by core -np "$np" --mca pml ob1 \
                    --mca btl self,vader "${dir[$b]}/build-ab/tools/uccl_perf" coll --op "$op" \
                    --transport shm --min 8 --max "${AB_MAX:-4K}" --rounds 3 $ucx \
                    --json "$r/$b/r$round/coll_${op}_shm_np$np.json" </dev/null 2>&1 |
                    grep -v '^\[uccl' >>"$r/$b/coll-perf.txt"
            done
        done
    done
done
echo "=== done ($(date +%T))"
python3 tests/perf/coll-ab.py "$r" >"$r/tables.md" 2>&1
cat "$r/tables.md"
tar czf "$OUT/coll-ab.tgz" -C "$r" .
