#!/bin/sh
# make check: t_coll (every collective x algorithm, checked against Open MPI) on 5 ranks over tcp
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 5 tcp tests/mpi/t_coll
