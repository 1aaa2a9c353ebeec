#!/bin/sh
# Run a built MPI program on N ranks the way make check does (see run-np2.sh):
# run-np.sh N PROGRAM [ARGS...]
n=$1
prog=${top_builddir:-.}/$2
shift 2
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
eval "exec timeout 120 ${MPIEXEC:-mpirun --oversubscribe} -np \"\$n\" \"\$prog\" \"\$@\""
