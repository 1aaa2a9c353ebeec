#!/bin/sh
# make check: t_coll on 4 ranks split into 2 emulated hosts (UCCL_HOST_ID, ranks 0,2 and 1,3):
# shm inside a host, tcp between them, the table's multi-host choices
T_COLL_HOSTS=2 UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 4 shm,tcp tests/mpi/t_coll
