#!/bin/sh
# make check: t_boot --lazy-mix on 3 ranks over tcp: UCCL_LAZY_CONNECT=1 on
# rank 1 only, every rank refuses at once (instead of waiting UCCL_TIMEOUT_MS)
exec "$(dirname "$0")/run-mpi.sh" 3 tcp tests/mpi/t_boot --lazy-mix
