#!/bin/sh
# make check: the fault suite (t_fault) over shm, UCCL_TIMEOUT_MS low so that
# frozen peers show within seconds
UCCL_TIMEOUT_MS=1500 exec "$(dirname "$0")/../mpi/run-mpi.sh" 2 shm tests/fault/t_fault
