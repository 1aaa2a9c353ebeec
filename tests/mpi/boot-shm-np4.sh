#!/bin/sh
# make check: t_boot on 4 ranks over shm
exec "$(dirname "$0")/run-mpi.sh" 4 shm tests/mpi/t_boot
