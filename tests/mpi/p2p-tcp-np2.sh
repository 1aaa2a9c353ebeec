#!/bin/sh
# make check: t_p2p on 2 ranks over tcp
exec "$(dirname "$0")/run-mpi.sh" 2 tcp tests/mpi/t_p2p
