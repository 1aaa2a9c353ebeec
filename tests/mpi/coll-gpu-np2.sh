#!/bin/sh
# make check: t_coll_gpu (every collective x algorithm on GPU memory, the stream form included,
# checked against Open MPI) on 2 ranks over shm + gpu_ipc; skips without a GPU (fake GPU builds have two)
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} T_COLL_MEM=gpu exec "$(dirname "$0")/run-mpi.sh" 2 shm,gpu_ipc tests/mpi/t_coll_gpu
