#!/bin/sh
# make check: t_boot on 3 ranks over tcp
exec "$(dirname "$0")/run-mpi.sh" 3 tcp tests/mpi/t_boot
