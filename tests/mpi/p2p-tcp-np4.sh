#!/bin/sh
# make check: t_p2p on 4 ranks over tcp (all pairs, up to 1 MiB)
exec "$(dirname "$0")/run-mpi.sh" 4 tcp tests/mpi/t_p2p --max-size 1048576
