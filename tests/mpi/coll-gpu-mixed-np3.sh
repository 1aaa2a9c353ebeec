#!/bin/sh
# make check: t_coll_gpu with mixed memory (even ranks send from host into GPU, odd ranks from
# GPU into host) on 3 ranks over shm + gpu_ipc; skips without a GPU
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} T_COLL_MEM=mixed exec "$(dirname "$0")/run-mpi.sh" 3 shm,gpu_ipc tests/mpi/t_coll_gpu
