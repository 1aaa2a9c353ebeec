#!/bin/sh
# make check: t_coll_edge (v-variant blocks past the address space, plans outliving their
# comm) on 3 ranks over shm
UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-5000} exec "$(dirname "$0")/run-mpi.sh" 3 shm tests/mpi/t_coll_edge
