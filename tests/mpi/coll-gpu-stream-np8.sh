#!/bin/sh
# make check: t_coll_gpu's wide stream case only (T_COLL_STREAM_CASE=wide) on 8 ranks over
# shm + gpu_ipc, as on a host of 8 GPUs: a direct stream allgather enqueues the most stream
# operations a call has (every peer written into and waited for); skips without a GPU
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-20000} T_COLL_STREAM_ONLY=1 T_COLL_STREAM_CASE=wide \
    T_COLL_MEM=gpu exec "$(dirname "$0")/run-mpi.sh" 8 shm,gpu_ipc tests/mpi/t_coll_gpu
