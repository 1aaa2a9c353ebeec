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
echo "python binding: pytest passed on 2 ranks (all) and 3 ranks (collectives) over shm and tcp"
