#!/bin/sh
# Run a built MPI program on two ranks the way make check does: MPIEXEC and
# top_builddir come from TESTS_ENVIRONMENT; a hang is cut off after 120 s.
# MPIEXEC holds a $(...) for the root check, hence eval.
prog=${top_builddir:-.}/$1
shift
eval "exec timeout 120 ${MPIEXEC:-mpirun --oversubscribe} -np 2 \"\$prog\" \"\$@\""
