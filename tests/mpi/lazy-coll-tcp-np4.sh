#!/bin/sh
# make check: t_coll on 4 ranks over tcp with lazy connection (UCCL_LAZY_CONNECT=1:
# uccl_comm_init connects nobody; each collective connects the peers it talks to)
UCCL_LAZY_CONNECT=1 UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 4 tcp tests/mpi/t_coll
