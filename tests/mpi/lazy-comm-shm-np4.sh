#!/bin/sh
# make check: t_comm on 4 ranks over shm with lazy connection (UCCL_LAZY_CONNECT=1:
# uccl_comm_init connects nobody; each pair connects on first use)
UCCL_LAZY_CONNECT=1 UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 4 shm tests/mpi/t_comm
