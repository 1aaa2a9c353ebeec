#!/bin/sh
# make check: t_coll (every collective x algorithm, checked against Open MPI) on 4 ranks over shm
# with every local copy on the copy helper thread (UCCL_COLL_COPY_THREAD=1, UCCL_COLL_COPY_MIN=0)
# and the second half of every CMA transfer from 8 KiB on the shm CMA helper thread
# (UCCL_SHM_CMA_HELPER=1, UCCL_SHM_CMA_HELPER_MIN=8K: t_coll's buffers are malloc'd)
UCCL_COLL_COPY_THREAD=1 UCCL_COLL_COPY_MIN=0 UCCL_SHM_CMA_HELPER=1 UCCL_SHM_CMA_HELPER_MIN=8K \
    UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 4 shm tests/mpi/t_coll
