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
rm -f kv_cache.out
