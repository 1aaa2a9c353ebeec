#!/bin/sh
# make check: t_comm on 1 rank
exec "$(dirname "$0")/run-mpi.sh" 1 shm,tcp tests/mpi/t_comm
