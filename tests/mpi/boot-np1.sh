#!/bin/sh
# make check: t_boot on 1 rank
exec "$(dirname "$0")/run-mpi.sh" 1 shm,tcp tests/mpi/t_boot
