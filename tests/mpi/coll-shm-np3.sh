#!/bin/sh
# make check: t_coll (every collective x algorithm, checked against Open MPI) on 3 ranks over shm
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 3 shm tests/mpi/t_coll
