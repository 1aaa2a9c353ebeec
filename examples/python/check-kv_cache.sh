#!/bin/sh
# make check: examples/python/kv_cache.py on 2 ranks, host memory, small
# sizes, both directions (writemsg pushed by prefill, readmsg pulled by
# decode) over shm and tcp; every block is verified by the example itself.
run=${top_srcdir:-.}/python/run-python.sh
prog=${top_srcdir:-.}/examples/python/kv_cache.py
small="--layers 4 --pool-blocks 48 --block-bytes 4096 --blocks 16 --iters 10 --warmup 2"
for tp in shm tcp; do
    for op in write read; do
        # shellcheck disable=SC2086
        "$run" 2 $tp numpy,mpi4py "$prog" --op $op $small >kv_cache.out 2>&1
        rc=$?
        cat kv_cache.out
        [ $rc = 0 ] || exit $rc
        grep -q "requests verified" kv_cache.out || { echo "FAIL: no result line"; exit 1; }
    done
done
# bad arguments: a clear error on every rank, exit 2, at once (--iters 0
# hung: decode failed after its last request, prefill waited in the final
# barrier)
# shellcheck disable=SC2086
"$run" 2 shm numpy,mpi4py "$prog" $small --iters 0 >kv_cache.out 2>&1
rc=$?
cat kv_cache.out
[ $rc = 2 ] || { echo "FAIL: --iters 0 exited $rc, not 2"; exit 1; }
grep -q "error: --iters must be at least 1" kv_cache.out || { echo "FAIL: no message"; exit 1; }
rm -f kv_cache.out
