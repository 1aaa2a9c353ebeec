#!/bin/sh
# make check: t_p2p on 2 ranks over ofi (libfabric provider shm)
UCCL_OFI_PROVIDER='shm' exec "$(dirname "$0")/run-mpi.sh" 2 ofi tests/mpi/t_p2p
