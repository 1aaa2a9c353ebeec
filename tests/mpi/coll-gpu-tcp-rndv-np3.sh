#!/bin/sh
# make check: t_coll_gpu on 3 ranks over tcp with GPU buffers (staged through pinned
# host memory) and every message of 4 KiB or more by rendezvous (UCCL_TCP_RNDV_MIN=4K:
# a waiting send is staged only from its clear to send on); skips without a GPU
UCCL_TCP_RNDV_MIN=4K UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} T_COLL_MEM=gpu exec "$(dirname "$0")/run-mpi.sh" 3 tcp tests/mpi/t_coll_gpu
