#!/bin/sh
# make check: t_boot on 4 ranks that act as two hosts (UCCL_HOST_ID by rank
# parity): shm within a host, tcp between, and the host map agrees.
RUN_MPI_WRAPPER="$(dirname "$0")/host-by-parity.sh"
export RUN_MPI_WRAPPER
exec "$(dirname "$0")/run-mpi.sh" 4 shm,tcp tests/mpi/t_boot --hosts-by-parity
