#!/bin/sh
# make check: the Python binding's pytest suite on 2 ranks over shm, then tcp
# (python/tests/run_pytest.py fails a run where no test ran).
here=$(dirname "$0")
tests=${top_srcdir:-.}/python/tests
for tp in shm tcp; do
    "$here/run-python.sh" 2 $tp numpy,mpi4py,pytest "$tests/run_pytest.py"
    rc=$?
    [ $rc = 0 ] || exit $rc
done
echo "python binding: pytest passed over shm and tcp"
