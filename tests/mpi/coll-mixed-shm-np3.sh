#!/bin/sh
# make check: t_coll_edge's case of ranks on one host of which rank 1 has no shm
# (UCCL_TRANSPORTS=tcp there, shm,tcp elsewhere): AUTO picks alike on every rank
T_COLL_EDGE_MIXED=1 RUN_MPI_WRAPPER="$(dirname "$0")/shm-off-rank1.sh" \
    UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-5000} exec "$(dirname "$0")/run-mpi.sh" 3 shm,tcp tests/mpi/t_coll_edge
