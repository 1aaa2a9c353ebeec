#!/bin/sh
# Run a Python program on NP ranks with the in-tree uccl package, the way
# make check does: run-python.sh NP TRANSPORTS MODULES PROGRAM [ARGS...]
# MODULES (comma list, e.g. numpy,mpi4py,pytest) must import, else SKIP (77).
# The package is staged in a temporary directory: the sources' .py files and
# the built extension. A sanitizer build preloads ASan into python3 (not
# instrumented itself) with the leak check off, as run-mpi.sh explains.
# PYTHON, MPIEXEC, top_srcdir and top_builddir come from TESTS_ENVIRONMENT.
np=$1 transports=$2 modules=$3
shift 3
srcdir=${top_srcdir:-.} builddir=${top_builddir:-.}
if [ "${uccl_python_built:-}" != yes ]; then
    echo "SKIP: the Python binding is not built (configure found no Python headers)"
    exit 77
fi
py=${PYTHON:-python3}
for m in $(echo "$modules" | tr , ' '); do
    if ! "$py" -c "import $m" >/dev/null 2>&1; then
        echo "SKIP: $py cannot import $m (Debian: apt-get install python3-$m)"
        exit 77
    fi
done
ext=$builddir/python/uccl/.libs/_uccl.so
[ -f "$ext" ] || { echo "FAIL: $ext not built"; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/uccl"
for f in "$srcdir"/python/uccl/*.py "$srcdir"/python/uccl/*.pyi; do ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$stage/uccl/"; done
ln -s "$(cd "$(dirname "$ext")" && pwd)/_uccl.so" "$stage/uccl/_uccl.so"
preload=
if ldd "$ext" 2>/dev/null | grep -q libasan; then
    preload=$(${CC:-cc} -print-file-name=libasan.so)
    # no quarantine: the tests' flat-RSS check measures the program, not
    # ASan's pool of freed memory
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:quarantine_size_mb=0"
    UCCL_PY_SANITIZED=1 # RSS then measures ASan's allocator: the flat-RSS check skips
    export ASAN_OPTIONS UCCL_PY_SANITIZED
fi
PYTHONPATH=$stage${PYTHONPATH:+:$PYTHONPATH}
PYTHONDONTWRITEBYTECODE=1
UCCL_TRANSPORTS=$transports
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-30000}
export PYTHONPATH PYTHONDONTWRITEBYTECODE UCCL_TRANSPORTS UCCL_TIMEOUT_MS
echo "# $np ranks, UCCL_TRANSPORTS=$transports: $py $*"
# MPIEXEC holds a $(...) for the root check, hence eval. -k: an mpirun
# whose ranks ended on the TERM may stay (seen with ranks that had waited in
# MPI for a rank gone into MPI_Finalize: mpirun alive 500 s after the TERM)
eval "timeout -k 10 170 ${MPIEXEC:-mpirun --oversubscribe} -np \$np env LD_PRELOAD=\"\$preload\" \"\$py\" \"\$@\""
rc=$?
[ $rc = 124 ] && echo "FAIL: $* timed out (170 s)"
exit $rc
