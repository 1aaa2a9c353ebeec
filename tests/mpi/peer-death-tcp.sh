#!/bin/sh
# make check: t_peer_death over tcp (peer failure must show well before the timeout)
UCCL_TIMEOUT_MS=3000 exec "$(dirname "$0")/run-mpi.sh" 2 tcp tests/mpi/t_peer_death
