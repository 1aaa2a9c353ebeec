#!/bin/sh
# make check: t_coll_gpu on GPU memory, 4 ranks split into two emulated hosts (UCCL_HOST_ID):
# hierarchical and network algorithms, GPU memory staged by tcp between "hosts"; skips without a GPU
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} T_COLL_HOSTS=2 T_COLL_MEM=gpu exec "$(dirname "$0")/run-mpi.sh" 4 shm,tcp,gpu_ipc tests/mpi/t_coll_gpu
