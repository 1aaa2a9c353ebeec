#!/bin/bash
# coll11's device call (host cores only, GPU unused): main's tree (the
# repository root) and the coll11 branch (BRANCH, default .dev/coll11) are
# built side by side; then uccl_perf coll on malloc'd buffers (--mem host)
# over shm, main and branch alternating, both Open MPI references (ob1 in the
# same job, pml ucx from its own mpirun) in every table. Every step stops
# being started once DEADLINE seconds have passed.
# Run from main's root: OUT=dir BRANCH=.dev/coll11 bash .dev/coll11/tests/perf/results/coll/coll11-host/run.sh
set -u
S=$(date +%s); t() { echo "### $* (t=$(( $(date +%s) - S ))s)"; }
OUT=${OUT:-/tmp/coll11-out}; BRANCH=${BRANCH:-.dev/coll11}; DEADLINE=${DEADLINE:-100}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device.log") 2>&1
for d in .debs ../.debs; do [ -d "$d" ] && dpkg -i "$d"/*.deb >/dev/null && echo "installed $d"; done
lscpu | grep -E "Model name|^CPU\(s\)|NUMA node\(s\)"
ROOT=$PWD
build() { # build DIR
    (cd "$1" && ./autogen.sh >/dev/null 2>&1 && mkdir -p build-host && cd build-host &&
     ../configure --without-cuda --enable-werror >configure.log 2>&1 &&
     make -j24 libuccl.la tools/uccl_perf >make.log 2>&1) || { echo "build of $1 failed"; return 1; }
}
t build
build "$ROOT" & p1=$!
build "$ROOT/$BRANCH" & p2=$!
wait $p1 || exit 1
wait $p2 || exit 1
echo "main $(git -C "$ROOT" log --oneline -1 2>/dev/null)"
root=$( [ "$(id -u)" = 0 ] && echo --allow-run-as-root )
run() { # run TREE(main|branch) TAG NP OP MIN MAX [uccl_perf args]
    local tree=$1 tag=$2 np=$3 op=$4 min=$5 max=$6 dir=$ROOT
    shift 6
    [ "$tree" = branch ] && dir=$ROOT/$BRANCH
    if [ $(( $(date +%s) - S )) -ge "$DEADLINE" ]; then echo "### skipped (deadline): $tree $np $op"; return; fi
    echo "### $tree np $np shm $op --mem host $min-$max $* (t=$(( $(date +%s) - S ))s)"
    (cd "$dir/build-host" && timeout 60 mpirun $root --bind-to core --map-by core -np "$np" \
        --mca pml ob1 --mca btl self,vader \
        tools/uccl_perf coll --op "$op" --transport shm --mem host --min "$min" --max "$max" \
        --rounds 3 "$@" --json "$OUT/coll_${op}_shm_np${np}_host_${tree}${tag}.json" 2>&1 |
        grep -v '^\[uccl')
}
run main 1 4 alltoall 64K 16M
run branch 1 4 alltoall 64K 16M
run main 1 2 alltoall 64K 16M
run branch 1 2 alltoall 64K 16M
run main 2 4 alltoall 64K 16M
run branch 2 4 alltoall 64K 16M
run main 1 4 allgather 64K 16M
run branch 1 4 allgather 64K 16M
t done
cd "$OUT" && tar czf json.tgz *.json && rm -f *.json
