#!/bin/sh
# make check: t_coll_gpu's stream-form cases only (T_COLL_STREAM_ONLY) on 3 ranks over
# shm + gpu_ipc: the direct stream path (coll/stream.c) with its sequence numbers starting
# near 2^32 so that they wrap during the back-to-back rounds, and a rank gone; skips
# without a GPU (fake GPU builds have two)
UCCL_COLL_STREAM_SEQ0=4294967270 T_COLL_STREAM_ONLY=1 UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} \
    T_COLL_MEM=gpu exec "$(dirname "$0")/run-mpi.sh" 3 shm,gpu_ipc tests/mpi/t_coll_gpu
