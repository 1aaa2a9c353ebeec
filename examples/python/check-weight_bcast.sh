#!/bin/sh
# make check: examples/python/weight_bcast.py (a dict of named tensors, one
# ibcast each, a checksum per tensor on every receiver) on 3 and 4 ranks over
# shm and tcp, host memory, 4 MiB; a root other than 0; point-to-point once.
run=${top_srcdir:-.}/python/run-python.sh
prog=${top_srcdir:-.}/examples/python/weight_bcast.py
for args in "3 shm" "4 shm --root 3" "3 tcp --root 1" "4 tcp" "3 shm --mode p2p"; do
    # shellcheck disable=SC2086
    set -- $args
    np=$1 tp=$2
    shift 2
    "$run" "$np" "$tp" numpy,mpi4py "$prog" --mib 4 --tensors 12 --iters 2 "$@" >wb.out 2>&1
    rc=$?
    cat wb.out
    [ $rc = 0 ] || exit $rc
    grep -q "rounds verified" wb.out || { echo "FAIL: no result line"; exit 1; }
done
# one rank's failure ends the job at once: the root's tensors are smaller
# than the receivers' (their ibcast fails with TruncatedError, the root's
# succeeds); the root waited for them in the next round's MPI bcast forever
"$run" 3 shm numpy,mpi4py "${prog%/*}/rank_args.py" "$prog" --mib 1 --iters 2 -- --mib 2 \
    --iters 2 >wb.out 2>&1
rc=$?
cat wb.out
case $rc in 0 | 124 | 137) echo "FAIL: one rank failing: exit $rc"; exit 1 ;; esac
grep -q "TruncatedError" wb.out || { echo "FAIL: no TruncatedError"; exit 1; }
# bad arguments: a clear error on every rank, exit 2
"$run" 3 shm numpy,mpi4py "$prog" --tensors 0 >wb.out 2>&1
rc=$?
cat wb.out
[ $rc = 2 ] || { echo "FAIL: --tensors 0 exited $rc, not 2"; exit 1; }
grep -q "error: --tensors must be at least 1" wb.out || { echo "FAIL: no message"; exit 1; }
rm -f wb.out
