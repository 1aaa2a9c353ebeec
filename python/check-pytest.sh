#!/bin/sh
# make check: the Python binding's pytest suite on 2 ranks over shm, then tcp,
# and its collectives (test_coll*.py) again on 3 ranks over shm and tcp
# (python/tests/run_pytest.py fails a run where no test ran).
here=$(dirname "$0")
tests=${top_srcdir:-.}/python/tests
for run in "2 shm" "2 tcp" "3 shm test_coll.py test_coll_stream.py" "3 tcp test_coll.py test_coll_stream.py"; do
    # shellcheck disable=SC2086
    set -- $run
    np=$1 tp=$2
    shift 2
    "$here/run-python.sh" "$np" "$tp" numpy,mpi4py,pytest "$tests/run_pytest.py" "$@"
    rc=$?
    [ $rc = 0 ] || exit $rc
done
# python -m uccl.bench's in-process comparison (the C loop, the Python loops
# (a send_many per window: loop_group and window_group, a Request per
# transfer, one send per transfer, PersistentRequests: loop_persist, and in
# a PersistentGroup: loop_pgroup, and with progress=True: pgroupp), the
# two mixed ones and the split one),
# tiny, send, then write's Python loops (the C loop's three ops are
# test_p2p's), then --variant (two engines of different settings, each
# loop on an engine of its own): its worker compares the destination's bytes
out=$(mktemp)
for op in "send --mixed --split --post group,groupfn,many,one,persist,pgroup,pgroupp" \
    "write --split --post group,groupfn,persist,pgroup,pgroupp" \
    "send --post pgroupp --variant a: --variant b:UCCL_SHM_SPLIT_PCT=0 --engine-per-loop"; do
    # shellcheck disable=SC2086
    "$here/run-python.sh" 2 shm numpy,mpi4py -m uccl.bench --worker --inproc --op $op \
        --transport shm --min 4K --max 64K --iters 2 --rounds 2 --json "$out"
    rc=$?
    [ $rc = 0 ] || { rm -f "$out"; echo "FAIL: python -m uccl.bench --op $op (in process)"; exit $rc; }
done
rm -f "$out"
echo "python binding: pytest passed on 2 ranks (all) and 3 ranks (collectives) over shm and tcp; uccl.bench in process"
