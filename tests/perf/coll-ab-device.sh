#!/bin/bash
# On the device machine (16 cores), from a source root: small-message
# latency of host-memory collectives over shm, several builds measured in
# turns. Builds: "base" (the tree at AB_BASE, e.g. the repo root = main),
# "mine" (this tree) and AB_VARIANTS ("NAME=SED_EXPR" lines applied to this
# tree's coll/*.c and coll/*.h in a copy; the diff goes into DIR/variant-NAME.txt).
# Each is built once (CPU only: libuccl and uccl_perf); then AB_ROUNDS rounds
# (default 4), each running the builds of AB_TABLE (default every build) on
# every AB_OPS x AB_NP (uccl_perf coll AB_MIN (8 B) .. AB_MAX, --rounds 3, ob1 in the
# job; Open MPI over UCX too in round 1, or in every round with AB_UCX=every),
# the builds' order rotated from one round to the next, ranks bound to cores;
# no round starts after AB_STOP_AT (seconds since the epoch).
# JSON into DIR/BUILD/rR/coll_OP_shm_npN.json. Then AB_FOCUS ("OP NP MIN
# ROUNDS", optional): that one op, np and MIN .. AB_MAX on every build,
# ob1 only, ROUNDS more rounds, order rotated, into DIR/BUILD/fR/. Tables by
# tests/perf/coll-ab.py; everything into $OUT/coll-ab.tgz.
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
        sed -i "${v#*=}" /tmp/ab-$n/coll/*.[ch] && dir[$n]=/tmp/ab-$n && builds="$builds $n"
    diff -ru coll "/tmp/ab-$n/coll" >"$r/variant-$n.txt"
done <<<"${AB_VARIANTS:-}"
echo "builds: $builds" | tee "$r/builds.txt"
# built: the builds that run (AB_TABLE's, and every build when AB_FOCUS is set)
run_builds=${AB_TABLE:-$builds}
[ -n "${AB_FOCUS:-}" ] && run_builds=$builds
for b in $run_builds; do
    (cd "${dir[$b]}" && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-ab && cd build-ab &&
        ../configure --without-cuda --enable-werror >configure.log 2>&1 &&
        make -j6 libuccl.la tools/uccl_perf >make.log 2>&1 || echo "build $b failed") &
done
wait
# rotate BUILDS... by ROUND into the array order
rotate() {
    local round=$1 i j
    shift
    order=()
    for ((i = 0; i < $#; i++)); do
        j=$(((i + round - 1) % $# + 1))
        order+=("${!j}")
    done
}
# job BUILD DIRNAME NP OP MIN UCXFLAG: one uccl_perf job
job() {
    mkdir -p "$r/$1/$2"
    echo "### $1 $2 np $3 $4" >>"$r/$1/coll-perf.txt"
    timeout 90 mpirun $root --bind-to core --map-by core -np "$3" --mca pml ob1 \
        --mca btl self,vader "${dir[$1]}/build-ab/tools/uccl_perf" coll --op "$4" \
        --transport shm --min "$5" --max "${AB_MAX:-4K}" --rounds 3 $6 \
        --json "$r/$1/$2/coll_${4}_shm_np$3.json" </dev/null 2>&1 |
        grep -v '^\[uccl' >>"$r/$1/coll-perf.txt"
}
for ((round = 1; round <= ${AB_ROUNDS:-4}; round++)); do
    if [ -n "${AB_STOP_AT:-}" ] && [ "$(date +%s)" -ge "$AB_STOP_AT" ]; then
        echo "=== AB_STOP_AT passed: no round $round"
        break
    fi
    rotate "$round" ${AB_TABLE:-$builds}
    ucx=--ucx-ref\ off
    [ "$round" = 1 ] || [ "${AB_UCX:-}" = every ] && ucx=
    echo "=== round $round: ${order[*]} ($(date +%T))"
    for np in ${AB_NP:-2 4}; do
        for op in ${AB_OPS:-allgather alltoall bcast gather scatter}; do
            for b in "${order[@]}"; do
                job "$b" "r$round" "$np" "$op" "${AB_MIN:-8}" "$ucx"
            done
        done
    done
done
if [ -n "${AB_FOCUS:-}" ]; then
    read -r fop fnp fmin frounds <<<"$AB_FOCUS"
    echo "=== focus $fop np $fnp from $fmin: $frounds rounds ($(date +%T))"
    for ((round = 1; round <= frounds; round++)); do
        rotate "$round" $builds
        for b in "${order[@]}"; do
            job "$b" "f$round" "$fnp" "$fop" "$fmin" "--ucx-ref off"
        done
    done
fi
echo "=== done ($(date +%T))"
python3 tests/perf/coll-ab.py "$r" >"$r/tables.md" 2>&1
cat "$r/tables.md"
tar czf "$OUT/coll-ab.tgz" -C "$r" .
