#!/bin/bash
# cputime.sh LOG LABEL PROGRAM [ARGS...]: run PROGRAM (its output and exit
# status untouched), then append "LABEL USER SYS" to LOG: the CPU seconds
# (user, system) of PROGRAM and every child it waited for (bash's time: no
# /usr/bin/time needed, which the device machine's root lacks). Under mpirun
# LABEL gets "-RANK". For bench.sh's BENCH_CPU=1: which side of a benchmark
# spins (ucx_perftest's put_bw target does; uccl_perf's sleeps:
# tests/perf/results/cluster/vm14/).
log=${1:?usage: cputime.sh LOG LABEL PROGRAM [ARGS...]} label=${2:?usage: cputime.sh LOG LABEL PROGRAM [ARGS...]}
shift 2
[ -n "${OMPI_COMM_WORLD_RANK:-}" ] && label=$label-$OMPI_COMM_WORLD_RANK
t=$(mktemp) || exit 1
TIMEFORMAT="%U %S"
# time's report goes to the group's stderr (the file), PROGRAM's to ours (fd 3)
{ time "$@" 2>&3 3>&-; } 3>&2 2>"$t"
rc=$?
echo "$label $(tail -n 1 "$t")" >>"$log"
rm -f "$t"
exit $rc
