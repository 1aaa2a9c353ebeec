#!/bin/sh
# make check: t_coll on 4 ranks over tcp with every message of 4 KiB or more sent
# by rendezvous (UCCL_TCP_RNDV_MIN=4K: request to send, clear to send once the
# receive is posted), byte for byte against Open MPI; the default (1M) reaches
# that path only in t_coll's few large cases
UCCL_TCP_RNDV_MIN=4K UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 4 tcp tests/mpi/t_coll
