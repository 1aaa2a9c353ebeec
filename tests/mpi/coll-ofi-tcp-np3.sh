#!/bin/sh
# make check: t_coll (every collective x algorithm, checked against Open MPI) on 3 ranks over ofi
# (libfabric provider tcp;ofi_rxm)
UCCL_OFI_PROVIDER='tcp;ofi_rxm' UCCL_TIMEOUT_MS=${UCCL_TIMEOUT_MS:-10000} exec "$(dirname "$0")/run-mpi.sh" 3 ofi tests/mpi/t_coll
