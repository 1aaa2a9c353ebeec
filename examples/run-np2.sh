#!/bin/sh
# Run a built MPI program on two ranks the way make check does: MPIEXEC and
# top_builddir come from TESTS_ENVIRONMENT; a hang is cut off after 120 s.
# MPIEXEC holds a $(...) for the root check, hence eval.
prog=${top_builddir:-.}/$1
shift
# Open MPI's plugins leak by design and are unloaded before LeakSanitizer
# reports, so those leaks cannot be suppressed by name: no leak check under
# mpirun (the fork-based transport tests check the same code for leaks).
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
eval "exec timeout 120 ${MPIEXEC:-mpirun --oversubscribe} -np 2 \"\$prog\" \"\$@\""
