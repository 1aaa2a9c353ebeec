#!/bin/sh
# make check: t_p2p on 2 ranks over ofi (libfabric provider tcp;ofi_rxm)
UCCL_OFI_PROVIDER='tcp;ofi_rxm' exec "$(dirname "$0")/run-mpi.sh" 2 ofi tests/mpi/t_p2p
