#!/bin/sh
# make check: t_comm on 8 ranks over shm
exec "$(dirname "$0")/run-mpi.sh" 8 shm tests/mpi/t_comm
