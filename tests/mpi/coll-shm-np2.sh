#!/bin/sh
# make check: t_coll (every collective x algorithm, checked against Open MPI) on 2 ranks over shm,
# with UCCL_COLL_ALGO=ring forcing allgather(v) where the args leave the algorithm unset
UCCL_COLL_ALGO=ring UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 2 shm tests/mpi/t_coll
