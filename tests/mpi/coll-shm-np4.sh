#!/bin/sh
# make check: t_coll (every collective x algorithm, checked against Open MPI) on 4 ranks over shm
# with every local copy on the copy helper thread (UCCL_COLL_COPY_THREAD=1, UCCL_COLL_COPY_MIN=0)
UCCL_COLL_COPY_THREAD=1 UCCL_COLL_COPY_MIN=0 UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 4 shm tests/mpi/t_coll
