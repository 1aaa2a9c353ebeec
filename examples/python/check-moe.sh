#!/bin/sh
# make check: examples/python/moe.py (dispatch/combine by alltoall + alltoallv,
# verified by the example against its references) on 3 and 4 ranks over shm
# and tcp, host memory, small sizes; once with point-to-point (--mode p2p).
run=${top_srcdir:-.}/python/run-python.sh
prog=${top_srcdir:-.}/examples/python/moe.py
small="--tokens 48 --hidden 64 --iters 3 --warmup 1"
for args in "3 shm" "4 shm" "3 tcp" "4 tcp" "3 shm --mode p2p"; do
    # shellcheck disable=SC2086
    set -- $args
    np=$1 tp=$2
    shift 2
    # shellcheck disable=SC2086
    "$run" "$np" "$tp" numpy,mpi4py "$prog" $small "$@" >moe.out 2>&1
    rc=$?
    cat moe.out
    [ $rc = 0 ] || exit $rc
    grep -q "iterations verified" moe.out || { echo "FAIL: no result line"; exit 1; }
done
# bad arguments: a clear error on every rank and a non-zero exit, at once
for bad in "--iters 0:error: --iters must be at least 1" "--topk 7:--topk 7 is more than the 6 experts"; do
    # shellcheck disable=SC2086
    "$run" 3 shm numpy,mpi4py "$prog" $small ${bad%%:*} >moe.out 2>&1
    rc=$?
    cat moe.out
    case $rc in 0 | 124) echo "FAIL: ${bad%%:*} exited $rc"; exit 1 ;; esac
    grep -q -- "${bad#*:}" moe.out || { echo "FAIL: ${bad%%:*}: no message"; exit 1; }
done
rm -f moe.out
