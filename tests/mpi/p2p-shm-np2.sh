#!/bin/sh
# make check: t_p2p on 2 ranks over shm
exec "$(dirname "$0")/run-mpi.sh" 2 shm tests/mpi/t_p2p
