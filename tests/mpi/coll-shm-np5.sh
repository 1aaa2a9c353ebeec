#!/bin/sh
# make check: t_coll (every collective x algorithm, checked against Open MPI) on 5 ranks over shm,
# with algorithm mapped's ring at 3 buffers per writer (UCCL_COLL_MAPPED_DEPTH: the other
# rank counts run the default 16) so that its rings wrap often
UCCL_COLL_MAPPED_DEPTH=3 UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 5 shm tests/mpi/t_coll
