#!/bin/sh
# Run an MPI test: run-mpi.sh NP TRANSPORTS PROGRAM [ARGS...]
# TRANSPORTS goes to UCCL_TRANSPORTS (shm, tcp, verbs, ...); the program
# exits 77 (skip) on every rank when they are not usable here. MPIEXEC and
# top_builddir come from make check's TESTS_ENVIRONMENT (MPIEXEC holds a
# $(...) for the root check, hence eval); a hang is cut off after
# RUN_MPI_TIMEOUT seconds (default 170).
# RUN_MPI_WRAPPER, when set, is a command each rank runs PROGRAM through.
np=$1 transports=$2 prog=${top_builddir:-.}/$3
shift 3
UCCL_TRANSPORTS=$transports
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-30000}
export UCCL_TRANSPORTS UCCL_TIMEOUT_MS
echo "# $np ranks, UCCL_TRANSPORTS=$transports, UCCL_TIMEOUT_MS=$UCCL_TIMEOUT_MS:" \
    "${RUN_MPI_WRAPPER:+$RUN_MPI_WRAPPER }$prog $*"
# Open MPI's plugins leak by design and are unloaded before LeakSanitizer
# reports, so those leaks cannot be suppressed by name: no leak check under
# mpirun (the fork-based transport tests check the same code for leaks).
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
if [ -n "$RUN_MPI_WRAPPER" ]; then
    set -- "$RUN_MPI_WRAPPER" "$prog" "$@"
else
    set -- "$prog" "$@"
fi
limit=${RUN_MPI_TIMEOUT:-170}
eval "timeout $limit ${MPIEXEC:-mpirun --oversubscribe} -np \$np \"\$@\""
rc=$?
[ $rc = 124 ] && echo "FAIL: $prog timed out ($limit s)"
exit $rc
